package apply_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/apply"
	"github.com/gpuenv/gpuenv/apply/applytest"
	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/plan"
)

// reinstallPlan is what -replace plans on the standard host: nvidia-smi
// and torch reinstalled at the versions installed.
func reinstallPlan(index string) *plan.Plan {
	steps := []plan.Step{
		{Address: "driver", Action: plan.Replace, Reason: "Requested with -replace.", ReasonCode: plan.ReasonReplaceRequested,
			After: map[string]string{"version": applytest.DriverOld, "packages": "nvidia-smi"},
			Operations: []plan.Operation{{Kind: plan.OpPackages, Packages: &plan.PackagesOp{
				Manager: "apt", Reinstall: true,
				Install: []plan.PackagePin{{Name: "nvidia-smi", Version: applytest.DriverOld}},
			}}}},
		{Address: "framework.pytorch", Action: plan.Replace, Reason: "Requested with -replace.", ReasonCode: plan.ReasonReplaceRequested,
			After: map[string]string{"version": applytest.TorchOld, "index_url": index},
			Operations: []plan.Operation{{Kind: plan.OpPackages, Packages: &plan.PackagesOp{
				Manager: "pip", Venv: applytest.Venv, IndexURL: index, Reinstall: true,
				Install: []plan.PackagePin{{Name: "torch", Version: applytest.TorchOld}},
			}}}},
	}
	p := &plan.Plan{FormatVersion: plan.FormatVersion, SpecDigest: "sha256:test", Steps: steps}
	p.Transactions = planner.Batch(p.Steps)
	return p
}

// A reinstall rewrites the files of packages at the version installed
// (apt-get install --reinstall; pip --force-reinstall --no-deps), changes
// no version, and is journaled; rolled back, the package set is as it
// was, with nothing to undo.
func TestApplyReinstallRepairsFiles(t *testing.T) {
	fx := newFixture(t)
	p := reinstallPlan(fx.Index)
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	smi := filepath.Join(fx.Root, "usr/bin/nvidia-smi")
	torch := filepath.Join(fx.Root, applytest.Venv, "lib/python3.11/site-packages/torch/version.py")
	if m, _ := filepath.Glob(filepath.Join(fx.Root, applytest.Venv, "lib/python3*/site-packages/torch/version.py")); len(m) == 1 {
		torch = m[0]
	}
	good := map[string][]byte{}
	for _, f := range []string{smi, torch} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		good[f] = b
		if err := os.WriteFile(f, []byte("damaged\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	damaged := fx.snapshot()
	fx.applies(p)
	for f, want := range good {
		if b, _ := os.ReadFile(f); string(b) != string(want) {
			t.Errorf("%s after the reinstall: %q, want %q", f, b, want)
		}
	}
	after := fx.snapshot()
	for k, v := range damaged.Packages {
		if after.Packages[k] != v {
			t.Errorf("package %s: %s after the reinstall, %s before", k, after.Packages[k], v)
		}
	}
	journal, err := os.ReadFile(filepath.Join(fx.Root, stateDir, "generations", "1", "journal"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(journal), `"reinstall":true`) {
		t.Errorf("the journal does not record the reinstall:\n%s", journal)
	}
	for _, want := range []string{"apt: reinstalling nvidia-smi " + applytest.DriverOld, "pip: in " + applytest.Venv + "; reinstalling torch " + applytest.TorchOld} {
		if !strings.Contains(fx.out.String(), want) {
			t.Errorf("the output does not say %q:\n%s", want, fx.out.String())
		}
	}
	res := fx.rollback(-1)
	if res.Status != apply.StatusDone {
		t.Fatalf("rollback: %s\n%s", res.Status, fx.out.String())
	}
	back := fx.snapshot()
	for k, v := range damaged.Packages {
		if back.Packages[k] != v {
			t.Errorf("package %s: %s after the rollback, %s before", k, back.Packages[k], v)
		}
	}
}

// A reinstall that fails part-way (dpkg's postinst fails, leaving the
// package half-configured) is reverted as any transaction is: from the
// package file saved before it, to the same host.
func TestApplyReinstallFailureReverts(t *testing.T) {
	fx := newFixture(t)
	before := fx.snapshot()
	fx.runner.Env = append(fx.runner.Env, applytest.EnvFail+"=apt-get:install@half")
	res := fx.apply(reinstallPlan(fx.Index), fx.opts(nil))
	if res.Status != apply.StatusReverted {
		t.Fatalf("status %s, failed %+v, revert %+v\n%s", res.Status, res.Failed, res.RevertFailed, fx.out.String())
	}
	if res.Failed == nil || res.Failed.Step != "driver" {
		t.Errorf("failed %+v, want the driver's reinstall", res.Failed)
	}
	fx.same(before, "after a failed reinstall")
}

// dnf reinstall puts a package's files back at its installed EVR, its
// versionlock left as it was; rolled back, the package set is the same.
func TestDnfReinstallRepairsFiles(t *testing.T) {
	fx := newRPMFixture(t)
	before := fx.packages()
	smi := filepath.Join(fx.Root, "usr/bin/nvidia-smi")
	want, err := os.ReadFile(smi)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(smi, []byte("damaged\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	fx.applies(oneStep("driver", plan.Replace, applytest.DnfOp(plan.PackagesOp{Reinstall: true, Install: []plan.PackagePin{
		{Name: "libnvidia-ml", Version: applytest.DnfDriverOld}, {Name: "nvidia-driver-cuda", Version: applytest.DnfDriverOld}}})))
	if got, _ := os.ReadFile(smi); string(got) != string(want) {
		t.Errorf("nvidia-smi after dnf reinstall: %q, want %q", got, want)
	}
	after := fx.packages()
	for k, v := range before {
		if after[k] != v {
			t.Errorf("package %s: %q after the reinstall, %q before", k, after[k], v)
		}
	}
	if rb := fx.rollback(-1); rb.Status != apply.StatusDone {
		t.Fatalf("rollback: %s\n%s", rb.Status, fx.out.String())
	}
	back := fx.packages()
	for k, v := range before {
		if back[k] != v {
			t.Errorf("package %s: %q after the rollback, %q before", k, back[k], v)
		}
	}
}
