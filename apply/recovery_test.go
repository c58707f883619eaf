package apply_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/apply"
	"github.com/gpuenv/gpuenv/apply/applytest"
	"github.com/gpuenv/gpuenv/planner/plan"
)

// A power cut while dpkg unpacks a package leaves it half-installed and
// needing reinstallation; apt refuses to touch the database after that,
// and `dpkg --configure -a` cannot fix it. The revert repairs dpkg from
// the saved package files and ends with every package as it was.
func TestRevertAfterDpkgCutDuringUnpack(t *testing.T) {
	fx := newFixture(t)
	before := fx.snapshot()
	fx.runner.Env = append(fx.runner.Env, applytest.EnvFail+"=apt-get:install@reinstreq")
	res := fx.apply(applytest.StandardPlan(fx.Index), fx.opts(nil))
	if res.Status != apply.StatusReverted || res.ExitCode() != 1 {
		t.Fatalf("status %s exit %d, revert %+v\n%s", res.Status, res.ExitCode(), res.RevertFailed, fx.out.String())
	}
	if len(res.Reverted) != 1 || !strings.Contains(fx.out.String(), "dpkg was interrupted") {
		t.Fatalf("the transaction was not cut and reverted: reverted %q\n%s", res.Reverted, fx.out.String())
	}
	fx.same(before, "after a revert from a half-unpacked package")
}

// The same cut, with the apply's process gone too (--no-revert stands in
// for the kill): a later rollback finishes from dpkg's state as found.
func TestRollbackAfterDpkgCutDuringUnpack(t *testing.T) {
	fx := newFixture(t)
	before := fx.snapshot()
	fx.runner.Env = append(fx.runner.Env, applytest.EnvFail+"=apt-get:install@reinstreq")
	o := fx.opts(nil)
	o.NoRevert = true
	if res := fx.apply(applytest.StandardPlan(fx.Index), o); res.Status != apply.StatusFailed {
		t.Fatalf("status %s", res.Status)
	}
	fx.rollbackRepairs(before, "reinstreq", "after a rollback from a half-unpacked package")
}

// rollbackRepairs checks that dpkg's status file shows a package in
// state, as an interrupted transaction left it, and that a rollback then
// ends with the host as it was before.
func (fx *fixture) rollbackRepairs(before *applytest.State, state, what string) {
	fx.t.Helper()
	if !strings.Contains(fx.read("/var/lib/dpkg/status"), state) {
		fx.t.Fatalf("no package was left %s", state)
	}
	fx.rollsBack(before, what)
}

// failAfterApt fails the second operation, after the apt transaction
// ran, and makes the revert's own apt transaction die in a postinst.
type failAfterApt struct {
	apply.Executor
	fx *fixture
	n  int
}

func (x *failAfterApt) Run(ctx context.Context, ws *apply.Workspace, op plan.Operation) error {
	x.n++
	if x.n == 2 {
		x.fx.runner.Env = append(x.fx.runner.Env, applytest.EnvFail+"=apt-get:install@half")
		return errors.New("injected failure")
	}
	return x.Executor.Run(ctx, ws, op)
}

// A revert whose own package transaction dies in a postinst leaves the
// packages at the right versions but half-configured. The revert fails
// (exit 3); the rollback after it must not take "right version" for
// "done", and the host ends as it was, every package configured.
func TestRollbackJudgesPackagesByStatus(t *testing.T) {
	fx := newFixture(t)
	before := fx.snapshot()
	res := fx.apply(applytest.StandardPlan(fx.Index), fx.opts(&failAfterApt{Executor: fx.executor(), fx: fx}))
	if res.Status != apply.StatusFailed || res.ExitCode() != 3 {
		t.Fatalf("status %s exit %d\n%s", res.Status, res.ExitCode(), fx.out.String())
	}
	fx.rollbackRepairs(before, "half-configured", "after the rollback repaired the half-configured packages")
}

// apt-get can exit 0 with a package left half-configured (a trigger that
// failed after the transaction). The apply's last step checks the whole
// package set, so the apply fails, reverts and says which package.
func TestApplyChecksPackageDatabase(t *testing.T) {
	fx := newFixture(t)
	before := fx.snapshot()
	fx.runner.Env = append(fx.runner.Env, applytest.EnvFail+"=apt-get:install@quiet")
	res := fx.apply(applytest.StandardPlan(fx.Index), fx.opts(nil))
	if res.Status != apply.StatusReverted || res.Failed == nil {
		t.Fatalf("status %s, failed %+v\n%s", res.Status, res.Failed, fx.out.String())
	}
	if !strings.Contains(res.Failed.Error, "half-configured") || !strings.Contains(res.Failed.What, "package database") {
		t.Errorf("the failure does not name the half-configured package: %+v", res.Failed)
	}
	fx.same(before, "after a revert of an apply whose package check failed")
}

// interruptLast cancels the apply's context while the last operation
// runs, as SIGTERM arriving then does.
type interruptLast struct {
	apply.Executor
	cancel func()
	last   int
	n      int
}

func (x *interruptLast) Run(ctx context.Context, ws *apply.Workspace, op plan.Operation) error {
	x.n++
	if x.n == x.last {
		x.cancel()
	}
	return x.Executor.Run(ctx, ws, op)
}

// A signal during the last operation reverts the apply (exit 1): it is
// interrupted until its end record is written.
func TestSignalDuringLastOperationReverts(t *testing.T) {
	fx := newFixture(t)
	before := fx.snapshot()
	plan := applytest.StandardPlan(fx.Index)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// 13 operations, of which the kernel and device ones are skipped on a
	// fixture root: the last one run is the 11th.
	x := &interruptLast{Executor: fx.executor(), cancel: cancel, last: 11}
	res, err := apply.Apply(ctx, fx.h, plan, fx.opts(x))
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != apply.StatusReverted || res.ExitCode() != 1 {
		t.Fatalf("status %s exit %d\n%s", res.Status, res.ExitCode(), fx.out.String())
	}
	if x.n != 11 {
		t.Fatalf("%d operations ran, want the interruption in the last one (11)", x.n)
	}
	fx.same(before, "after an apply interrupted in its last operation")
}

// A write that failed half-way because the disk was full leaves a torn
// last record; once space is free, rollback continues from the last
// whole record, and a rollback torn the same way is continued too.
func TestTornJournalRecordIsRecovered(t *testing.T) {
	for _, mode := range []string{"apply", "rollback"} {
		t.Run(mode, func(t *testing.T) {
			fx := newFixture(t)
			before := fx.snapshot()
			gen := "1"
			if mode == "rollback" {
				fx.applies(applytest.StandardPlan(fx.Index))
				gen = "2"
			}
			if !runKilled(t, fx.dir, mode, 7) {
				t.Fatal("not killed")
			}
			j := filepath.Join(fx.Root, stateDir, "generations", gen, "journal")
			f, err := os.OpenFile(j, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString(`{"n":8,"time":"2026-12-01T00:00:00Z","event":"be`)
			f.Close()
			fx.forceUnlock()
			fx.rollsBack(before, "after a torn journal record")
			if _, err := apply.ReadJournal(j, mode == "rollback"); err != nil {
				t.Errorf("the continued journal does not read back whole: %v", err)
			}
			gens, err := apply.History(fx.h, stateDir)
			if err != nil || gens[len(gens)-1].Status != apply.StatusDone {
				t.Errorf("history: %+v %v", gens, err)
			}
		})
	}
}

// A journal cut exactly at a record boundary (the failed write wrote
// nothing) is an unfinished generation, not a finished one.
func TestJournalCutAtRecordBoundaryIsUnfinished(t *testing.T) {
	fx := newFixture(t)
	before := fx.snapshot()
	if !runKilled(t, fx.dir, "apply", 9) {
		t.Fatal("not killed")
	}
	st, err := apply.ReadStatus(fx.h, stateDir)
	if err != nil || !st.Unfinished {
		t.Fatalf("status %+v %v, want unfinished", st, err)
	}
	recoverAndCheck(t, fx.testHost, applytest.StandardPlan(fx.Index), before, false)
}

// meta.json is rewritten after the journal's end record; when that write
// fails (the disk full), the journal still says how the generation ended.
func TestMetaWriteFailureKeepsJournalsEnding(t *testing.T) {
	fx := newFixture(t)
	fx.applies(applytest.StandardPlan(fx.Index))
	p := filepath.Join(fx.Root, stateDir, "generations/1/meta.json")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(data), `"status": "applied"`, `"status": "running"`, 1)
	i := strings.Index(s, `  "finished"`)
	j := strings.Index(s[i:], "\n")
	s = s[:i] + s[i+j+1:]
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	st := filepath.Join(fx.Root, stateDir, "status.json")
	if err := os.WriteFile(st, []byte(`{"unfinished": true, "generation": 1, "kind": "apply", "status": "running"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	gens, err := apply.History(fx.h, stateDir)
	if err != nil || len(gens) != 1 || gens[0].Status != apply.StatusApplied || gens[0].Finished == nil {
		t.Fatalf("history: %+v %v, want generation 1 applied", gens, err)
	}
	// Before any command rewrites it, the stale status file is read
	// through the journal.
	if st, err := apply.ReadStatus(fx.h, stateDir); err != nil || st.Unfinished || st.Status != apply.StatusApplied {
		t.Fatalf("status: %+v %v, want generation 1 applied", st, err)
	}
	// A locked command writes the truth back, status.json included.
	_, err = apply.Apply(context.Background(), fx.h, applytest.StandardPlan(fx.Index), fx.opts(nil))
	var uf *apply.UnfinishedError
	if errors.As(err, &uf) {
		t.Fatalf("apply refused over a generation that ended: %v", err)
	}
	if st, _ := apply.ReadStatus(fx.h, stateDir); st.Unfinished {
		t.Errorf("status.json still says unfinished: %+v", st)
	}
}

// A rollback whose own transaction is cut while dpkg unpacks is resumed
// by the next rollback, which repairs dpkg first instead of stopping at
// apt's "dpkg was interrupted" or "needs to be reinstalled".
func TestInterruptedRollbackIsResumed(t *testing.T) {
	fx := newFixture(t)
	before := fx.snapshot()
	fx.applies(applytest.StandardPlan(fx.Index))
	fx.runner.Env = append(fx.runner.Env, applytest.EnvFail+"=apt-get:install@reinstreq")
	res := fx.rollback(-1)
	if res.Status != apply.StatusFailed || res.ExitCode() != 3 {
		t.Fatalf("the cut rollback: %s exit %d\n%s", res.Status, res.ExitCode(), fx.out.String())
	}
	fx.rollbackRepairs(before, "reinstreq", "after a resumed rollback")
	gens, _ := apply.History(fx.h, stateDir)
	if len(gens) != 2 || gens[1].Status != apply.StatusDone || gens[0].UndoneBy != 2 {
		t.Errorf("history: %+v", gens)
	}
}

// A download into a full disk can leave an empty package file while
// apt-get exits 0. The file is checked when it is saved: the cut one is
// thrown away and the package rebuilt from dpkg's records, so that the
// rollback has a whole file to restore from.
func TestCutDownloadIsNotSavedForRollback(t *testing.T) {
	fx := newFixture(t)
	before := fx.snapshot()
	fx.runner.Env = append(fx.runner.Env, applytest.EnvFail+"=apt-get:download@empty")
	fx.applies(applytest.StandardPlan(fx.Index))
	if !strings.Contains(fx.out.String(), "is not whole: rebuilding it") {
		t.Errorf("the empty download was not noticed:\n%s", fx.out.String())
	}
	if res := fx.rollback(-1); res.Status != apply.StatusDone {
		t.Fatalf("rollback: %s %+v\n%s", res.Status, res.RevertFailed, fx.out.String())
	}
	fx.same(before, "after a rollback from a rebuilt package")
}
