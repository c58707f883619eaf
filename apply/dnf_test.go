package apply_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuenv/gpuenv/apply"
	"github.com/gpuenv/gpuenv/apply/applytest"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/host"
)

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
	fx.applies(applytest.DnfPlan())
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
	// The driver's two upgraded packages were saved with one dnf
	// download: each dnf run costs seconds on a real host.
	logData, err := os.ReadFile(filepath.Join(fx.Root, "var/lib/gpuenv/generations/1/log"))
	if err != nil {
		t.Fatal(err)
	}
	together := false
	for _, line := range strings.Split(string(logData), "\n") {
		if strings.HasPrefix(line, "$ dnf") && strings.Contains(line, " download ") && strings.Contains(line, " libnvidia-ml-3:550.54.15") && strings.Contains(line, " nvidia-driver-cuda-3:550.54.15") {
			together = true
		}
	}
	if !together {
		t.Errorf("no one dnf download saved libnvidia-ml and nvidia-driver-cuda 550.54.15; the log:\n%s", logData)
	}
	// The inverse knew the long-named dependency from dnf's table, so
	// undoing removes it.
	after := fx.snapshot()
	fx.applies(applytest.DnfPlan())
	fx.same(after, "a second apply of the same plan")
	fx.rollsBack(after, "rolling back the second apply")
	fx.rollsBack(before, "rolling back the first apply")
}

func TestDnfFailureAtEachOperationReverts(t *testing.T) {
	for _, tc := range []struct {
		fail string
		want string
	}{
		{"rpm", "RPM database"},
		// The package files are saved with one dnf download, then,
		// when that fails, one by one: both must fail for the
		// transaction to be refused.
		{"dnf:download,dnf:download", "cannot save"},
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
			res := fx.apply(applytest.DnfPlan(), fx.opts(nil))
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
	fx.applies(applytest.DnfPlan())
	// The repository goes away: the old versions must come from the
	// generation's saved files.
	if err := os.RemoveAll(fx.Repo); err != nil {
		t.Fatal(err)
	}
	calls := filepath.Join(t.TempDir(), "calls")
	fx.runner.Env = append(fx.runner.Env, applytest.EnvCalls+"="+calls)
	fx.rollsBack(before, "after an offline rollback")
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
	hold := oneStep("hold", plan.Update, applytest.DnfOp(plan.PackagesOp{Hold: []string{"nvidia-driver-cuda"}, Unhold: []string{"libnvidia-ml"}}))
	fx.applies(hold)
	got := fx.packages()
	if !strings.HasSuffix(got["nvidia-driver-cuda"], " held") || strings.HasSuffix(got["libnvidia-ml"], " held") {
		t.Fatalf("holds not swapped: %v", got)
	}
	list, _ := os.ReadFile(filepath.Join(fx.Root, applytest.DefaultLocklist))
	if !strings.Contains(string(list), "nvidia-driver-cuda-3:550.54.15-1.el9.*") || strings.Contains(string(list), "libnvidia-ml-") {
		t.Errorf("lock list:\n%s", list)
	}
	fx.rollsBack(base, "after rolling back the holds")
}

// TestDnfRefusals: what dnf cannot do, or cannot undo offline, is refused
// before the host changes.
func TestDnfRefusals(t *testing.T) {
	for _, tc := range []struct {
		name    string
		address string
		op      plan.PackagesOp
		// noVersionlock removes the versionlock plugin's configuration
		// first.
		noVersionlock bool
		want          string
		what          string
	}{
		{
			name: "HoldNeedsVersionlock", address: "hold", noVersionlock: true,
			op:   plan.PackagesOp{Hold: []string{"nvidia-driver-cuda"}},
			want: "versionlock plugin is not installed", what: "a refused hold",
		},
		{
			name: "WhatCannotBeSaved", address: "persistenced",
			op:   plan.PackagesOp{Install: []plan.PackagePin{{Name: "nvidia-persistenced", Version: applytest.OrphanNew.EVR()}}},
			want: "could not be restored offline", what: "a refused upgrade",
		},
		{
			name: "LockedPinUnlessReleased", address: "driver",
			op:   plan.PackagesOp{Install: []plan.PackagePin{{Name: "libnvidia-ml", Version: applytest.DnfDriverNew}}},
			want: "locked at", what: "a refused pin of a locked package",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := newRPMFixture(t)
			if tc.noVersionlock {
				if err := os.Remove(filepath.Join(fx.Root, applytest.VersionlockConf)); err != nil {
					t.Fatal(err)
				}
			}
			before := fx.snapshot()
			res := fx.apply(oneStep(tc.address, plan.Update, applytest.DnfOp(tc.op)), fx.opts(nil))
			if res.Status != apply.StatusReverted || !strings.Contains(res.Failed.Error, tc.want) {
				t.Fatalf("status %s, failed %+v", res.Status, res.Failed)
			}
			fx.same(before, tc.what)
		})
	}
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
	res := fx.apply(applytest.DnfPlan(), fx.opts(x))
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
	if res := fx.apply(applytest.DnfPlan(), fx.opts(x)); res.Status != apply.StatusApplied {
		t.Fatalf("after the lock was released: status %s, failed %+v\n%s", res.Status, res.Failed, fx.out.String())
	}
}

func TestDnfHoldOfNewPackageUndone(t *testing.T) {
	fx := newRPMFixture(t)
	before := fx.snapshot()
	p := oneStep("cuda", plan.Create, applytest.DnfOp(plan.PackagesOp{
		Install: []plan.PackagePin{{Name: "cuda-toolkit-12-4", Version: "12.4.1-1"}},
		Hold:    []string{"cuda-toolkit-12-4"},
	}))
	fx.applies(p)
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
	fx.rollsBack(before, "rolling back a package installed and locked")
}

func TestDnfLockedPinAtItsVersionKeepsTheLock(t *testing.T) {
	fx := newRPMFixture(t)
	before := fx.snapshot()
	p := oneStep("driver", plan.Update, applytest.DnfOp(plan.PackagesOp{Install: []plan.PackagePin{
		{Name: "libnvidia-ml", Version: applytest.DnfDriverOld}, {Name: "cuda-toolkit-12-4", Version: "12.4.1-1"}}}))
	fx.applies(p)
	if got := fx.packages()["libnvidia-ml"]; got != applytest.DnfDriverOld+".x86_64 held" {
		t.Errorf("libnvidia-ml: %q, want it still locked", got)
	}
	fx.rollsBack(before, "rolling back")
}
