package apply_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/apply"
	"github.com/gpuenv/gpuenv/apply/applytest"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/host"
)

const stateDir = applytest.StateDir

// testHost is a fake host for one test, with what the tests do to any
// host, whichever package manager it has.
type testHost struct {
	t *testing.T
	// dir is where the host was laid out, which a helper process opens
	// it from; root is its root directory.
	dir    string
	root   string
	h      *host.Host
	runner *applytest.Runner
	out    eventLog
	// snap reads the host as "the same host" compares it: its package
	// database is the package manager's own.
	snap func(root string, extra ...string) (*applytest.State, error)
}

func newTestHost(t *testing.T, dir, root string, env []string, snap func(string, ...string) (*applytest.State, error)) *testHost {
	t.Helper()
	th := &testHost{t: t, dir: dir, root: root, runner: &applytest.Runner{Env: env}, snap: snap}
	var err error
	if th.h, err = host.New(root, host.WithRunner(th.runner)); err != nil {
		t.Fatal(err)
	}
	return th
}

// build lays out a fake host with layOut in a directory of its own.
func build[F any](t *testing.T, layOut func(dir string) (F, error)) F {
	t.Helper()
	f, err := layOut(applytest.TempDir(t))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// fixture is the standard fake host (applytest.BuildHost) for one test.
type fixture struct {
	*applytest.Fixture
	*testHost
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := build(t, applytest.BuildHost)
	return &fixture{f, newTestHost(t, f.Dir, f.Root, f.Env, applytest.Snapshot)}
}

// rpmFixture is the fake RPM host (applytest.BuildRPMHost) for one test.
type rpmFixture struct {
	*applytest.RPMFixture
	*testHost
}

func newRPMFixture(t *testing.T) *rpmFixture {
	t.Helper()
	f := build(t, applytest.BuildRPMHost)
	return &rpmFixture{f, newTestHost(t, f.Dir, f.Root, f.Env, applytest.SnapshotRPM)}
}

func (fx *testHost) snapshot() *applytest.State {
	fx.t.Helper()
	s, err := fx.snap(fx.root, stateDir)
	if err != nil {
		fx.t.Fatal(err)
	}
	return s
}

func (fx *testHost) same(want *applytest.State, what string) {
	fx.t.Helper()
	if d := applytest.Diff(want, fx.snapshot()); d != "" {
		fx.t.Fatalf("%s: the host differs:\n%s\n--- output:\n%s", what, d, fx.out.String())
	}
}

func (fx *testHost) opts(x apply.Executor) apply.Options {
	return apply.Options{StateDir: stateDir, Executor: x, Hook: &fx.out}
}

func (fx *testHost) apply(p *plan.Plan, o apply.Options) *apply.Result {
	fx.t.Helper()
	res, err := apply.Apply(context.Background(), fx.h, p, o)
	if err != nil {
		fx.t.Fatalf("apply: %v\n%s", err, fx.out.String())
	}
	return res
}

// applies applies p, which must end applied.
func (fx *testHost) applies(p *plan.Plan) *apply.Result {
	fx.t.Helper()
	res := fx.apply(p, fx.opts(nil))
	if res.Status != apply.StatusApplied {
		fx.t.Fatalf("apply: status %s, failed %+v\n%s", res.Status, res.Failed, fx.out.String())
	}
	return res
}

func (fx *testHost) rollback(to int) *apply.Result {
	fx.t.Helper()
	res, err := apply.Rollback(context.Background(), fx.h, apply.RollbackOptions{StateDir: stateDir, To: to, Hook: &fx.out})
	if err != nil {
		fx.t.Fatalf("rollback: %v\n%s", err, fx.out.String())
	}
	return res
}

// rollsBack rolls back the last generation, which must end with the host
// as it was before.
func (fx *testHost) rollsBack(before *applytest.State, what string) {
	fx.t.Helper()
	res := fx.rollback(-1)
	if res.Status != apply.StatusDone {
		fx.t.Fatalf("%s: rollback: %s %+v\n%s", what, res.Status, res.RevertFailed, fx.out.String())
	}
	fx.same(before, what)
}

func (fx *testHost) read(p string) string {
	fx.t.Helper()
	data, err := os.ReadFile(filepath.Join(fx.root, p))
	if err != nil {
		fx.t.Fatal(err)
	}
	return string(data)
}

func (fx *testHost) exists(p string) bool {
	_, err := os.Lstat(filepath.Join(fx.root, p))
	return err == nil
}

// executor is the host executor of the fixture, which fault injection
// wraps.
func (fx *testHost) executor() apply.Executor { return &apply.HostExecutor{Host: fx.h} }

// lock takes the state directory's lock, as a running gpuenv holds it.
func (fx *testHost) lock() (*apply.Store, *apply.Lock) {
	fx.t.Helper()
	store, err := apply.OpenStore(fx.h, stateDir)
	if err != nil {
		fx.t.Fatal(err)
	}
	lock, err := store.Lock("apply")
	if err != nil {
		fx.t.Fatal(err)
	}
	return store, lock
}

// forceUnlock clears the lock a killed gpuenv left, as force-unlock does.
func (fx *testHost) forceUnlock() {
	fx.t.Helper()
	if _, _, err := apply.ForceUnlock(fx.h, stateDir); err != nil {
		fx.t.Fatal(err)
	}
}

// oneStep is a plan of one step.
func oneStep(address string, action plan.Action, ops ...plan.Operation) *plan.Plan {
	return &plan.Plan{FormatVersion: plan.FormatVersion, Steps: []plan.Step{{Address: address, Action: action, Operations: ops}}}
}

func TestApplyStandardPlan(t *testing.T) {
	fx := newFixture(t)
	before := fx.snapshot()
	p := applytest.StandardPlan(fx.Index)
	res := fx.apply(p, fx.opts(nil))
	if res.Status != apply.StatusApplied || res.ExitCode() != 0 {
		t.Fatalf("status %s, failed %+v\n%s", res.Status, res.Failed, fx.out.String())
	}
	status := fx.read("/var/lib/dpkg/status")
	for _, want := range []string{
		"Package: libnvidia-ml1\nStatus: hold ok installed\nVersion: " + applytest.DriverNew,
		"Package: nvidia-smi\nStatus: hold ok installed\nVersion: " + applytest.DriverNew,
		"Package: cuda-toolkit-12-4\nStatus: install ok installed\nVersion: 12.4.1-1",
		"Package: cuda-cudart-12-4\nStatus: install ok installed\nVersion: 12.4.127-1",
	} {
		if !strings.Contains(status, want) {
			t.Errorf("dpkg status lacks %q:\n%s", want, status)
		}
	}
	if got := fx.read("/etc/group"); !strings.Contains(got, "video:x:44:bob\n") || !strings.Contains(got, "gpu:x:1003:carol,alice\n") {
		t.Errorf("/etc/group:\n%s", got)
	}
	if got := fx.read("/etc/gshadow"); !strings.Contains(got, "video:*::bob\n") {
		t.Errorf("/etc/gshadow:\n%s", got)
	}
	if !fx.exists("/etc/systemd/system/multi-user.target.wants/nvidia-persistenced.service") {
		t.Error("nvidia-persistenced was not enabled")
	}
	if fx.exists("/etc/profile.d/bash_completion.sh") {
		t.Error("the removed file is still there")
	}
	if got := fx.read("/etc/ld.so.cache"); !strings.Contains(got, "/usr/local/cuda-12.4/targets/x86_64-linux/lib") {
		t.Errorf("ldconfig did not run after the file was written:\n%s", got)
	}
	if got := fx.read(applytest.Venv + "/lib/python3.11/site-packages/torch/version.py"); !strings.Contains(got, applytest.TorchNew) {
		t.Errorf("torch not upgraded: %s", got)
	}
	if !fx.exists(applytest.NewVenv + "/lib/python3.11/site-packages/jax/__init__.py") {
		t.Error("jax not installed into the new venv")
	}
	if len(res.Skipped) != 2 || !res.NeedsReboot {
		t.Errorf("skipped %q, needs reboot %v; want the kernel and device operations skipped on a fixture root", res.Skipped, res.NeedsReboot)
	}
	out := fx.out.String()
	for _, want := range []string{"[1/13] driver, cuda: apt: releasing the hold on libnvidia-ml1; installing libnvidia-ml1 535.309.01-1", "[13/13] framework.jax", "rebuilding the initramfs skipped"} {
		if !strings.Contains(out, want) {
			t.Errorf("progress lacks %q:\n%s", want, out)
		}
	}
	// The saved files: libnvidia-ml1's old version is not in the archive
	// and was rebuilt from dpkg's records with dpkg-deb; nvidia-smi's was downloaded.
	gen := filepath.Join(fx.Root, stateDir, "generations", "1")
	for _, pat := range []string{"packages/1-libnvidia-ml1/libnvidia-ml1_535.261.03-1_amd64.deb", "packages/1-nvidia-smi/nvidia-smi_535.261.03-1_amd64.deb", "packages/12-torch/torch-2.4.1+cu121-py3-none-any.whl", "files/2", "plan.json", "journal", "log", "meta.json"} {
		if _, err := os.Stat(filepath.Join(gen, pat)); err != nil {
			t.Errorf("generation lacks %s: %v", pat, err)
		}
	}
	for p, want := range map[string]os.FileMode{stateDir: 0o711, stateDir + "/generations": 0o700, stateDir + "/generations/1": 0o700, stateDir + "/generations/1/journal": 0o600, stateDir + "/generations/1/files/2": 0o600, stateDir + "/status.json": 0o644} {
		fi, err := os.Stat(filepath.Join(fx.Root, p))
		if err != nil {
			t.Error(err)
		} else if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode().Perm(), want)
		}
	}
	st, err := apply.ReadStatus(fx.h, stateDir)
	if err != nil || st.Unfinished || st.Generation != 1 || st.Status != apply.StatusApplied {
		t.Errorf("status.json: %+v %v", st, err)
	}

	// The operations are idempotent: the same plan again changes
	// nothing.
	after := fx.snapshot()
	fx.applies(p)
	fx.same(after, "after applying the same plan twice")

	// An empty plan (what the planner returns for a converged host)
	// makes no generation.
	res = fx.apply(&plan.Plan{FormatVersion: plan.FormatVersion}, fx.opts(nil))
	if res.Generation != 0 {
		t.Errorf("an empty plan made generation %d", res.Generation)
	}

	// Rolling back both applies restores the original host.
	fx.rollsBack(after, "after undoing the second apply")
	fx.rollsBack(before, "after undoing the first apply")
	res = fx.rollback(-1)
	if res.Generation != 0 {
		t.Errorf("a rollback with nothing to undo made generation %d", res.Generation)
	}
}

// faultExecutor fails operation or inverse number k (counting calls to
// Run, or Undo), before or after the real one ran.
type faultExecutor struct {
	apply.Executor
	runFail, undoFail int
	after             bool
	runs, undos       int
}

var errInjected = errors.New("injected failure")

func (x *faultExecutor) Run(ctx context.Context, ws *apply.Workspace, op plan.Operation) error {
	x.runs++
	if x.runs == x.runFail {
		if x.after {
			if err := x.Executor.Run(ctx, ws, op); err != nil {
				return err
			}
		}
		return errInjected
	}
	return x.Executor.Run(ctx, ws, op)
}

func (x *faultExecutor) Undo(ctx context.Context, ws *apply.Workspace, inv *apply.Inverse) error {
	x.undos++
	if x.undos == x.undoFail {
		return errInjected
	}
	return x.Executor.Undo(ctx, ws, inv)
}

// runnable is how many operations of the standard plan run (the kernel
// and device operations are skipped on a fixture root).
const runnable = 11

func TestApplyFailureAtEveryOperationReverts(t *testing.T) {
	for k := 1; k <= runnable; k++ {
		for _, after := range []bool{false, true} {
			t.Run(fmt.Sprintf("op%d/after=%v", k, after), func(t *testing.T) {
				t.Parallel()
				fx := newFixture(t)
				before := fx.snapshot()
				res := fx.apply(applytest.StandardPlan(fx.Index), fx.opts(&faultExecutor{Executor: fx.executor(), runFail: k, after: after}))
				if res.Status != apply.StatusReverted || res.ExitCode() != 1 {
					t.Fatalf("status %s exit %d, revert failure %+v\n%s", res.Status, res.ExitCode(), res.RevertFailed, fx.out.String())
				}
				if res.Failed == nil || !strings.Contains(res.Failed.Error, "injected") {
					t.Errorf("failure not reported: %+v", res.Failed)
				}
				if len(res.Reverted) != k {
					t.Errorf("reverted %d operations, want %d: %q", len(res.Reverted), k, res.Reverted)
				}
				fx.same(before, "after a failed apply")
				st, _ := apply.ReadStatus(fx.h, stateDir)
				if st.Unfinished {
					t.Errorf("a fully reverted apply is reported unfinished: %+v", st)
				}
			})
		}
	}
	t.Logf("failures injected at %d operation points (%d operations, before and after each ran)", 2*runnable, runnable)
}

// TestApplyToolFailureReverts makes the fake tools themselves fail, as a
// real package manager or shadow tool would.
func TestApplyToolFailureReverts(t *testing.T) {
	for _, tc := range []struct {
		fail    string
		applied bool // the failure is survived: another way worked
		want    string
	}{
		{fail: "apt-get:install", want: "apt-get"},
		{fail: "apt-get:install@half", want: "apt-get"},
		{fail: "dpkg-deb", want: "cannot save libnvidia-ml1 535.261.03-1"},
		{fail: "apt-get:download,apt-get:download", applied: true},
		{fail: "gpasswd", want: "gpasswd"},
		{fail: "groupadd", want: "groupadd"},
		{fail: "systemctl", want: "systemctl"},
		{fail: "ldconfig", want: "ldconfig"},
		{fail: "pip:install", want: "pip"},
		{fail: "pip:download", want: "cannot save torch 2.4.1+cu121"},
		{fail: "python:venv", want: "venv"},
	} {
		t.Run(tc.fail, func(t *testing.T) {
			t.Parallel()
			fx := newFixture(t)
			before := fx.snapshot()
			fx.runner.Env = append(fx.runner.Env, applytest.EnvFail+"="+tc.fail)
			res := fx.apply(applytest.StandardPlan(fx.Index), fx.opts(nil))
			if tc.applied {
				// nvidia-smi's old version could not be downloaded and
				// was rebuilt with dpkg-deb instead.
				if res.Status != apply.StatusApplied {
					t.Fatalf("status %s, failed %+v\n%s", res.Status, res.Failed, fx.out.String())
				}
				if !strings.Contains(fx.out.String(), "nvidia-smi 535.261.03-1 is not in the archive any more") {
					t.Errorf("no fallback to rebuilding the package:\n%s", fx.out.String())
				}
				fx.rollsBack(before, "after rolling back from repacked packages")
				return
			}
			if res.Status != apply.StatusReverted {
				t.Fatalf("status %s, failed %+v, revert %+v\n%s", res.Status, res.Failed, res.RevertFailed, fx.out.String())
			}
			if !strings.Contains(res.Failed.Error, tc.want) {
				t.Errorf("error %q does not mention %q", res.Failed.Error, tc.want)
			}
			if len(res.Failed.LogTail) == 0 {
				t.Error("no log lines with the failure")
			}
			fx.same(before, "after a tool failed")
		})
	}
}

func TestApplyNoRevertThenRollback(t *testing.T) {
	fx := newFixture(t)
	before := fx.snapshot()
	o := fx.opts(&faultExecutor{Executor: fx.executor(), runFail: 5})
	o.NoRevert = true
	res := fx.apply(applytest.StandardPlan(fx.Index), o)
	if res.Status != apply.StatusFailed || res.ExitCode() != 3 {
		t.Fatalf("status %s exit %d", res.Status, res.ExitCode())
	}
	st, _ := apply.ReadStatus(fx.h, stateDir)
	if !st.Unfinished || st.Generation != 1 {
		t.Errorf("status.json does not say generation 1 is unfinished: %+v", st)
	}
	_, err := apply.Apply(context.Background(), fx.h, applytest.StandardPlan(fx.Index), fx.opts(nil))
	var uf *apply.UnfinishedError
	if !errors.As(err, &uf) || !strings.Contains(err.Error(), "gpuenv rollback") {
		t.Fatalf("apply over an unfinished generation: %v", err)
	}
	if _, err := apply.Rollback(context.Background(), fx.h, apply.RollbackOptions{StateDir: stateDir, To: 0}); err == nil {
		t.Error("rollback --to while a generation is unfinished was not refused")
	}
	res = fx.rollback(-1)
	if res.Status != apply.StatusDone || len(res.Reverted) != 5 {
		t.Fatalf("rollback: %s, reverted %q", res.Status, res.Reverted)
	}
	fx.same(before, "after rolling back a --no-revert failure")
	st, _ = apply.ReadStatus(fx.h, stateDir)
	if st.Unfinished {
		t.Errorf("still unfinished after rollback: %+v", st)
	}
}

func TestApplyRevertFailureNeedsAttention(t *testing.T) {
	fx := newFixture(t)
	before := fx.snapshot()
	res := fx.apply(applytest.StandardPlan(fx.Index), fx.opts(&faultExecutor{Executor: fx.executor(), runFail: 6, undoFail: 2}))
	if res.Status != apply.StatusFailed || res.ExitCode() != 3 || res.RevertFailed == nil {
		t.Fatalf("status %s exit %d revert failure %+v", res.Status, res.ExitCode(), res.RevertFailed)
	}
	if len(res.Reverted) != 1 {
		t.Errorf("reverted %q before the failing inverse", res.Reverted)
	}
	fx.rollsBack(before, "after the rollback finished the revert")
}
