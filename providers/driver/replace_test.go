package driver_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	planpkg "github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/planner/plantest"
	"github.com/gpuenv/gpuenv/providers/driver"
)

// -replace driver on the running system, with the driver the spec asks
// for installed: the step reinstalls the driver's packages at their
// installed version, its module package beside the metapackage included,
// and then reloads the modules, checking the version loaded, as a driver
// change does; nothing about the driver's holds or other packages is
// planned. Without -replace the same host has no changes.
func TestPlanReplaceDriverReloads(t *testing.T) {
	const v = "550.144.03-0ubuntu0.22.04.1"
	_, obs := planObserve(t, "ubuntu2204-working")
	obs.Packages.Packages = []facts.Package{planInstalled("nvidia-driver-550", v, true), planInstalled("nvidia-dkms-550", v, false)}
	obs.Root = "/"
	obs.Init = facts.Init{Live: true, PID1: "systemd", Systemd: true}
	obs.Context.Kind = "host"
	obs.NVML.Devices = nil
	for i := range obs.Kernel.Loaded {
		obs.Kernel.Loaded[i].RefCount = len(obs.Kernel.Loaded[i].UsedBy)
	}
	obs.Kernel.Holders = []facts.Holder{{PID: 900, Command: "nvidia-persiste", Devices: []string{"/dev/nvidiactl"}, Module: "nvidia", Unit: "nvidia-persistenced.service"}}
	obs.Driver.ModuleFlavor = "proprietary"
	s := plantest.LoadSpec(t, "driver {\n  version = \"550.*\"\n  kernel_modules = \"proprietary\"\n}\n")
	pl := planner.New(driver.Kind.Provider())
	asked := 0
	pl.Candidates = countingCandidates{versions: map[string][]string{"nvidia-driver-550": {v}, "nvidia-dkms-550": {v}}, asked: &asked}
	if plan := plantest.Plan(t, pl, s, obs); !plan.Empty() {
		t.Fatalf("without -replace: %d steps, want none", len(plan.Steps))
	}

	pl.Replace = []string{"driver"}
	plan := plantest.Plan(t, pl, s, obs)
	if len(plan.Steps) != 1 {
		t.Fatalf("steps %v, want the driver's alone", plan.Steps)
	}
	d := plan.Steps[0]
	if d.Address != "driver" || d.Action != planpkg.Replace || d.ReasonCode != planpkg.ReasonReplaceRequested || !strings.HasPrefix(d.Reason, "Requested with -replace") {
		t.Errorf("step %s %s %s %q", d.Address, d.Action, d.ReasonCode, d.Reason)
	}
	op := d.Operations[0].Packages
	if op == nil || !op.Reinstall || planPins(d) != "nvidia-driver-550="+v+" nvidia-dkms-550="+v {
		t.Errorf("package operation %+v (%s), want a reinstall of both packages at %s", op, planPins(d), v)
	}
	var ops []string
	for _, op := range d.Operations[1:] {
		switch {
		case op.Service != nil:
			ops = append(ops, op.Service.Run+" "+op.Service.Unit)
		case op.Kernel != nil:
			ops = append(ops, strings.TrimSpace(string(op.Kernel.Action)+" "+op.Kernel.Module+op.Kernel.Version))
		}
	}
	if !slices.Contains(ops, "unload_module nvidia") || !slices.Contains(ops, "load_module nvidia") || ops[len(ops)-1] != "check_version 550.144.03" {
		t.Errorf("reload operations %q", ops)
	}
	if d.Flags.NeedsReboot || !d.Flags.NeedsModuleReload || !strings.Contains(d.Reason, "no reboot is needed") {
		t.Errorf("flags %+v, reason %q", d.Flags, d.Reason)
	}
	if err := plan.Validate(); err != nil {
		t.Errorf("the plan does not validate: %v", err)
	}
}
