package driver_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	planpkg "github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/planner/plantest"
	"github.com/gpuenv/gpuenv/providers"
	"github.com/gpuenv/gpuenv/providers/driver"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

// hgx observes the working DGX (four NVSwitches; Fabric Manager enabled
// and running) with the test's own package database, and Fabric
// Manager's facts as that database makes them.
func hgx(t *testing.T, pkgs ...facts.Package) (*host.Host, *facts.Observation) {
	t.Helper()
	h := hosttest.Fixture(t, "ubuntu2204-working")
	obs := providers.Observe(context.Background(), h, providers.ObserveOptions{})
	obs.Packages.Manager = "dpkg"
	obs.Packages.Packages = pkgs
	obs.Fabric.Manager = facts.FabricManager{}
	driver.ObserveFabric(h, obs)
	if len(obs.Fabric.NVSwitches) != 4 {
		t.Fatalf("%d NVSwitches on the working DGX, want 4", len(obs.Fabric.NVSwitches))
	}
	return h, obs
}

// hgxVersions is NVIDIA's repository as a fake package manager lists it:
// the driver and Fabric Manager at two driver versions, each Fabric
// Manager with its own package revision.
var hgxVersions = map[string][]string{
	"nvidia-driver-550-open":   {"550.127.05-0ubuntu1", "550.54.15-0ubuntu1"},
	"nvidia-fabricmanager-550": {"550.127.05-1", "550.54.15-1"},
	"libnvidia-nscq-550":       {"550.127.05-1", "550.54.15-1"},
}

const hgxSpec = "driver {\n  version = \"550.127.05\"\n  source = \"nvidia\"\n  kernel_modules = \"open\"\n  hold = true\n}\n"

func hgxInstalled() []facts.Package {
	return []facts.Package{
		planInstalled("nvidia-driver-550-open", "550.54.15-0ubuntu1", true),
		planInstalled("nvidia-fabricmanager-550", "550.54.15-1", true),
		planInstalled("libnvidia-nscq-550", "550.54.15-1", false),
	}
}

func stepOps(s *planpkg.Step) []string {
	var out []string
	for _, op := range s.Operations {
		switch {
		case op.Service != nil && op.Service.Run != "":
			out = append(out, op.Service.Run+" "+op.Service.Unit)
		case op.Service != nil:
			out = append(out, "enable "+op.Service.Unit)
		case op.Kernel != nil:
			out = append(out, strings.TrimSpace(string(op.Kernel.Action)+" "+op.Kernel.Module))
		case op.Packages != nil:
			out = append(out, "packages")
		}
	}
	return out
}

// TestFabricManagerFollowsUpgrade: on a board with NVSwitches an upgrade
// of the driver takes Fabric Manager and the NVSwitch query library to
// the same upstream version, each at its own package revision, in the
// driver's package transaction, held as they were or as the spec says;
// applied, the plan converges.
func TestFabricManagerFollowsUpgrade(t *testing.T) {
	_, obs := hgx(t, hgxInstalled()...)
	pl := planner.New(driver.Kind.Provider())
	asked := 0
	pl.Candidates = countingCandidates{versions: hgxVersions, asked: &asked}
	s := plantest.LoadSpec(t, hgxSpec)
	plan := plantest.Plan(t, pl, s, obs)
	fm, d := plan.Step(driver.FabricStep), plan.Step("driver")
	if fm == nil || d == nil {
		t.Fatalf("steps %+v, want driver.fabricmanager and driver", plan.Steps)
	}
	if got := planPins(*fm); got != "nvidia-fabricmanager-550=550.127.05-1 libnvidia-nscq-550=550.127.05-1 hold:nvidia-fabricmanager-550 hold:libnvidia-nscq-550" {
		t.Errorf("Fabric Manager pins %q", got)
	}
	if fm.Action != planpkg.Update || fm.Before["version"] != "550.54.15-1" || !strings.Contains(fm.Reason, "error 802") {
		t.Errorf("step %+v", fm)
	}
	if fmOp, dOp := fm.Operations[0], d.Operations[0]; fmOp.Transaction == 0 || fmOp.Transaction != dOp.Transaction {
		t.Errorf("Fabric Manager in transaction %d, the driver in %d: not one transaction", fmOp.Transaction, dOp.Transaction)
	}
	if !slices.Contains(d.DependsOn, driver.FabricStep) {
		t.Errorf("the driver does not wait for Fabric Manager's packages: %v", d.DependsOn)
	}
	if err := plan.Validate(); err != nil {
		t.Errorf("the plan does not validate: %v", err)
	}
	planApply(obs, plan.Steps)
	obs.Fabric.Manager = facts.FabricManager{Enabled: true, Running: "yes"}
	driver.ObserveFabric(hosttest.Fixture(t, "ubuntu2204-working"), obs)
	plantest.Converged(t, pl, s, obs, "the upgrade")
}

// TestFabricManagerMissingRefused: a driver version whose Fabric Manager
// the sources lack cannot be planned on a board with NVSwitches, and the
// error names the package and what the sources offer.
func TestFabricManagerMissingRefused(t *testing.T) {
	_, obs := hgx(t, hgxInstalled()...)
	pl := planner.New(driver.Kind.Provider())
	asked := 0
	versions := map[string][]string{
		"nvidia-driver-550-open":   hgxVersions["nvidia-driver-550-open"],
		"nvidia-fabricmanager-550": {"550.54.15-1"},
		"libnvidia-nscq-550":       hgxVersions["libnvidia-nscq-550"],
	}
	pl.Candidates = countingCandidates{versions: versions, asked: &asked}
	_, diags := pl.Plan(context.Background(), plantest.LoadSpec(t, hgxSpec), obs)
	if !diags.HasErrors() {
		t.Fatal("a driver without its Fabric Manager was planned")
	}
	msg := diags.Error()
	for _, want := range []string{"No Fabric Manager at the driver's version", "no nvidia-fabricmanager-550 550.127.05", "they offer 550.54.15-1", "error 802"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error lacks %q: %s", want, msg)
		}
	}
}

// TestFabricManagerReload: on the running system a driver change that
// reloads the modules stops Fabric Manager before the first module goes
// and starts it after the new ones are loaded, before the version check.
func TestFabricManagerReload(t *testing.T) {
	_, obs := hgx(t, hgxInstalled()...)
	obs.Root = "/"
	obs.Init = facts.Init{Live: true, PID1: "systemd", Systemd: true}
	obs.Context.Kind = "host"
	obs.NVML.Devices = nil
	for i := range obs.Kernel.Loaded {
		obs.Kernel.Loaded[i].RefCount = len(obs.Kernel.Loaded[i].UsedBy)
	}
	obs.Kernel.Holders = nil
	pl := planner.New(driver.Kind.Provider())
	asked := 0
	pl.Candidates = countingCandidates{versions: hgxVersions, asked: &asked}
	plan := plantest.Plan(t, pl, plantest.LoadSpec(t, hgxSpec), obs)
	d := plan.Step("driver")
	if d == nil || !d.Flags.NeedsModuleReload || d.Flags.NeedsReboot {
		t.Fatalf("driver step %+v: no reload planned", d)
	}
	ops := stepOps(d)
	stop := slices.Index(ops, "stop nvidia-fabricmanager.service")
	unload := slices.IndexFunc(ops, func(s string) bool { return strings.HasPrefix(s, "unload_module") })
	load := slices.IndexFunc(ops, func(s string) bool { return strings.HasPrefix(s, "load_module") })
	start := slices.Index(ops, "start nvidia-fabricmanager.service")
	if stop < 0 || start < 0 || !(stop < unload && unload < load && load < start) || ops[len(ops)-1] != "check_version" {
		t.Errorf("reload operations %q: Fabric Manager must stop before the unload and start after the load", ops)
	}
	if err := plan.Validate(); err != nil {
		t.Errorf("the plan does not validate: %v", err)
	}
}

// TestFabricManagerAtInstalledDriver: with the driver as the spec says
// and Fabric Manager missing, a step of its own installs it at the
// installed driver's version and enables its service.
func TestFabricManagerAtInstalledDriver(t *testing.T) {
	_, obs := hgx(t, planInstalled("nvidia-driver-550-open", "550.54.15-0ubuntu1", false))
	obs.Fabric.Manager.Enabled = false
	pl := planner.New(driver.Kind.Provider())
	asked := 0
	pl.Candidates = countingCandidates{versions: hgxVersions, asked: &asked}
	s := plantest.LoadSpec(t, "driver {\n  version = \"550.54.15\"\n  source = \"nvidia\"\n  kernel_modules = \"open\"\n}\n")
	plan := plantest.Plan(t, pl, s, obs)
	if len(plan.Steps) != 1 || plan.Steps[0].Address != driver.FabricStep {
		t.Fatalf("steps %+v, want driver.fabricmanager alone", plan.Steps)
	}
	fm := plan.Steps[0]
	if got := planPins(fm); got != "nvidia-fabricmanager-550=550.54.15-1" {
		t.Errorf("pins %q", got)
	}
	if ops := stepOps(&fm); !slices.Equal(ops, []string{"packages", "enable nvidia-fabricmanager.service"}) {
		t.Errorf("operations %q", ops)
	}
	if fm.Action != planpkg.Create || !strings.Contains(fm.Reason, "next boot") {
		t.Errorf("step %+v", fm)
	}
	planApply(obs, plan.Steps)
	obs.Fabric.Manager = facts.FabricManager{Enabled: true}
	driver.ObserveFabric(hosttest.Fixture(t, "ubuntu2204-working"), obs)
	plantest.Converged(t, pl, s, obs, "installing Fabric Manager")
}
