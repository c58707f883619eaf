package apply_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpuenv/gpuenv/apply"
	"github.com/gpuenv/gpuenv/apply/applytest"
	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/host"
)

// twoPlans splits the standard plan in two applies: the packages and
// environment first, the groups, service and Python after.
func twoPlans(index string) (*plan.Plan, *plan.Plan) {
	all := applytest.StandardPlan(index)
	first := &plan.Plan{FormatVersion: all.FormatVersion, SpecDigest: "sha256:one", Steps: all.Steps[:4]}
	first.Transactions = planner.Batch(first.Steps)
	second := &plan.Plan{FormatVersion: all.FormatVersion, SpecDigest: "sha256:two", Steps: all.Steps[4:]}
	return first, second
}

func TestRollbackWalksBackAndTo(t *testing.T) {
	fx := newFixture(t)
	s0 := fx.snapshot()
	p1, p2 := twoPlans(fx.Index)
	fx.apply(p1, fx.opts(nil))
	s1 := fx.snapshot()
	fx.apply(p2, fx.opts(nil))
	s2 := fx.snapshot()

	res := fx.rollback(-1)
	if res.Generation != 3 || res.Status != apply.StatusDone {
		t.Fatalf("first rollback: generation %d %s", res.Generation, res.Status)
	}
	fx.same(s1, "after one rollback")
	fx.rollsBack(s0, "after two rollbacks")

	gens, err := apply.History(fx.h, stateDir)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, g := range gens {
		kinds = append(kinds, string(g.Kind)+":"+string(g.Status))
	}
	if got := strings.Join(kinds, " "); got != "apply:applied apply:applied rollback:done rollback:done" {
		t.Errorf("history: %s", got)
	}
	if gens[0].UndoneBy != 4 || gens[1].UndoneBy != 3 || gens[0].SpecDigest != "sha256:one" {
		t.Errorf("undone by: %d %d", gens[0].UndoneBy, gens[1].UndoneBy)
	}

	// --to N returns to the host right after N; --to 0 to the first one.
	r5 := fx.apply(p1, fx.opts(nil))
	fx.apply(p2, fx.opts(nil))
	fx.same(s2, "after applying both again")
	fx.rollback(5)
	fx.same(s1, "after rollback --to 5")
	if _, err := apply.Rollback(context.Background(), fx.h, apply.RollbackOptions{StateDir: stateDir, To: 6}); err == nil || !strings.Contains(err.Error(), "undone") {
		t.Errorf("rollback --to an undone generation: %v", err)
	}
	if _, err := apply.Rollback(context.Background(), fx.h, apply.RollbackOptions{StateDir: stateDir, To: 3}); err == nil || !strings.Contains(err.Error(), "is a rollback") {
		t.Errorf("rollback --to a rollback generation: %v", err)
	}
	r8 := fx.apply(p2, fx.opts(nil))
	res = fx.rollback(0)
	// --to 0 now undoes generations 8 and 5: every operation they carried
	// out (the ones skipped on a root that is not the running system have
	// nothing to undo), newest first, each under its own step.
	var want []string
	for _, done := range slices.Concat(r5.Done, r8.Done) {
		address, _, _ := strings.Cut(done, ": ")
		want = append(want, address)
	}
	slices.Reverse(want)
	var got []string
	for _, r := range res.Reverted {
		address, _, _ := strings.Cut(r, ": ")
		got = append(got, address)
	}
	if len(want) == 0 || !slices.Equal(got, want) {
		t.Errorf("rollback --to 0 reverted %d inverses, want %d (generations 8 and 5, newest first):\ngot  %q\nwant %q\nreverted: %q",
			len(got), len(want), got, want, res.Reverted)
	}
	fx.same(s0, "after rollback --to 0")
	if res := fx.rollback(0); res.Generation != 0 {
		t.Errorf("a second --to 0 made generation %d", res.Generation)
	}
}

func TestRollbackConfirmAndDecline(t *testing.T) {
	fx := newFixture(t)
	p1, _ := twoPlans(fx.Index)
	fx.apply(p1, fx.opts(nil))
	s1 := fx.snapshot()
	var shown *apply.RollbackPlan
	_, err := apply.Rollback(context.Background(), fx.h, apply.RollbackOptions{StateDir: stateDir, To: -1, Confirm: func(p *apply.RollbackPlan) bool {
		shown = p
		return false
	}})
	if !errors.Is(err, apply.ErrDeclined) {
		t.Fatalf("declined rollback: %v", err)
	}
	fx.same(s1, "after a declined rollback")
	if shown == nil || len(shown.Generations) != 1 || shown.Generations[0] != 1 || len(shown.Undo) != 6 ||
		!strings.HasPrefix(shown.Undo[0], "1.7 environment: restoring /etc/profile.d/bash_completion.sh") {
		t.Errorf("shown: %+v", shown)
	}
	if gens, _ := apply.History(fx.h, stateDir); len(gens) != 1 {
		t.Errorf("a declined rollback made a generation: %+v", gens)
	}
}

func TestConcurrentApplyRefused(t *testing.T) {
	fx := newFixture(t)
	store, lock := fx.lock()
	before := fx.snapshot()
	_, err := apply.Apply(context.Background(), fx.h, applytest.StandardPlan(fx.Index), fx.opts(nil))
	var le *apply.LockedError
	if !errors.As(err, &le) || le.Stale || le.Holder.PID != os.Getpid() || !strings.Contains(err.Error(), "another gpuenv is running") {
		t.Fatalf("second apply: %v", err)
	}
	if _, err := apply.Rollback(context.Background(), fx.h, apply.RollbackOptions{StateDir: stateDir, To: -1}); !errors.As(err, &le) {
		t.Errorf("rollback during an apply: %v", err)
	}
	if _, removed, err := store.ForceUnlock(); err == nil || removed {
		t.Errorf("force-unlock of a live lock: removed %v, %v", removed, err)
	}
	fx.same(before, "after refused runs")
	if err := lock.Release(); err != nil {
		t.Fatal(err)
	}
	if res := fx.apply(applytest.StandardPlan(fx.Index), fx.opts(nil)); res.Status != apply.StatusApplied {
		t.Errorf("apply after the lock was released: %s", res.Status)
	}
	if _, removed, err := store.ForceUnlock(); err != nil || removed {
		t.Errorf("force-unlock without a lock: removed %v, %v", removed, err)
	}
}

// TestCorruptJournal damages a finished generation's journal in the ways
// a disk or a person can: a flipped byte, a cut in the middle of a record,
// lost records at the end. Rollback must refuse, change nothing, and say
// which file and line.
func TestCorruptJournal(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func([]byte) []byte
		want   string
	}{
		{"flipped byte", func(b []byte) []byte {
			i := strings.Index(string(b), "nvidia-persistenced")
			b[i] = 'X'
			return b
		}, "checksum mismatch"},
		{"cut mid-record", func(b []byte) []byte { return b[:len(b)/2] }, "line"},
		{"last record lost", func(b []byte) []byte {
			lines := strings.SplitAfter(strings.TrimSuffix(string(b), "\n"), "\n")
			return []byte(strings.Join(lines[:len(lines)-1], ""))
		}, "no end record"},
		{"empty", func([]byte) []byte { return nil }, "no end record"},
		{"garbage", func(b []byte) []byte { return append([]byte("{not json\n"), b...) }, "not a journal record"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := newFixture(t)
			fx.apply(applytest.StandardPlan(fx.Index), fx.opts(nil))
			after := fx.snapshot()
			p := filepath.Join(fx.Root, stateDir, "generations/1/journal")
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, tc.damage(data), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err = apply.Rollback(context.Background(), fx.h, apply.RollbackOptions{StateDir: stateDir, To: -1})
			var ce *apply.CorruptJournalError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "generations/1/journal") || !strings.Contains(err.Error(), "nothing was changed") {
				t.Fatalf("rollback over a damaged journal: %v", err)
			}
			fx.same(after, "after a refused rollback")
			if gens, _ := apply.History(fx.h, stateDir); len(gens) != 1 {
				t.Errorf("a refused rollback made a generation")
			}
		})
	}
}

func TestPruneKeepsNewest(t *testing.T) {
	fx := newFixture(t)
	p1, p2 := twoPlans(fx.Index)
	fx.apply(p1, fx.opts(nil))
	fx.apply(p2, fx.opts(nil))
	pr, err := apply.Prune(fx.h, stateDir, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(pr.Generations) != 1 || pr.Generations[0] != 1 || pr.Bytes == 0 {
		t.Fatalf("pruned %+v", pr)
	}
	entries, _ := os.ReadDir(filepath.Join(fx.Root, stateDir, "generations/1/packages"))
	if len(entries) != 0 {
		t.Errorf("generation 1 still has saved packages: %v", entries)
	}
	entries, _ = os.ReadDir(filepath.Join(fx.Root, stateDir, "generations/2/packages"))
	if len(entries) == 0 {
		t.Error("generation 2's saved packages were pruned")
	}
	gens, _ := apply.History(fx.h, stateDir)
	if !gens[0].Pruned || gens[1].Pruned {
		t.Errorf("pruned flags: %v %v", gens[0].Pruned, gens[1].Pruned)
	}
	if _, err := apply.Prune(fx.h, stateDir, -1); err == nil {
		t.Error("--keep -1 accepted")
	}
}

// TestAptWaitsForDpkgLock holds dpkg's front-end lock as
// unattended-upgrades would: the transaction waits, says so, and gives up
// after the timeout, changing nothing.
func TestAptWaitsForDpkgLock(t *testing.T) {
	fx := newFixture(t)
	before := fx.snapshot()
	f, err := os.OpenFile(filepath.Join(fx.Root, "var/lib/dpkg/lock-frontend"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lk := unix.Flock_t{Type: unix.F_WRLCK}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk); err != nil {
		t.Fatal(err)
	}
	p1, _ := twoPlans(fx.Index)
	start := time.Now()
	res := fx.apply(p1, fx.opts(&apply.HostExecutor{Host: fx.h, PackageLockTimeout: 300 * time.Millisecond}))
	if res.Status != apply.StatusReverted || !strings.Contains(res.Failed.Error, "still held after 300ms") {
		t.Fatalf("status %s, failure %+v", res.Status, res.Failed)
	}
	if time.Since(start) < 300*time.Millisecond {
		t.Error("did not wait")
	}
	if !strings.Contains(fx.out.String(), "waiting up to 300ms for dpkg's lock /var/lib/dpkg/lock-frontend") {
		t.Errorf("no waiting message:\n%s", fx.out.String())
	}
	fx.same(before, "after giving up on the lock")
}

// TestApplyRemovalsAndOddFiles covers what the standard plan does not:
// an apt purge, a pip uninstall, a file written over a symlink, a file
// with setuid bits and another owner replaced, and a file removal; all
// undone, the odd file with its bits and owner.
func TestApplyRemovalsAndOddFiles(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a file owned by another user needs root")
	}
	fx := newFixture(t)
	link := filepath.Join(fx.Root, "etc/profile.d/gpuenv.sh")
	if err := os.Symlink("../../usr/lib/os-release", link); err != nil {
		t.Fatal(err)
	}
	odd := filepath.Join(fx.Root, "etc/ld.so.conf.d/x86_64-linux-gnu.conf")
	if err := os.Chown(odd, 1000, 44); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(odd, 0o4750); err != nil {
		t.Fatal(err)
	}
	before := fx.snapshot()
	p := &plan.Plan{FormatVersion: plan.FormatVersion, Steps: []plan.Step{
		{Address: "driver", Action: plan.Delete, Operations: []plan.Operation{{Kind: plan.OpPackages, Packages: &plan.PackagesOp{
			Manager: "apt", Remove: []string{"nvidia-smi"}, Purge: true,
		}}}},
		{Address: "framework.pytorch", Action: plan.Delete, Operations: []plan.Operation{{Kind: plan.OpPackages, Packages: &plan.PackagesOp{
			Manager: "pip", Venv: applytest.Venv, IndexURL: fx.Index, Remove: []string{"torch"},
		}}}},
		{Address: "environment", Action: plan.Update, Operations: []plan.Operation{
			{Kind: plan.OpFile, File: &plan.FileOp{Path: "/etc/profile.d/gpuenv.sh", Content: "export CUDA_DEVICE_ORDER=PCI_BUS_ID\n", Mode: 0o644}},
			{Kind: plan.OpFile, File: &plan.FileOp{Path: "/etc/ld.so.conf.d/x86_64-linux-gnu.conf", Content: "/usr/lib/x86_64-linux-gnu\n", Mode: 0o644, After: []string{"ldconfig"}}},
			{Kind: plan.OpFile, File: &plan.FileOp{Path: "/etc/profile.d/bash_completion.sh", Remove: true}},
		}},
	}}
	fx.applies(p)
	if strings.Contains(fx.read("/var/lib/dpkg/status"), "Package: nvidia-smi") || fx.exists("/usr/bin/nvidia-smi") {
		t.Error("nvidia-smi was not removed")
	}
	if fx.exists(applytest.Venv + "/lib/python3.11/site-packages/torch") {
		t.Error("torch was not uninstalled")
	}
	if fi, err := os.Lstat(link); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("/etc/profile.d/gpuenv.sh is not a file written over the link: %v %v", fi.Mode(), err)
	}
	if !strings.HasPrefix(fx.read("/usr/lib/os-release"), "PRETTY_NAME") {
		t.Errorf("the link's target was written through:\n%s", fx.read("/usr/lib/os-release"))
	}
	if fi, err := os.Lstat(odd); err != nil || fi.Mode()&os.ModeSetuid != 0 || fi.Mode().Perm() != 0o644 {
		t.Errorf("%s: %v %v", odd, fi.Mode(), err)
	}
	fx.rollsBack(before, "after undoing removals")
}

// TestOrphanGenerationDirectory is what a kill between creating a
// generation's directory and writing its meta.json leaves: it is not
// listed, and, since it holds nothing, it is removed and its number used
// again, so that an empty generations/99 does not make the next one 100.
func TestOrphanGenerationDirectory(t *testing.T) {
	fx := newFixture(t)
	if err := os.MkdirAll(filepath.Join(fx.Root, stateDir, "generations/1/files"), 0o700); err != nil {
		t.Fatal(err)
	}
	p1, p2 := twoPlans(fx.Index)
	res := fx.apply(p1, fx.opts(nil))
	if res.Generation != 1 || res.Status != apply.StatusApplied {
		t.Fatalf("generation %d %s", res.Generation, res.Status)
	}
	for _, d := range []string{"files", "packages"} {
		if err := os.MkdirAll(filepath.Join(fx.Root, stateDir, "generations/99", d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if gens, err := apply.History(fx.h, stateDir); err != nil || len(gens) != 1 {
		t.Errorf("history with an empty leftover: %v %v", gens, err)
	}
	if res := fx.apply(p2, fx.opts(nil)); res.Generation != 2 {
		t.Errorf("after an empty generations/99 the next generation is %d, want 2", res.Generation)
	}
	if _, err := os.Stat(filepath.Join(fx.Root, stateDir, "generations/99")); !os.IsNotExist(err) {
		t.Errorf("the empty leftover generations/99 is still there: %v", err)
	}
	if gens, err := apply.History(fx.h, stateDir); err != nil || len(gens) != 2 {
		t.Errorf("history: %v %v", gens, err)
	}
}

// TestApplyInterrupted cancels the context (Ctrl-C) during an apply: the
// operation under way finishes, the apply stops before the next and
// reverts.
func TestApplyInterrupted(t *testing.T) {
	fx := newFixture(t)
	before := fx.snapshot()
	ctx, cancel := context.WithCancel(context.Background())
	o := fx.opts(nil)
	o.JournalPoint = func(n int) {
		if n == 6 { // the third operation's record: it was skipped
			cancel()
		}
	}
	res, err := apply.Apply(ctx, fx.h, applytest.StandardPlan(fx.Index), o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != apply.StatusReverted || !strings.Contains(res.Failed.Error, "interrupted before operation 4") || len(res.Reverted) != 2 {
		t.Fatalf("status %s, failed %+v, reverted %q\n%s", res.Status, res.Failed, res.Reverted, fx.out.String())
	}
	fx.same(before, "after an interrupted apply")
}

// TestRollbackAfterPrune: with the saved wheel pruned, the inverse
// fetches the old version from the index again, saying so.
func TestRollbackAfterPrune(t *testing.T) {
	fx := newFixture(t)
	p1, p2 := twoPlans(fx.Index)
	fx.apply(p1, fx.opts(nil))
	s1 := fx.snapshot()
	fx.apply(p2, fx.opts(nil))
	if _, err := apply.Prune(fx.h, stateDir, 0); err != nil {
		t.Fatal(err)
	}
	res := fx.rollback(-1)
	if res.Status != apply.StatusDone {
		t.Fatalf("%s %+v\n%s", res.Status, res.RevertFailed, fx.out.String())
	}
	if !strings.Contains(fx.out.String(), "the saved wheel of torch 2.4.1+cu121 is gone; installing it from the index") {
		t.Errorf("no word of the fallback:\n%s", fx.out.String())
	}
	fx.same(s1, "after a rollback from the index")
}

// A rollback on a root where nothing was ever applied changes nothing,
// not even by creating the state directory.
func TestRollbackWithoutStateLeavesNoTrace(t *testing.T) {
	root := t.TempDir()
	h, err := host.New(root)
	if err != nil {
		t.Fatal(err)
	}
	var out eventLog
	res, err := apply.Rollback(context.Background(), h, apply.RollbackOptions{StateDir: "/var/lib/gpuenv", To: -1, Hook: &out})
	if err != nil || res.Status != apply.StatusDone || res.Generation != 0 || len(out.Events()) != 0 {
		t.Fatalf("Rollback = %+v, %v, events:\n%s", res, err, out.String())
	}
	if _, err := os.Lstat(filepath.Join(root, "var/lib/gpuenv")); !os.IsNotExist(err) {
		t.Errorf("the state directory was created: %v", err)
	}
	if _, err := apply.Rollback(context.Background(), h, apply.RollbackOptions{StateDir: "/var/lib/gpuenv", To: 3}); err == nil {
		t.Error("--to 3 with no generations was accepted")
	}
}
