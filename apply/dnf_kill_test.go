package apply_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/gpuenv/gpuenv/apply"
	"github.com/gpuenv/gpuenv/apply/applytest"
	"github.com/gpuenv/gpuenv/providers/host"
)

const envDnfKillDir = "GPUENV_TEST_DNF_KILL_DIR"

// TestDnfKillHelper is not a test: run by TestDnfKilledApply in a child
// process, it applies the dnf plan on an RPM fixture and SIGKILLs itself
// right after journal record K is durable.
func TestDnfKillHelper(t *testing.T) {
	dir := os.Getenv(envDnfKillDir)
	if dir == "" {
		t.Skip("helper process for TestDnfKilledApply")
	}
	at, _ := strconv.Atoi(os.Getenv(envKillAt))
	f := applytest.OpenRPMHost(dir)
	h, err := host.New(f.Root, host.WithRunner(&applytest.Runner{Env: f.Env}))
	if err != nil {
		t.Fatal(err)
	}
	point := func(n int) {
		if n == at {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	}
	if _, err := apply.Apply(context.Background(), h, applytest.DnfPlan(), apply.Options{StateDir: stateDir, JournalPoint: point}); err != nil {
		t.Fatal(err)
	}
}

func TestDnfKilledApplyAtEveryJournalPoint(t *testing.T) {
	points := 0
	{
		fx := newRPMFixture(t)
		res, err := apply.Apply(context.Background(), fx.h, applytest.DnfPlan(), apply.Options{StateDir: stateDir, Out: &fx.out, JournalPoint: func(n int) { points = n }})
		if err != nil || res.Status != apply.StatusApplied {
			t.Fatalf("apply: %v %+v", err, res)
		}
	}
	if points < 8 {
		t.Fatalf("the dnf plan journals only %d records", points)
	}
	var killed atomic.Int32
	for k := 1; k <= points; k++ {
		t.Run(fmt.Sprint(k), func(t *testing.T) {
			t.Parallel()
			dir := applytest.TempDir(t)
			f, err := applytest.BuildRPMHost(dir)
			if err != nil {
				t.Fatal(err)
			}
			fx := &rpmFixture{RPMFixture: f, t: t, runner: &applytest.Runner{Env: f.Env}}
			if fx.h, err = host.New(f.Root, host.WithRunner(fx.runner)); err != nil {
				t.Fatal(err)
			}
			before := fx.snapshot()
			cmd := exec.Command(os.Args[0], "-test.run=^TestDnfKillHelper$", "-test.count=1")
			cmd.Env = append(os.Environ(), envDnfKillDir+"="+dir, envKillAt+"="+strconv.Itoa(k))
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Fatalf("the apply was not killed at journal point %d: %v\n%s", k, err, out)
			}
			if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("helper at point %d: %v\n%s", k, err, out)
			}
			killed.Add(1)
			store, err := apply.OpenStore(fx.h, stateDir)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := store.ForceUnlock(); err != nil {
				t.Fatal(err)
			}
			res := fx.rollback()
			if res.Status != apply.StatusDone {
				t.Fatalf("rollback after the kill: %s %+v\n%s", res.Status, res.RevertFailed, fx.out.String())
			}
			fx.same(before, fmt.Sprintf("killed at journal point %d, then rolled back", k))
		})
	}
	t.Cleanup(func() {
		t.Logf("dnf apply killed (SIGKILL) at %d of %d journal points, each followed by force-unlock and a rollback to the same host", killed.Load(), points)
	})
}
