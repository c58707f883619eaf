package apply_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuenv/gpuenv/apply"
	"github.com/gpuenv/gpuenv/apply/applytest"
	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/providers/host"
)

type rpmFixture struct {
	*applytest.RPMFixture
	t      *testing.T
	h      *host.Host
	runner *applytest.Runner
	out    bytes.Buffer
}

func newRPMFixture(t *testing.T) *rpmFixture {
	t.Helper()
	f, err := applytest.BuildRPMHost(applytest.TempDir(t))
	if err != nil {
		t.Fatal(err)
	}
	fx := &rpmFixture{RPMFixture: f, t: t, runner: &applytest.Runner{Env: f.Env}}
	fx.h, err = host.New(f.Root, host.WithRunner(fx.runner))
	if err != nil {
		t.Fatal(err)
	}
	return fx
}

func (fx *rpmFixture) snapshot() *applytest.State {
	fx.t.Helper()
	s, err := applytest.SnapshotRPM(fx.Root, stateDir)
	if err != nil {
		fx.t.Fatal(err)
	}
	return s
}

func (fx *rpmFixture) same(want *applytest.State, what string) {
	fx.t.Helper()
	if d := applytest.Diff(want, fx.snapshot()); d != "" {
		fx.t.Fatalf("%s: the host differs:\n%s\n--- output:\n%s", what, d, fx.out.String())
	}
}

func (fx *rpmFixture) apply(p *planner.Plan, x apply.Executor) *apply.Result {
	fx.t.Helper()
	res, err := apply.Apply(context.Background(), fx.h, p, apply.Options{StateDir: stateDir, Executor: x, Out: &fx.out})
	if err != nil {
		fx.t.Fatalf("apply: %v\n%s", err, fx.out.String())
	}
	return res
}

func (fx *rpmFixture) rollback() *apply.Result {
	fx.t.Helper()
	res, err := apply.Rollback(context.Background(), fx.h, apply.RollbackOptions{StateDir: stateDir, To: -1, Out: &fx.out})
	if err != nil {
		fx.t.Fatalf("rollback: %v\n%s", err, fx.out.String())
	}
	return res
}

func (fx *rpmFixture) packages() map[string]string {
	fx.t.Helper()
	m, err := applytest.RPMState(fx.Root)
	if err != nil {
		fx.t.Fatal(err)
	}
	return m
}

func TestDnfApplyConverges(t *testing.T) {
	fx := newRPMFixture(t)
	before := fx.snapshot()
	res := fx.apply(applytest.DnfPlan(), nil)
	if res.Status != apply.StatusApplied {
		t.Fatalf("status %s, failed %+v\n%s", res.Status, res.Failed, fx.out.String())
	}
	got := fx.packages()
	want := map[string]string{
		"libnvidia-ml":           applytest.DnfDriverNew + ".x86_64 held",
		"nvidia-driver-cuda":     applytest.DnfDriverNew + ".x86_64 held",
		"cuda-toolkit-12-4":      "12.4.1-1.x86_64",
		"cuda-cudart-12-4":       "12.4.127-1.x86_64",
		applytest.DnfLongName:    "12.4.127-1.x86_64",
		"nvidia-persistenced":    applytest.Orphan.EVR() + ".x86_64",
		"nvidia-old-tool":        "",
		"nvidia-old-tool-plugin": "",
	}
	for n, v := range want {
		if got[n] != v {
			t.Errorf("%s: %q, want %q", n, got[n], v)
		}
	}
	if data, err := os.ReadFile(filepath.Join(fx.Root, "usr/bin/nvidia-smi")); err != nil || !strings.Contains(string(data), "560.35.03") {
		t.Errorf("nvidia-smi not upgraded: %q %v", data, err)
	}
	// The inverse knew the long-named dependency from dnf's table, so
	// undoing removes it.
	after := fx.snapshot()
	res = fx.apply(applytest.DnfPlan(), nil)
	if res.Status != apply.StatusApplied {
		t.Fatalf("second apply: status %s, failed %+v\n%s", res.Status, res.Failed, fx.out.String())
	}
	fx.same(after, "a second apply of the same plan")
	fx.rollback()
	fx.same(after, "rolling back the second apply")
	fx.rollback()
	fx.same(before, "rolling back the first apply")
}

func TestDnfFailureAtEachOperationReverts(t *testing.T) {
	for _, tc := range []struct {
		fail string
		want string
	}{
		{"rpm", "RPM database"},
		{"dnf:download", "cannot save"},
		{"dnf:versionlock", "version locks"},
		{"dnf:remove", "dry run failed"},
		{"dnf:install", "dry run failed"},
		{"dnf:versionlock-delete@run", "dnf"},
		{"dnf:install@run", "dnf"},
		{"dnf:install:cuda-toolkit@run", "cuda-toolkit-12-4"},
		{"dnf:install@half", "dnf"},
		{"dnf:versionlock-add@run", "dnf"},
		{"dnf:remove@run", "dnf"},
	} {
		t.Run(tc.fail, func(t *testing.T) {
			t.Parallel()
			fx := newRPMFixture(t)
			before := fx.snapshot()
			fx.runner.Env = append(fx.runner.Env, applytest.EnvFail+"="+tc.fail)
			res := fx.apply(applytest.DnfPlan(), nil)
			if res.Status != apply.StatusReverted {
				t.Fatalf("status %s, failed %+v, revert %+v\n%s", res.Status, res.Failed, res.RevertFailed, fx.out.String())
			}
			if !strings.Contains(res.Failed.Error, tc.want) {
				t.Errorf("error %q does not mention %q", res.Failed.Error, tc.want)
			}
			fx.same(before, "after "+tc.fail+" failed")
		})
	}
}

func TestDnfRollbackOfflineFromSavedFiles(t *testing.T) {
	fx := newRPMFixture(t)
	before := fx.snapshot()
	res := fx.apply(applytest.DnfPlan(), nil)
	if res.Status != apply.StatusApplied {
		t.Fatalf("status %s, failed %+v\n%s", res.Status, res.Failed, fx.out.String())
	}
	// The repository goes away: the old versions must come from the
	// generation's saved files.
	if err := os.RemoveAll(fx.Repo); err != nil {
		t.Fatal(err)
	}
	calls := filepath.Join(t.TempDir(), "calls")
	fx.runner.Env = append(fx.runner.Env, applytest.EnvCalls+"="+calls)
	rb := fx.rollback()
	if rb.Status != apply.StatusDone {
		t.Fatalf("rollback status %s, revert failed %+v\n%s", rb.Status, rb.RevertFailed, fx.out.String())
	}
	fx.same(before, "after an offline rollback")
	data, _ := os.ReadFile(calls)
	var installs []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.Contains(l, " install ") && !strings.Contains(l, "--assumeno") {
			installs = append(installs, l)
		}
	}
	if len(installs) == 0 {
		t.Fatalf("rollback installed nothing:\n%s", data)
	}
	for _, l := range installs {
		if !strings.Contains(l, "--disablerepo=*") || !strings.Contains(l, ".rpm") {
			t.Errorf("rollback install not from saved files with repositories off: %s", l)
		}
	}
}

func TestDnfVersionlockRoundTrip(t *testing.T) {
	fx := newRPMFixture(t)
	base := fx.snapshot()
	hold := &planner.Plan{FormatVersion: planner.FormatVersion, Steps: []planner.Step{{Address: "hold", Action: planner.Update,
		Operations: []planner.Operation{applytest.DnfOp(planner.PackagesOp{Hold: []string{"nvidia-driver-cuda"}, Unhold: []string{"libnvidia-ml"}})}}}}
	if res := fx.apply(hold, nil); res.Status != apply.StatusApplied {
		t.Fatalf("status %s, failed %+v\n%s", res.Status, res.Failed, fx.out.String())
	}
	got := fx.packages()
	if !strings.HasSuffix(got["nvidia-driver-cuda"], " held") || strings.HasSuffix(got["libnvidia-ml"], " held") {
		t.Fatalf("holds not swapped: %v", got)
	}
	list, _ := os.ReadFile(filepath.Join(fx.Root, applytest.DefaultLocklist))
	if !strings.Contains(string(list), "nvidia-driver-cuda-3:550.54.15-1.el9.*") || strings.Contains(string(list), "libnvidia-ml-") {
		t.Errorf("lock list:\n%s", list)
	}
	fx.rollback()
	fx.same(base, "after rolling back the holds")
}

func TestDnfHoldNeedsVersionlock(t *testing.T) {
	fx := newRPMFixture(t)
	if err := os.Remove(filepath.Join(fx.Root, applytest.VersionlockConf)); err != nil {
		t.Fatal(err)
	}
	before := fx.snapshot()
	p := &planner.Plan{FormatVersion: planner.FormatVersion, Steps: []planner.Step{{Address: "hold", Action: planner.Update,
		Operations: []planner.Operation{applytest.DnfOp(planner.PackagesOp{Hold: []string{"nvidia-driver-cuda"}})}}}}
	res := fx.apply(p, nil)
	if res.Status != apply.StatusReverted || !strings.Contains(res.Failed.Error, "versionlock plugin is not installed") {
		t.Fatalf("status %s, failed %+v", res.Status, res.Failed)
	}
	fx.same(before, "a refused hold")
}

func TestDnfRefusesWhatCannotBeSaved(t *testing.T) {
	fx := newRPMFixture(t)
	before := fx.snapshot()
	p := &planner.Plan{FormatVersion: planner.FormatVersion, Steps: []planner.Step{{Address: "persistenced", Action: planner.Update,
		Operations: []planner.Operation{applytest.DnfOp(planner.PackagesOp{Install: []planner.PackagePin{{Name: "nvidia-persistenced", Version: applytest.OrphanNew.EVR()}}})}}}}
	res := fx.apply(p, nil)
	if res.Status != apply.StatusReverted || !strings.Contains(res.Failed.Error, "could not be restored offline") {
		t.Fatalf("status %s, failed %+v", res.Status, res.Failed)
	}
	fx.same(before, "a refused upgrade")
}

func TestDnfLockedPinRefusedUnlessReleased(t *testing.T) {
	fx := newRPMFixture(t)
	before := fx.snapshot()
	p := &planner.Plan{FormatVersion: planner.FormatVersion, Steps: []planner.Step{{Address: "driver", Action: planner.Update,
		Operations: []planner.Operation{applytest.DnfOp(planner.PackagesOp{Install: []planner.PackagePin{{Name: "libnvidia-ml", Version: applytest.DnfDriverNew}}})}}}}
	res := fx.apply(p, nil)
	if res.Status != apply.StatusReverted || !strings.Contains(res.Failed.Error, "locked at") {
		t.Fatalf("status %s, failed %+v", res.Status, res.Failed)
	}
	fx.same(before, "a refused pin of a locked package")
}

func TestDnfWaitsForItsLock(t *testing.T) {
	fx := newRPMFixture(t)
	lock := filepath.Join(fx.Root, applytest.DnfLockPath)
	if err := os.MkdirAll(filepath.Dir(lock), 0o755); err != nil {
		t.Fatal(err)
	}
	// This process is alive: the lock is held until the file goes.
	if err := os.WriteFile(lock, []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		t.Fatal(err)
	}
	before := fx.snapshot()
	x := &apply.HostExecutor{Host: fx.h, PackageLockTimeout: 500 * time.Millisecond}
	res := fx.apply(applytest.DnfPlan(), x)
	if res.Status != apply.StatusReverted || !strings.Contains(res.Failed.Error, "dnf's lock") {
		t.Fatalf("status %s, failed %+v\n%s", res.Status, res.Failed, fx.out.String())
	}
	if !strings.Contains(fx.out.String(), "waiting up to") {
		t.Errorf("no waiting message:\n%s", fx.out.String())
	}
	fx.same(before, "a lock never released")

	x.PackageLockTimeout = 20 * time.Second
	go func() {
		time.Sleep(700 * time.Millisecond)
		os.Remove(lock)
	}()
	if res := fx.apply(applytest.DnfPlan(), x); res.Status != apply.StatusApplied {
		t.Fatalf("after the lock was released: status %s, failed %+v\n%s", res.Status, res.Failed, fx.out.String())
	}
}

func TestDnfHoldOfNewPackageUndone(t *testing.T) {
	fx := newRPMFixture(t)
	before := fx.snapshot()
	p := &planner.Plan{FormatVersion: planner.FormatVersion, Steps: []planner.Step{{Address: "cuda", Action: planner.Create,
		Operations: []planner.Operation{applytest.DnfOp(planner.PackagesOp{
			Install: []planner.PackagePin{{Name: "cuda-toolkit-12-4", Version: "12.4.1-1"}},
			Hold:    []string{"cuda-toolkit-12-4"},
		})}}}}
	if res := fx.apply(p, nil); res.Status != apply.StatusApplied {
		t.Fatalf("status %s, failed %+v\n%s", res.Status, res.Failed, fx.out.String())
	}
	if got := fx.packages()["cuda-toolkit-12-4"]; got != "12.4.1-1.x86_64 held" {
		t.Fatalf("cuda-toolkit-12-4: %q", got)
	}
	// Removed by hand, the package leaves its lock behind, which the
	// rollback must clear as well.
	if err := fx.h.Run(context.Background(), host.Command{Argv: []string{"dnf", "-y", "remove", "cuda-toolkit-12-4"}}); err != nil {
		t.Fatal(err)
	}
	if got := fx.packages()["cuda-toolkit-12-4"]; got != "(absent) held" {
		t.Fatalf("after removal by hand: %q", got)
	}
	fx.rollback()
	fx.same(before, "rolling back a package installed and locked")
}

func TestDnfLockedPinAtItsVersionKeepsTheLock(t *testing.T) {
	fx := newRPMFixture(t)
	before := fx.snapshot()
	p := &planner.Plan{FormatVersion: planner.FormatVersion, Steps: []planner.Step{{Address: "driver", Action: planner.Update,
		Operations: []planner.Operation{applytest.DnfOp(planner.PackagesOp{Install: []planner.PackagePin{
			{Name: "libnvidia-ml", Version: applytest.DnfDriverOld}, {Name: "cuda-toolkit-12-4", Version: "12.4.1-1"}}})}}}}
	if res := fx.apply(p, nil); res.Status != apply.StatusApplied {
		t.Fatalf("status %s, failed %+v\n%s", res.Status, res.Failed, fx.out.String())
	}
	if got := fx.packages()["libnvidia-ml"]; got != applytest.DnfDriverOld+".x86_64 held" {
		t.Errorf("libnvidia-ml: %q, want it still locked", got)
	}
	fx.rollback()
	fx.same(before, "rolling back")
}
