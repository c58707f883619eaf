package apply_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/gpuenv/gpuenv/apply"
	"github.com/gpuenv/gpuenv/apply/applytest"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/planner/reload"
	"github.com/gpuenv/gpuenv/providers/host"
)

// Environment of the helper process that is killed.
const (
	envKillDir  = "GPUENV_TEST_KILL_DIR"
	envKillAt   = "GPUENV_TEST_KILL_AT"
	envKillMode = "GPUENV_TEST_KILL_MODE"
)

// TestKillHelper is not a test: run by the kill tests in a child process,
// it applies (or rolls back) on a fixture and SIGKILLs itself right after
// journal record K is durable. Mode "dnf" applies the dnf plan on an RPM
// fixture.
func TestKillHelper(t *testing.T) {
	dir := os.Getenv(envKillDir)
	if dir == "" {
		t.Skip("helper process for TestKilled*")
	}
	at, _ := strconv.Atoi(os.Getenv(envKillAt))
	mode := os.Getenv(envKillMode)
	if mode == "mig-apply" || mode == "mig-rollback" {
		migKillHelper(t, dir, at, mode)
		return
	}
	var root string
	var env []string
	var plan *plan.Plan
	var h *host.Host
	var x apply.Executor
	var err error
	switch mode {
	case "dnf":
		f := applytest.OpenRPMHost(dir)
		root, env, plan = f.Root, f.Env, applytest.DnfPlan()
	case "reload", "reload-gap", "reload-rollback":
		fx := openReloadHost(t, dir)
		h, plan = fx.h, reloadPlan(t, fx.h, reload.Options{})
		x = &apply.HostExecutor{Host: h, Driver: &host.NVMLDriverVersion{Lib: nvmlOf(fx.root)}}
	default:
		f := applytest.OpenHost(dir)
		root, env, plan = f.Root, f.Env, applytest.StandardPlan(f.Index)
	}
	if h == nil {
		if h, err = host.New(root, host.WithRunner(&applytest.Runner{Env: env})); err != nil {
			t.Fatal(err)
		}
	}
	kill := func() {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	point := func(n int) {
		if n == at {
			kill()
		}
	}
	if mode == "reload-gap" {
		// Killed once the old modules are unloaded and before the new
		// ones load: no nvidia module is in the kernel.
		point = func(int) {
			if _, err := h.ReadFile("/sys/module/nvidia_modeset/version"); err == nil {
				return
			}
			if _, err := h.ReadFile("/sys/module/nvidia/version"); err != nil {
				kill()
			}
		}
	}
	if mode == "rollback" || mode == "reload-rollback" {
		_, err = apply.Rollback(context.Background(), h, apply.RollbackOptions{StateDir: stateDir, To: -1, JournalPoint: point})
	} else {
		_, err = apply.Apply(context.Background(), h, plan, apply.Options{StateDir: stateDir, JournalPoint: point, Executor: x})
	}
	if err != nil {
		t.Fatal(err)
	}
}

// runKilled runs the helper killed at point k and reports whether it was
// killed (false: it finished before reaching k).
func runKilled(t *testing.T, dir, mode string, k int) bool {
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), envKillDir+"="+dir, envKillAt+"="+strconv.Itoa(k), envKillMode+"="+mode)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true
		}
	}
	if err != nil {
		t.Fatalf("helper (%s, point %d): %v\n%s", mode, k, err, out)
	}
	return false
}

// recoverAndCheck is what a user does after a kill: the lock is stale,
// apply refuses, force-unlock clears it, rollback finishes the revert;
// then the host must be the one before. ended says the kill came after
// the journal's end record: the apply finished and only its meta.json
// was not rewritten, so it is applied, and rollback undoes it.
func recoverAndCheck(t *testing.T, fx *testHost, plan *plan.Plan, before *applytest.State, ended bool) {
	t.Helper()
	ctx := context.Background()
	_, err := apply.Apply(ctx, fx.h, plan, fx.opts(nil))
	var le *apply.LockedError
	if !errors.As(err, &le) || !le.Stale {
		t.Fatalf("apply after a kill: %v, want a stale-lock refusal", err)
	}
	if _, removed, err := apply.ForceUnlock(fx.h, stateDir); err != nil || !removed {
		t.Fatalf("force-unlock: removed %v, %v", removed, err)
	}
	// Killed past the end record, the status file still says running;
	// it is read through the journal, which says the apply ended.
	if st, err := apply.ReadStatus(fx.h, stateDir); err != nil || st.Unfinished == ended {
		t.Fatalf("status.json after a kill: %+v %v, want unfinished %v", st, err, !ended)
	}
	if ended {
		gens, err := apply.History(fx.h, stateDir)
		if err != nil || len(gens) != 1 || gens[0].Status != apply.StatusApplied {
			t.Fatalf("history after a kill past the end record: %+v %v, want generation 1 applied", gens, err)
		}
	} else {
		_, err = apply.Apply(ctx, fx.h, plan, fx.opts(nil))
		var uf *apply.UnfinishedError
		if !errors.As(err, &uf) {
			t.Fatalf("apply over an unfinished generation: %v", err)
		}
	}
	fx.rollsBack(before, "after a kill and a rollback")
	if st, _ := apply.ReadStatus(fx.h, stateDir); st.Unfinished {
		t.Fatalf("still unfinished after rollback: %+v", st)
	}
}

// journalPoints runs an uninterrupted apply of the plan on the host that
// layOut lays out, and the rollback after it, and returns the event of
// each of their journal records, in order: the points a kill matrix
// kills at.
func journalPoints(t *testing.T, layOut func(*testing.T) (*testHost, *plan.Plan)) (applyPoints, rollbackPoints []apply.Event) {
	fx, p := layOut(t)
	var na, nr int
	o := fx.opts(nil)
	o.JournalPoint = func(n int) { na = n }
	res := fx.apply(p, o)
	if res.Status != apply.StatusApplied {
		t.Fatalf("apply: %s", res.Status)
	}
	applyPoints = journalEvents(t, fx, res, na)
	res, err := apply.Rollback(context.Background(), fx.h, apply.RollbackOptions{StateDir: stateDir, To: -1, JournalPoint: func(n int) { nr = n }})
	if err != nil {
		t.Fatal(err)
	}
	return applyPoints, journalEvents(t, fx, res, nr)
}

// journalEvents reads the journal of the generation res ran, which must
// hold the points records JournalPoint was told of.
func journalEvents(t *testing.T, fx *testHost, res *apply.Result, points int) []apply.Event {
	t.Helper()
	p := filepath.Join(fx.root, filepath.Dir(res.LogPath), "journal")
	recs, err := apply.ReadJournal(p, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != points {
		t.Fatalf("generation %d journals %d records, JournalPoint was called up to %d", res.Generation, len(recs), points)
	}
	events := make([]apply.Event, len(recs))
	for i, r := range recs {
		events[i] = r.Event
	}
	return events
}

// atEveryJournalPoint runs test in a parallel subtest for each journal
// point k, one per record of events; there must be at least least of
// them, and among them each of kinds, or the matrix would pass without
// killing where it is meant to. kill, given to test, runs the helper in
// mode on fx, killed at k. It logs how many were killed, and what each
// kill was followed by (after).
func atEveryJournalPoint(t *testing.T, what string, events []apply.Event, least int, kinds []apply.Event, after string, test func(t *testing.T, k int, kill func(fx *testHost, mode string))) {
	points := len(events)
	if points < least {
		t.Fatalf("the %s journals only %d records (%v), want at least %d", what, points, events, least)
	}
	for _, kind := range kinds {
		if !slices.Contains(events, kind) {
			t.Fatalf("the %s journals no %q record (%v): the matrix would not kill there", what, kind, events)
		}
	}
	var killed atomic.Int32
	for k := 1; k <= points; k++ {
		t.Run(fmt.Sprint(k), func(t *testing.T) {
			t.Parallel()
			test(t, k, func(fx *testHost, mode string) {
				t.Helper()
				if !runKilled(t, fx.dir, mode, k) {
					t.Fatalf("the %s finished before journal point %d (%s)", what, k, events[k-1])
				}
				killed.Add(1)
			})
		})
	}
	t.Cleanup(func() {
		t.Logf("%s killed (SIGKILL) at %d of %d journal points, each followed by %s", what, killed.Load(), points, after)
	})
}

// standardHost is the standard fake host and plan.
func standardHost(t *testing.T) (*testHost, *plan.Plan) {
	fx := newFixture(t)
	return fx.testHost, applytest.StandardPlan(fx.Index)
}

func TestKilledApplyAtEveryJournalPoint(t *testing.T) {
	for _, tc := range []struct {
		what string
		mode string // the helper's: the standard plan, or the dnf plan on an RPM host
		// least is how many records the plan journals at least.
		least int
		host  func(t *testing.T) (*testHost, *plan.Plan)
		// skips: the plan has operations an image root skips (the
		// initramfs, the GPU's settings), whose records are points too.
		skips bool
	}{
		{"apply", "apply", 20, standardHost, true},
		{"dnf apply", "dnf", 8, func(t *testing.T) (*testHost, *plan.Plan) { return newRPMFixture(t).testHost, applytest.DnfPlan() }, false},
		// A driver upgrade that reloads the modules: killed between
		// the unload and the load, among the other points, the
		// rollback loads the old module from the restored packages.
		{"reload apply", "reload", 20, reloadHost, false},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			events, _ := journalPoints(t, tc.host)
			kinds := []apply.Event{apply.EventStart, apply.EventBegin, apply.EventDone, apply.EventEnd}
			if tc.skips {
				kinds = append(kinds, apply.EventSkipped)
			}
			atEveryJournalPoint(t, tc.what, events, tc.least, kinds, "force-unlock and a rollback to the same host", func(t *testing.T, k int, kill func(*testHost, string)) {
				fx, plan := tc.host(t)
				before := fx.snapshot()
				kill(fx, tc.mode)
				recoverAndCheck(t, fx, plan, before, k == len(events))
			})
		})
	}
}

func TestKilledRollbackAtEveryJournalPoint(t *testing.T) {
	for _, tc := range []struct {
		what, mode string
		// least is how many records the rollback journals at least.
		least int
		host  func(t *testing.T) (*testHost, *plan.Plan)
	}{
		{"rollback", "rollback", 20, standardHost},
		{"rollback of a reload", "reload-rollback", 20, reloadHost},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			_, events := journalPoints(t, tc.host)
			kinds := []apply.Event{apply.EventStart, apply.EventUndo, apply.EventUndone, apply.EventEnd}
			atEveryJournalPoint(t, tc.what, events, tc.least, kinds, "a second rollback that finished it", func(t *testing.T, k int, kill func(*testHost, string)) {
				fx, plan := tc.host(t)
				before := fx.snapshot()
				fx.applies(plan)
				kill(fx, tc.mode)
				fx.forceUnlock()
				fx.rollsBack(before, "after a killed rollback was finished")
				gens, _ := apply.History(fx.h, stateDir)
				if len(gens) != 2 || gens[0].UndoneBy != 2 {
					t.Errorf("the killed rollback was not continued as generation 2: %+v", gens)
				}
			})
		})
	}
}

// Killed with no nvidia module in the kernel, the old ones unloaded and
// the new ones not yet loaded: the rollback that follows loads the old
// driver again once its packages are back, and starts persistenced.
func TestKilledBetweenUnloadAndLoad(t *testing.T) {
	fx, plan := reloadHost(t)
	before := fx.snapshot()
	if !runKilled(t, fx.dir, "reload-gap", 0) {
		t.Fatal("the reload finished without a moment with no module loaded")
	}
	if fx.exists("/proc/driver/nvidia/version") || fx.exists("/proc/900") {
		t.Fatal("killed with a module loaded or persistenced running")
	}
	recoverAndCheck(t, fx, plan, before, false)
	if v := fx.loadedDriver(); v != "535.261.03" {
		t.Errorf("after the rollback the loaded driver is %q", v)
	}
}
