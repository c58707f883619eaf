package apply_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/apply"
	"github.com/gpuenv/gpuenv/apply/applytest"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/host"
)

// TestRealPip installs, upgrades and rolls back torch test wheels from a
// local index into a real virtual environment with the real python3 and
// pip, on the live root with everything (venv, state) in a temporary
// directory.
func TestRealPip(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: creating a venv and running pip takes a minute on slow disks")
	}
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: the real-pip test needs python3 with the venv module (Debian: python3-venv)")
	}
	if out, err := exec.Command(python, "-c", "import venv, ensurepip").CombinedOutput(); err != nil {
		t.Skipf("python3 cannot create virtual environments with pip (Debian: install python3-venv): %v %s", err, out)
	}
	dir := applytest.TempDir(t)
	index, err := applytest.WriteIndex(filepath.Join(dir, "index"), applytest.Wheels()...)
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.New("/")
	if err != nil {
		t.Fatal(err)
	}
	venv := filepath.Join(dir, "venv")
	state := filepath.Join(dir, "state")
	pip := func(version string) *plan.Plan {
		return oneStep("framework.pytorch", plan.Update, plan.Operation{Kind: plan.OpPackages, Packages: &plan.PackagesOp{
			Manager: "pip", Python: python, Venv: venv, IndexURL: index,
			Install: []plan.PackagePin{{Name: "torch", Version: version}},
		}})
	}
	var out eventLog
	run := func(p *plan.Plan) {
		t.Helper()
		res, err := apply.Apply(context.Background(), h, p, apply.Options{StateDir: state, Hook: &out})
		if err == apply.ErrNotRoot {
			t.Skip("the live-root pip test runs as root")
		}
		if err != nil || res.Status != apply.StatusApplied {
			t.Fatalf("apply: %v %+v\n%s", err, res, out.String())
		}
	}
	torch := func() string {
		t.Helper()
		m, _ := filepath.Glob(filepath.Join(venv, "lib", "python3*", "site-packages", "torch", "version.py"))
		if len(m) != 1 {
			return ""
		}
		data, err := os.ReadFile(m[0])
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	rollback := func() {
		t.Helper()
		res, err := apply.Rollback(context.Background(), h, apply.RollbackOptions{StateDir: state, To: -1, Hook: &out})
		if err != nil || res.Status != apply.StatusDone {
			t.Fatalf("rollback: %v %+v\n%s", err, res, out.String())
		}
	}

	run(pip(applytest.TorchOld))
	if got := torch(); !strings.Contains(got, applytest.TorchOld) {
		t.Fatalf("torch after the first apply: %q\n%s", got, out.String())
	}
	run(pip(applytest.TorchNew))
	if got := torch(); !strings.Contains(got, applytest.TorchNew) {
		t.Fatalf("torch after the upgrade: %q\n%s", got, out.String())
	}
	saved, _ := filepath.Glob(filepath.Join(state, "generations", "2", "packages", "*", "torch-"+applytest.TorchOld+"-*.whl"))
	if len(saved) != 1 {
		t.Errorf("the old wheel was not saved: %v", saved)
	}
	// The index goes away: rollback reinstalls from the saved wheel.
	if err := os.RemoveAll(filepath.Join(dir, "index")); err != nil {
		t.Fatal(err)
	}
	rollback()
	if got := torch(); !strings.Contains(got, applytest.TorchOld) {
		t.Fatalf("torch after rollback: %q\n%s", got, out.String())
	}
	rollback()
	if _, err := os.Stat(venv); !os.IsNotExist(err) {
		t.Errorf("the venv created by the first apply is still there: %v", err)
	}
}
