package providers_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/planner/compat"
	"github.com/gpuenv/gpuenv/planner/doctor"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/finding"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers"
)

// boardWithOldDriver is an HGX board running driver 550.54.15 with its
// Fabric Manager, alice outside video, and one package gpuenv does not
// read.
func boardWithOldDriver() *facts.Observation {
	return &facts.Observation{
		Driver: facts.Driver{ModuleVersion: "550.54.15", ModuleVersionFrom: "/proc/driver/nvidia/version"},
		Fabric: facts.Fabric{
			NVSwitches: []facts.PCIDevice{{Address: "0000:05:00.0", VendorID: 0x10de, DeviceID: 0x22a3}},
			Manager:    facts.FabricManager{Package: "nvidia-fabricmanager-550", Version: "550.54.15-1", Upstream: "550.54.15", Enabled: true, Running: "yes", PID: 812},
		},
		Packages: facts.Packages{Manager: facts.DatabaseDpkg, Packages: []facts.Package{
			{Name: "cuda-drivers-550", Version: "550.54.15-1", Architecture: "amd64", State: facts.StateInstalled, Want: "install"},
			{Name: "nvidia-fabricmanager-550", Version: "550.54.15-1", Architecture: "amd64", State: facts.StateInstalled, Want: "hold", Hold: true},
			{Name: "nvidia-kernel-source-550", Version: "550.54.15-1", Architecture: "amd64", State: facts.StateInstalled, Want: "install"},
		}},
		Groups: []facts.Group{
			{Name: "root", GID: 0, Members: []string{}},
			{Name: "video", GID: 44, Members: []string{"bob"}},
			{Name: "render", GID: 999, Members: []string{}},
			{Name: "alice", GID: 1002, Members: []string{}, PrimaryOf: []string{"alice"}},
		},
		DeviceNodes: []facts.DeviceNode{{Path: "/dev/nvidia0", Char: true, Major: 195, Minor: 0, Mode: "0660", UID: 0, GID: 44, Group: "video"}},
	}
}

// upgradeSteps are a driver upgrade to 550.90.07 on that board, Fabric
// Manager with it, alice added to video, a new system group, and a pip
// install that is not the system's packages.
func upgradeSteps() []plan.Step {
	apt := func(install ...plan.PackagePin) plan.Operation {
		return plan.Operation{Kind: plan.OpPackages, Packages: &plan.PackagesOp{Manager: plan.ManagerApt, Install: install}}
	}
	return []plan.Step{
		{Address: "driver.fabricmanager", Operations: []plan.Operation{apt(plan.PackagePin{Name: "nvidia-fabricmanager-550", Version: "550.90.07-1"})}},
		{Address: "driver", After: map[string]string{"kernel_modules": "open"}, Flags: plan.Flags{NeedsReboot: true}, Operations: []plan.Operation{
			apt(plan.PackagePin{Name: "cuda-drivers-550", Version: "550.90.07-1"}, plan.PackagePin{Name: "nvidia-open-550", Version: "550.90.07-0ubuntu1"}),
			{Kind: plan.OpPackages, Packages: &plan.PackagesOp{Manager: plan.ManagerApt, Remove: []string{"nvidia-kernel-source-550"}}},
		}},
		{Address: "group.video", Operations: []plan.Operation{{Kind: plan.OpGroup, Group: &plan.GroupOp{Group: "video", Add: []string{"alice"}, Remove: []string{"bob"}}}}},
		{Address: "group.gpu", Operations: []plan.Operation{{Kind: plan.OpGroup, Group: &plan.GroupOp{Group: "gpu", Create: true, System: true, Add: []string{"alice"}}}}},
		{Address: "framework.pytorch", Operations: []plan.Operation{{Kind: plan.OpPackages, Packages: &plan.PackagesOp{Manager: plan.ManagerPip, Install: []plan.PackagePin{{Name: "nvidia-cudnn-cu12", Version: "9.1.0.70"}}}}}},
	}
}

// The end state is what each observer would read after the steps: the
// package database with the packages they name, Fabric Manager read from
// that database, the module the driver step installs, the groups with
// their new members, and nothing else; the observation itself is left as
// it was.
func TestEndStatePredictsWhatObserversRead(t *testing.T) {
	obs := boardWithOldDriver()
	orig, _ := json.Marshal(obs)
	end := providers.EndState(obs, upgradeSteps())
	if now, _ := json.Marshal(obs); string(now) != string(orig) {
		t.Fatalf("EndState changed the observation it was given:\n%s\nwas\n%s", now, orig)
	}

	wantPkgs := []facts.Package{
		{Name: "cuda-drivers-550", Version: "550.90.07-1", Architecture: "amd64", State: facts.StateInstalled, Want: "install"},
		{Name: "nvidia-fabricmanager-550", Version: "550.90.07-1", Architecture: "amd64", State: facts.StateInstalled, Want: "hold", Hold: true},
		{Name: "nvidia-open-550", Version: "550.90.07-0ubuntu1", State: facts.StateInstalled, Want: "install"},
	}
	if diff := cmp.Diff(wantPkgs, end.Packages.Packages); diff != "" {
		t.Errorf("predicted packages (-want +got):\n%s", diff)
	}
	if end.Driver.ModuleVersion != "550.90.07" {
		t.Errorf("predicted module %q, want the driver step's 550.90.07", end.Driver.ModuleVersion)
	}
	fm := end.Fabric.Manager
	if fm.Upstream != "550.90.07" || fm.Version != "550.90.07-1" || !fm.Hold || !fm.Enabled || fm.Running != "yes" {
		t.Errorf("predicted Fabric Manager %+v, want 550.90.07-1, held, enabled and running after the reboot", fm)
	}
	wantGroups := []facts.Group{
		{Name: "root", GID: 0, Members: []string{}},
		{Name: "video", GID: 44, Members: []string{"alice"}},
		{Name: "render", GID: 999, Members: []string{}},
		{Name: "alice", GID: 1002, Members: []string{}, PrimaryOf: []string{"alice"}},
		// groupadd -r takes the highest free GID below 1000.
		{Name: "gpu", GID: 998, Members: []string{"alice"}},
	}
	if diff := cmp.Diff(wantGroups, end.Groups); diff != "" {
		t.Errorf("predicted groups (-want +got):\n%s", diff)
	}
}

// Plan judges doctor's rules of stage plan on the end state: Fabric
// Manager left behind by a driver upgrade, and a user the plan leaves
// outside the device nodes' group, are flagged there as doctor flags them
// on the host; the steps that fix them clear the findings.
func TestEndStateFindingsFollowTheSteps(t *testing.T) {
	alice := &doctor.User{Name: "alice", UID: 1002, GID: 1002}
	flagged := func(end *facts.Observation) map[string]finding.Status {
		out := map[string]finding.Status{}
		for _, c := range doctor.Judge(doctor.Input{Obs: end, User: alice}, finding.Plan) {
			if c.Status.Flagged() {
				out[c.ID] = c.Status
			}
		}
		return out
	}
	obs := boardWithOldDriver()
	if got := flagged(providers.EndState(obs, nil)); len(got) != 1 || got["devices.access"] != finding.Problem {
		t.Errorf("the host as it is: flagged %v, want devices.access only", got)
	}

	// The driver moves and Fabric Manager does not.
	steps := upgradeSteps()[1:2]
	if got := flagged(providers.EndState(obs, steps)); got["fabric.manager"] != finding.Problem {
		t.Errorf("a driver upgrade without Fabric Manager: flagged %v, want fabric.manager", got)
	}
	// All of it: Fabric Manager follows, and alice is in video.
	if got := flagged(providers.EndState(obs, upgradeSteps())); len(got) != 0 {
		t.Errorf("the whole upgrade: flagged %v, want nothing", got)
	}

	// Fabric Manager stopped on the host and not enabled: enabling it now
	// makes it run; a step that only stops it leaves it stopped.
	obs.Fabric.Manager.Enabled, obs.Fabric.Manager.Running = false, "no"
	enable := []plan.Step{{Address: "driver.fabricmanager", Operations: []plan.Operation{{Kind: plan.OpService, Service: &plan.ServiceOp{Unit: compat.FabricManagerUnit, Enable: true, Now: true}}}}}
	if got := flagged(providers.EndState(obs, enable)); got["fabric.manager"] != "" {
		t.Errorf("Fabric Manager enabled and started: flagged %v", got)
	}
	stop := []plan.Step{{Address: "driver", Operations: []plan.Operation{{Kind: plan.OpService, Service: &plan.ServiceOp{Unit: compat.FabricManagerUnit, Run: plan.ServiceStop}}}}}
	if got := flagged(providers.EndState(obs, stop)); got["fabric.manager"] != finding.Problem {
		t.Errorf("Fabric Manager stopped: flagged %v, want fabric.manager", got)
	}
}
