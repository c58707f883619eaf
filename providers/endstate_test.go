package providers_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/planner"
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
		PCI:    []facts.PCIDevice{{Address: "0000:18:00.0", VendorID: 0x10de, DeviceID: 0x2330, Driver: "nvidia"}},
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
		DeviceNodes: []facts.DeviceNode{
			{Path: "/dev/nvidia0", Char: true, Major: 195, Minor: 0, Mode: "0660", UID: 0, GID: 44, Group: "video"},
			{Path: "/dev/nvidiactl", Char: true, Major: 195, Minor: 255, Mode: "0660", UID: 0, GID: 44, Group: "video"},
			{Path: "/dev/nvidia-uvm", Char: true, Major: 510, Minor: 0, Mode: "0660", UID: 0, GID: 44, Group: "video"},
		},
	}
}

// endVerdicts are doctor's verdicts of stage plan, by rule ID, on the
// host the steps leave obs in, judged for user; with flaggedOnly, the
// warnings and problems alone.
func endVerdicts(obs *facts.Observation, user *doctor.User, flaggedOnly bool, steps ...plan.Step) map[string]finding.Status {
	out := map[string]finding.Status{}
	for _, c := range doctor.Judge(doctor.Input{Obs: providers.EndState(obs, steps), User: user}, finding.Plan) {
		if !flaggedOnly || c.Status.Flagged() {
			out[c.ID] = c.Status
		}
	}
	return out
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

// A driver downgrade below what an installed toolkit needs leaves CUDA
// programs failing with "CUDA driver version is insufficient": the end
// state has the toolkit and the older driver, and doctor's cuda.driver
// rule says so at plan. The toolkit the plan installs is judged the same
// way, against the driver it leaves.
func TestEndStateJudgesToolkitsAgainstTheDriver(t *testing.T) {
	obs := &facts.Observation{
		NVML:   facts.NVML{Status: "ok", DriverVersion: "560.35.03"},
		Driver: facts.Driver{ModuleVersion: "560.35.03", LibraryVersion: "560.35.03"},
		CUDA: facts.CUDA{Toolkits: []facts.Toolkit{
			{Path: "/usr/local/cuda-12.6", Version: "12.6.2", VersionFrom: "version.json", Layout: "nvidia", Package: "cuda-toolkit-12-6"},
		}},
	}
	apt := func(name, v string) []plan.Operation {
		return []plan.Operation{{Kind: plan.OpPackages, Packages: &plan.PackagesOp{Manager: plan.ManagerApt, Install: []plan.PackagePin{{Name: name, Version: v}}}}}
	}
	downgrade := plan.Step{Address: "driver", After: map[string]string{"kernel_modules": "open"}, Flags: plan.Flags{NeedsReboot: true}, Operations: apt("nvidia-driver-470", "470.256.02-0ubuntu0.22.04.1")}
	cuda124 := plan.Step{Address: "cuda", Action: plan.Create, After: map[string]string{"path": "/usr/local/cuda-12.4", "version": "12.4.1", "source": "nvidia"}, Operations: apt("cuda-toolkit-12-4", "12.4.1-1")}

	judge := func(steps ...plan.Step) map[string]finding.Status { return endVerdicts(obs, nil, false, steps...) }
	if got := judge(); got["cuda.driver:/usr/local/cuda-12.6"] != finding.OK {
		t.Errorf("as observed: %v, want CUDA 12.6 fine on 560", got)
	}
	got := judge(downgrade, cuda124)
	if got["cuda.driver:/usr/local/cuda-12.6"] != finding.Problem {
		t.Errorf("after a downgrade to 470: %v, want CUDA 12.6 flagged", got)
	}
	if got["cuda.driver:/usr/local/cuda-12.4"] != finding.Problem {
		t.Errorf("the toolkit the plan installs: %v, want CUDA 12.4 on 470 flagged", got)
	}
	end := providers.EndState(obs, []plan.Step{downgrade, cuda124})
	if i := slices.IndexFunc(end.CUDA.Toolkits, func(tk facts.Toolkit) bool { return tk.Path == "/usr/local/cuda-12.4" }); i < 0 || end.CUDA.Toolkits[i].Nvcc != "/usr/local/cuda-12.4/bin/nvcc" || end.CUDA.Toolkits[i].Package != "cuda-toolkit-12-4" {
		t.Errorf("predicted toolkits %+v, want CUDA 12.4 at /usr/local/cuda-12.4 with its nvcc", end.CUDA.Toolkits)
	}
	if end.NVML.DriverVersion != "470.256.02" || end.Driver.LibraryVersion != "470.256.02" {
		t.Errorf("predicted NVML %q, library %q, want the driver step's 470.256.02", end.NVML.DriverVersion, end.Driver.LibraryVersion)
	}
	if len(obs.CUDA.Toolkits) != 1 || obs.NVML.DriverVersion != "560.35.03" {
		t.Errorf("EndState changed the observation: %+v", obs)
	}
}

// NVIDIA's toolkit package makes /usr/local/cuda lead to its toolkit
// where the link is missing, and brings the loader's files for its
// libraries: a fresh CUDA install leaves doctor's cuda.default and
// cuda.loader satisfied, as on a host where the packages ran. A link
// that already leads to another toolkit stays where it was; the
// distribution's toolkit brings neither.
func TestEndStatePredictsTheToolkitsLinkAndLoader(t *testing.T) {
	gpu := func() *facts.Observation {
		return &facts.Observation{
			OS:     facts.OS{ID: "ubuntu", VersionID: "22.04", Family: "deb", Arch: "x86_64"},
			NVML:   facts.NVML{Status: "ok", DriverVersion: "550.54.15"},
			Driver: facts.Driver{ModuleVersion: "550.54.15", LibraryVersion: "550.54.15"},
			PCI:    []facts.PCIDevice{{Address: "0000:18:00.0", VendorID: 0x10de, DeviceID: 0x2330, Driver: "nvidia"}},
			Environment: facts.Environment{LoaderPaths: []facts.LoaderPath{
				{Dir: "/usr/lib/x86_64-linux-gnu", File: "/etc/ld.so.conf.d/x86_64-linux-gnu.conf"},
			}},
		}
	}
	apt := func(name, v string) []plan.Operation {
		return []plan.Operation{{Kind: plan.OpPackages, Packages: &plan.PackagesOp{Manager: plan.ManagerApt, Install: []plan.PackagePin{{Name: name, Version: v}}}}}
	}
	cuda124 := plan.Step{Address: "cuda", Action: plan.Create, After: map[string]string{"path": "/usr/local/cuda-12.4", "version": "12.4.1", "source": "nvidia"}, Operations: apt("cuda-toolkit-12-4", "12.4.1-1")}
	judge := func(obs *facts.Observation, steps ...plan.Step) (map[string]finding.Status, *facts.Observation) {
		end := providers.EndState(obs, steps)
		out := map[string]finding.Status{}
		for _, c := range doctor.Judge(doctor.Input{Obs: end}, finding.Plan) {
			out[c.ID] = c.Status
		}
		return out, end
	}

	obs := gpu()
	got, end := judge(obs, cuda124)
	if got["cuda.default"] != finding.OK || got["cuda.loader"] != finding.OK {
		t.Errorf("a fresh CUDA 12.4: %v, want cuda.default and cuda.loader ok", got)
	}
	if end.CUDA.Default != "/usr/local/cuda-12.4" {
		t.Errorf("predicted /usr/local/cuda -> %q, want /usr/local/cuda-12.4", end.CUDA.Default)
	}
	want := []facts.LoaderPath{
		{Dir: "/usr/local/cuda/targets/x86_64-linux/lib", File: "/etc/ld.so.conf.d/000_cuda.conf"},
		{Dir: "/usr/local/cuda-12/targets/x86_64-linux/lib", File: "/etc/ld.so.conf.d/988_cuda-12.conf"},
		{Dir: "/usr/lib/x86_64-linux-gnu", File: "/etc/ld.so.conf.d/x86_64-linux-gnu.conf"},
	}
	if diff := cmp.Diff(want, end.Environment.LoaderPaths); diff != "" {
		t.Errorf("predicted loader paths (-want +got):\n%s", diff)
	}
	if obs.CUDA.Default != "" || len(obs.Environment.LoaderPaths) != 1 {
		t.Errorf("EndState changed the observation: %+v", obs)
	}

	// An arm64 server's toolkit lives under sbsa-linux.
	arm := gpu()
	arm.OS.Arch = "aarch64"
	if _, end := judge(arm, cuda124); !slices.ContainsFunc(end.Environment.LoaderPaths, func(lp facts.LoaderPath) bool {
		return lp.Dir == "/usr/local/cuda-12/targets/sbsa-linux/lib"
	}) {
		t.Errorf("aarch64 loader paths %+v, want sbsa-linux's", end.Environment.LoaderPaths)
	}

	// /usr/local/cuda already leads to CUDA 12.6: it stays, and doctor
	// says so of the end state as of the host.
	withLink := gpu()
	withLink.CUDA = facts.CUDA{Default: "/usr/local/cuda-12.6", Toolkits: []facts.Toolkit{
		{Path: "/usr/local/cuda-12.6", Version: "12.6.2", VersionFrom: "version.json", Layout: "nvidia", Package: "cuda-toolkit-12-6"},
	}}
	if _, end := judge(withLink, cuda124); end.CUDA.Default != "/usr/local/cuda-12.6" {
		t.Errorf("predicted /usr/local/cuda -> %q, want it left at /usr/local/cuda-12.6", end.CUDA.Default)
	}

	// The distribution's toolkit: no link, no loader files.
	distro := plan.Step{Address: "cuda", Action: plan.Create, After: map[string]string{"path": "/usr/lib/cuda", "version": "12.0.140", "source": "distro"}, Operations: apt("nvidia-cuda-toolkit", "12.0.140~12.0.1-4build4")}
	if _, end := judge(gpu(), distro); end.CUDA.Default != "" || len(end.Environment.LoaderPaths) != 1 {
		t.Errorf("the distribution's toolkit: link %q, loader paths %+v, want neither", end.CUDA.Default, end.Environment.LoaderPaths)
	}
}

// The live state (the kernel log's Xid errors, the device nodes) is the
// host's after apply as long as the plan neither reboots nor reloads the
// driver: plan then warns of it as doctor does. A plan that reboots
// starts a new boot, whose log holds nothing of this one's, and makes the
// device nodes afresh, so that neither is judged from before.
func TestEndStateJudgesTheLiveStateUntilAReset(t *testing.T) {
	obs := &facts.Observation{
		OS:     facts.OS{ID: "ubuntu", VersionID: "22.04", Family: "deb", Arch: "x86_64"},
		PCI:    []facts.PCIDevice{{Address: "0000:18:00.0", VendorID: 0x10de, DeviceID: 0x2330, Driver: "nvidia"}},
		NVML:   facts.NVML{Status: "ok", DriverVersion: "550.54.15", Devices: []facts.GPUDevice{{Index: 0, UUID: "GPU-1", PCIBusID: "00000000:18:00.0"}}},
		Driver: facts.Driver{ModuleVersion: "550.54.15", ModuleVersionFrom: "/proc/driver/nvidia/version", LibraryVersion: "550.54.15"},
		Kernel: facts.Kernel{Log: &facts.KernelLog{
			Sources: []facts.KernelLogSource{{Path: "/dev/kmsg", Bytes: 4096, BootStart: true}},
			Events: []facts.KernelEvent{{Kind: facts.EventXid, PCIAddress: "0000:18:00.0", Code: "79", Detail: "GPU has fallen off the bus.",
				Message: "NVRM: Xid (PCI:0000:18:00): 79, pid=1234, GPU has fallen off the bus.", Source: "/dev/kmsg", Count: 1}},
		}},
		DeviceNodes: []facts.DeviceNode{
			{Path: "/dev/nvidia0", Char: true, Major: 195, Minor: 0, Mode: "0666"},
			{Path: "/dev/nvidiactl", Char: true, Major: 195, Minor: 255, Mode: "0666"},
		},
	}
	group := plan.Step{Address: "group.video", Action: plan.Update, Operations: []plan.Operation{{Kind: plan.OpGroup, Group: &plan.GroupOp{Group: "video", Add: []string{"alice"}}}}}
	driver := plan.Step{Address: "driver", After: map[string]string{"kernel_modules": "open"}, Flags: plan.Flags{NeedsReboot: true, NeedsModuleReload: true}, Operations: []plan.Operation{
		{Kind: plan.OpPackages, Packages: &plan.PackagesOp{Manager: plan.ManagerApt, Install: []plan.PackagePin{{Name: "nvidia-driver-570-open", Version: "570.172.08-0ubuntu1"}}}},
	}}
	flagged := func(steps ...plan.Step) map[string]finding.Status { return endVerdicts(obs, nil, true, steps...) }
	got := flagged(group)
	if got[doctor.CheckGPUXid] == "" || got["devices.nodes"] != finding.Problem {
		t.Errorf("a plan that leaves the driver alone: flagged %v, want the Xid and the missing /dev/nvidia-uvm", got)
	}
	got = flagged(group, driver)
	if len(got) != 0 {
		t.Errorf("a plan that installs a driver and reboots: flagged %v, want nothing", got)
	}
	end := providers.EndState(obs, []plan.Step{group, driver})
	if l := end.Kernel.Log; l == nil || len(l.Events) != 0 || l.Module != nil || len(l.Sources) != 1 {
		t.Errorf("the kernel log after the reboot: %+v, want its sources with no event", l)
	}
	if end.Driver.ModuleFlavor != "open" {
		t.Errorf("the module flavour after the driver step: %q, want open", end.Driver.ModuleFlavor)
	}
	if len(obs.Kernel.Log.Events) != 1 || obs.Predicted != nil {
		t.Errorf("EndState changed the observation: %+v", obs.Kernel.Log)
	}
}

// The driver a plan installs is judged against the GPUs as doctor judges
// the loaded one: the open modules on a Pascal GPU, or a branch that
// dropped Kepler, leave the GPU unused, and plan says so before apply.
func TestEndStateJudgesTheDriverAgainstTheGPUs(t *testing.T) {
	host := func(deviceID uint16) *facts.Observation {
		return &facts.Observation{
			OS:     facts.OS{ID: "ubuntu", VersionID: "22.04", Family: "deb", Arch: "x86_64"},
			PCI:    []facts.PCIDevice{{Address: "0000:03:00.0", VendorID: 0x10de, DeviceID: deviceID}},
			Kernel: facts.Kernel{Release: "6.8.0-45-generic"},
		}
	}
	install := func(flavor, pkg, v string) plan.Step {
		return plan.Step{Address: "driver", After: map[string]string{"kernel_modules": flavor}, Flags: plan.Flags{NeedsReboot: true}, Operations: []plan.Operation{
			{Kind: plan.OpPackages, Packages: &plan.PackagesOp{Manager: plan.ManagerApt, Install: []plan.PackagePin{{Name: pkg, Version: v}}}},
		}}
	}
	judge := func(obs *facts.Observation, steps ...plan.Step) map[string]finding.Status {
		return endVerdicts(obs, nil, false, steps...)
	}
	p100 := host(0x15f8)
	if got := judge(p100, install("open", "nvidia-driver-550-open", "550.127.05-0ubuntu1")); got["driver.flavor"] != finding.Problem {
		t.Errorf("the open modules on a Tesla P100: %v, want driver.flavor flagged", got)
	}
	if got := judge(p100, install("proprietary", "nvidia-driver-550", "550.127.05-0ubuntu1")); got["driver.flavor"] != finding.OK {
		t.Errorf("the proprietary modules on a Tesla P100: %v, want driver.flavor ok", got)
	}
	// The proprietary module is loaded: a switch to the open ones is
	// judged as the module the reboot loads.
	loaded := host(0x15f8)
	loaded.Driver = facts.Driver{ModuleVersion: "535.183.01", ModuleVersionFrom: "/proc/driver/nvidia/version", ModuleFlavor: "proprietary"}
	if got := judge(loaded, install("open", "nvidia-driver-550-open", "550.127.05-0ubuntu1")); got["driver.flavor"] != finding.Problem {
		t.Errorf("a switch to the open modules on a Tesla P100: %v, want driver.flavor flagged", got)
	}
	k80 := host(0x102d)
	if got := judge(k80, install("proprietary", "nvidia-driver-550", "550.127.05-0ubuntu1")); got["driver.branch"] != finding.Problem {
		t.Errorf("driver 550 on a Tesla K80: %v, want driver.branch flagged", got)
	}
	if got := judge(k80, install("proprietary", "nvidia-driver-470", "470.256.02-0ubuntu0.22.04.1")); got["driver.branch"] != finding.OK {
		t.Errorf("driver 470 on a Tesla K80: %v, want driver.branch ok", got)
	}
}

// What the loader resolves and which distributions an environment holds
// are the host's after apply while no step installs or removes packages
// there (or, for the loader, writes a file the environment is read
// from): plan warns of them as doctor does. A step that does leaves them
// to be known after apply.
func TestEndStateJudgesLoaderAndDistributionsUntilPackagesChange(t *testing.T) {
	venv := facts.PythonEnv{Interpreter: "/opt/jax/bin/python", Prefix: "/opt/jax", Virtual: true,
		Frameworks: []facts.Framework{},
		Unmet: []facts.UnmetRequirement{{Distribution: "jax-cuda12-plugin", Version: "0.4.35", Requirement: "nvidia-cudnn-cu12>=9.1,<10.0", Target: "nvidia-cudnn-cu12",
			File: "/opt/jax/lib/python3.11/site-packages/jax_cuda12_plugin-0.4.35.dist-info/METADATA"}}}
	obs := &facts.Observation{
		OS:     facts.OS{ID: "ubuntu", VersionID: "22.04", Family: "deb", Arch: "x86_64"},
		PCI:    []facts.PCIDevice{{Address: "0000:01:00.0", VendorID: 0x10de}},
		NVML:   facts.NVML{Status: "ok", DriverVersion: "550.54.15"},
		Driver: facts.Driver{ModuleVersion: "550.54.15", LibraryVersion: "550.54.15"},
		Python: []facts.PythonEnv{venv},
		Loader: facts.Loader{Consumers: []facts.LoaderResolution{{Kind: "program", Subject: "/usr/local/bin/train", Object: "/usr/local/bin/train", NeededFrom: "ELF",
			Needed: []string{"libcudart.so.12"}, Libraries: []facts.ResolvedLibrary{{Soname: "libcudart.so.12"}}}}},
	}
	group := plan.Step{Address: "group.video", Action: plan.Update, Operations: []plan.Operation{{Kind: plan.OpGroup, Group: &plan.GroupOp{Group: "video", Add: []string{"alice"}}}}}
	apt := plan.Step{Address: "cudnn", Operations: []plan.Operation{{Kind: plan.OpPackages, Packages: &plan.PackagesOp{Manager: plan.ManagerApt,
		Install: []plan.PackagePin{{Name: "libcudnn9-cuda-12", Version: "9.1.0.70-1"}}}}}}
	pip := plan.Step{Address: "framework.jax", Operations: []plan.Operation{{Kind: plan.OpPackages, Packages: &plan.PackagesOp{Manager: plan.ManagerPip,
		Venv: "/opt/jax", Python: "/usr/bin/python3", Install: []plan.PackagePin{{Name: "nvidia-cudnn-cu12", Version: "9.1.0.70"}}}}}}
	flagged := func(steps ...plan.Step) []string {
		var out []string
		for _, c := range doctor.Judge(doctor.Input{Obs: providers.EndState(obs, steps)}, finding.Plan) {
			if c.Status.Flagged() && (strings.HasPrefix(c.ID, "loader") || strings.HasPrefix(c.ID, "framework.requirements")) {
				out = append(out, c.ID)
			}
		}
		return out
	}
	if got := flagged(group); !slices.ContainsFunc(got, func(id string) bool { return strings.HasPrefix(id, "loader.missing") }) ||
		!slices.Contains(got, "framework.requirements:/opt/jax/bin/python") {
		t.Errorf("a plan that installs nothing: flagged %v, want the missing libcudart and the unmet requirement", got)
	}
	// A system package leaves the loader unknown; the venv's
	// distributions are pip's, which it does not touch.
	if got := flagged(apt); !slices.Equal(got, []string{"framework.requirements:/opt/jax/bin/python"}) {
		t.Errorf("a plan that installs a system package: flagged %v, want the unmet requirement only", got)
	}
	if got := flagged(pip); len(got) != 0 {
		t.Errorf("a plan that installs into the venv: flagged %v, want nothing", got)
	}
	if len(obs.Loader.Consumers) != 1 || len(obs.Python[0].Unmet) != 1 {
		t.Errorf("EndState changed the observation: %+v %+v", obs.Loader, obs.Python)
	}
}

// Debian 12's python3-torch is a CPU-only build (gpuenv's package
// table says so): a plan that installs it on a host with a GPU leaves
// a PyTorch that never uses it, and doctor's framework.cpu-only says so
// of the end state. On a host without a GPU the resolver's warning
// speaks instead (providers' TestDebianExampleWithoutGPU).
func TestEndStatePredictsTheDistributionsCPUOnlyTorch(t *testing.T) {
	obs := &facts.Observation{
		OS:  facts.OS{ID: "debian", VersionID: "12", Family: "deb", Arch: "x86_64"},
		PCI: []facts.PCIDevice{{Address: "0000:01:00.0", VendorID: 0x10de, DeviceID: 0x2330}},
	}
	torch := plan.Step{Address: "framework.pytorch", Action: plan.Create, After: map[string]string{"package": "python3-torch=1.13.1+dfsg-4", "source": "distro"},
		Operations: []plan.Operation{{Kind: plan.OpPackages, Packages: &plan.PackagesOp{Manager: plan.ManagerApt, Install: []plan.PackagePin{{Name: "python3-torch", Version: "1.13.1+dfsg-4"}}}}}}
	var got []string
	for _, c := range doctor.Judge(doctor.Input{Obs: providers.EndState(obs, []plan.Step{torch})}, finding.Plan) {
		if c.Status.Flagged() {
			got = append(got, c.ID+" "+c.Summary)
		}
	}
	want := "framework.cpu-only:/usr/bin/python3:pytorch pytorch 1.13.1 in /usr/bin/python3 is a CPU-only build: it never uses the GPU"
	if !slices.Contains(got, want) {
		t.Errorf("the distribution's torch planned on a GPU host: flagged %q, want %q", got, want)
	}
	if len(obs.Python) != 0 {
		t.Errorf("EndState changed the observation: %+v", obs.Python)
	}
}

// The rules observe reports are judged on the end state too: a
// driver/library mismatch that the plan leaves (it does not reload the
// module) is warned of as doctor would report it after apply, in its
// words; a plan that reloads the module to the library's version leaves
// none. What the reload resets (NVML's refusal to start) is judged after
// apply.
func TestEndStateJudgesObservesRules(t *testing.T) {
	obs := &facts.Observation{
		OS:   facts.OS{ID: "ubuntu", VersionID: "22.04", Family: "deb", Arch: "x86_64"},
		PCI:  []facts.PCIDevice{{Address: "0000:18:00.0", VendorID: 0x10de, DeviceID: 0x2330, Driver: "nvidia"}},
		NVML: facts.NVML{Status: "driver_library_mismatch", Error: "Driver/library version mismatch"},
		Driver: facts.Driver{ModuleVersion: "535.161.07", ModuleVersionFrom: "/proc/driver/nvidia/version", LibraryVersion: "535.183.01",
			Libraries: []facts.Library{{Path: "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.535.183.01", Version: "535.183.01"}}},
	}
	group := plan.Step{Address: "group.video", Action: plan.Update, Operations: []plan.Operation{{Kind: plan.OpGroup, Group: &plan.GroupOp{Group: "video", Add: []string{"alice"}}}}}
	reload := plan.Step{Address: "driver", After: map[string]string{"kernel_modules": "proprietary"}, Flags: plan.Flags{NeedsReboot: true, NeedsModuleReload: true}, Operations: []plan.Operation{
		{Kind: plan.OpPackages, Packages: &plan.PackagesOp{Manager: plan.ManagerApt, Install: []plan.PackagePin{{Name: "nvidia-driver-535", Version: "535.183.01-0ubuntu0.22.04.1"}}}},
	}}
	ids := func(steps ...plan.Step) []string {
		var out []string
		for _, f := range planner.EndStateFindings(providers.EndState(obs, steps), nil) {
			out = append(out, f.ID)
		}
		return out
	}
	// NVML refuses to start: doctor reports the mismatch as nvml.init.
	if got := ids(group); !slices.Contains(got, "nvml.init") {
		t.Errorf("a plan that leaves the mismatch: %v, want nvml.init", got)
	}
	if got := ids(group, reload); slices.Contains(got, "driver.versions") || slices.Contains(got, "nvml.init") {
		t.Errorf("a plan that reloads the module: %v, want no mismatch", got)
	}
	var want string
	for _, c := range doctor.Run(doctor.Input{Obs: obs}).Checks {
		if c.ID == "nvml.init" {
			want = c.Summary
		}
	}
	for _, f := range planner.EndStateFindings(providers.EndState(obs, []plan.Step{group}), nil) {
		if f.ID == "nvml.init" && f.Summary != want {
			t.Errorf("plan says %q, doctor %q", f.Summary, want)
		}
	}
	// Without NVML's word, the files' mismatch is driver.versions.
	files := *obs
	files.NVML = facts.NVML{}
	if got := planner.EndStateFindings(providers.EndState(&files, []plan.Step{group}), nil); !slices.ContainsFunc(got, func(f finding.Finding) bool { return f.ID == "driver.versions" }) {
		t.Errorf("the files' mismatch left by a plan: %+v, want driver.versions", got)
	}
}

// Containers as the steps leave them: a driver upgrade that leaves the
// CDI spec naming the old driver's files makes every container asking for
// a GPU through CDI fail, and doctor's containers.cdi rule says so at
// plan; the spec apply writes from the new driver's files clears it. An
// engine configuration a step writes is read as Observe reads it.
func TestEndStateJudgesContainers(t *testing.T) {
	obs := &facts.Observation{
		Driver: facts.Driver{ModuleVersion: "550.54.15", LibraryVersion: "550.54.15"},
		PCI:    []facts.PCIDevice{{Address: "0000:18:00.0", VendorID: 0x10de, DeviceID: 0x2330, Driver: "nvidia"}},
		Packages: facts.Packages{Manager: facts.DatabaseDpkg, Packages: []facts.Package{
			{Name: "nvidia-container-toolkit", Version: "1.17.8-1", State: facts.StateInstalled},
		}},
		Containers: facts.Containers{
			Toolkit:       facts.ContainerToolkit{Version: "1.17.8", HookPath: "/usr/bin/nvidia-cdi-hook"},
			DriverVersion: "550.54.15",
			Engines: []facts.EngineConfig{
				{Engine: "docker", Path: "/etc/docker/daemon.json", Exists: true, Content: "{}\n"},
				{Engine: "containerd", Path: "/etc/containerd/config.toml"},
				{Engine: "crio", Path: "/etc/crio/crio.conf.d/99-nvidia.conf"},
			},
			CDISpecs: []facts.CDISpec{{Path: "/etc/cdi/nvidia.yaml", Kind: "nvidia.com/gpu", DriverVersion: "550.54.15", Devices: []string{"0", "all"}}},
			CDIInUse: "/etc/cdi/nvidia.yaml",
		},
	}
	upgrade := plan.Step{Address: "driver", After: map[string]string{"kernel_modules": "open"}, Flags: plan.Flags{NeedsReboot: true}, Operations: []plan.Operation{
		{Kind: plan.OpPackages, Packages: &plan.PackagesOp{Manager: plan.ManagerApt, Install: []plan.PackagePin{{Name: "nvidia-driver-570-open", Version: "570.172.08-0ubuntu1"}}}},
	}}
	regenerate := plan.Step{Address: "container_toolkit.cdi", Operations: []plan.Operation{{Kind: plan.OpFile, File: &plan.FileOp{Path: "/etc/cdi/nvidia.yaml", Generate: plan.GenerateCDI}}}}
	runtime := plan.Step{Address: "container_toolkit.engine.docker", Operations: []plan.Operation{{Kind: plan.OpFile, File: &plan.FileOp{Path: "/etc/docker/daemon.json", Mode: 0o644,
		Content: "{\n  \"runtimes\": {\n    \"nvidia\": {\n      \"args\": [],\n      \"path\": \"nvidia-container-runtime\"\n    }\n  }\n}\n"}}}}
	judge := func(steps ...plan.Step) map[string]finding.Status { return endVerdicts(obs, nil, true, steps...) }
	if got := judge(); got["containers.engine:docker"] != finding.Warning || got["containers.cdi"] != "" {
		t.Errorf("as observed: %v, want docker without the NVIDIA runtime only", got)
	}
	if got := judge(upgrade); got["containers.cdi"] != finding.Problem {
		t.Errorf("a driver upgrade that leaves the CDI spec: %v, want containers.cdi", got)
	}
	if got := judge(upgrade, regenerate, runtime); len(got) != 0 {
		t.Errorf("the upgrade with the CDI spec made again and docker's runtime: %v, want nothing", got)
	}
}

// cuDNN as the steps leave it: the build for CUDA 11 left on a host whose
// toolkit the plan moves to CUDA 12 fails to load with it, and doctor's
// cudnn rule says so at plan; the plan that also installs the CUDA 12
// build in its place does not.
func TestEndStateJudgesCuDNN(t *testing.T) {
	obs := &facts.Observation{
		NVML:   facts.NVML{Status: "ok", DriverVersion: "550.54.15"},
		Driver: facts.Driver{ModuleVersion: "550.54.15", LibraryVersion: "550.54.15"},
		Packages: facts.Packages{Manager: facts.DatabaseDpkg, Packages: []facts.Package{
			{Name: "cuda-toolkit-11-8", Version: "11.8.0-1", State: facts.StateInstalled},
			{Name: "libcudnn9-cuda-11", Version: "9.1.0.70-1", State: facts.StateInstalled},
		}},
		CUDA:  facts.CUDA{Toolkits: []facts.Toolkit{{Path: "/usr/local/cuda-11.8", Version: "11.8.0", VersionFrom: "version.json", Layout: "nvidia", Package: "cuda-toolkit-11-8"}}},
		CuDNN: facts.CuDNN{Installs: []facts.CuDNNInstall{{Version: "9.1.0", Header: "/usr/include/x86_64-linux-gnu/cudnn_version_v9.h", CUDAMajor: "11", Package: "libcudnn9-cuda-11", PackageVersion: "9.1.0.70-1"}}},
	}
	apt := func(install []plan.PackagePin, remove ...string) []plan.Operation {
		return []plan.Operation{{Kind: plan.OpPackages, Packages: &plan.PackagesOp{Manager: plan.ManagerApt, Install: install, Remove: remove}}}
	}
	cuda := plan.Step{Address: "cuda", Action: plan.Update, After: map[string]string{"path": "/usr/local/cuda-12.4", "version": "12.4.1", "source": "nvidia"},
		Operations: apt([]plan.PackagePin{{Name: "cuda-toolkit-12-4", Version: "12.4.1-1"}}, "cuda-toolkit-11-8")}
	cudnn := plan.Step{Address: "cudnn", Action: plan.Update,
		Operations: apt([]plan.PackagePin{{Name: "libcudnn9-cuda-12", Version: "9.8.0.87-1"}}, "libcudnn9-cuda-11")}
	judge := func(steps ...plan.Step) map[string]finding.Status {
		out := map[string]finding.Status{}
		for _, c := range doctor.Judge(doctor.Input{Obs: providers.EndState(obs, steps)}, finding.Plan) {
			if strings.HasPrefix(c.ID, "cudnn") {
				out[c.ID] = c.Status
			}
		}
		return out
	}
	if got := judge(); got["cudnn:9.1.0"] != finding.OK {
		t.Errorf("as observed: %v, want cuDNN 9.1.0 for CUDA 11 fine with CUDA 11.8", got)
	}
	if got := judge(cuda); got["cudnn:9.1.0"] != finding.Problem {
		t.Errorf("the toolkit moved to CUDA 12 alone: %v, want cudnn:9.1.0 flagged", got)
	}
	if got := judge(cuda, cudnn); got["cudnn:9.8.0"] != finding.OK || got["cudnn:9.1.0"] != "" {
		t.Errorf("the toolkit and cuDNN moved together: %v, want cuDNN 9.8.0 for CUDA 12 only", got)
	}
}

// PyTorch as the steps leave it: a wheel pinned with its variant is
// known (cu118 is built for CUDA 11.8), and doctor's framework.driver
// rule judges it against the driver the plan leaves; a wheel the plan
// installs without a variant is known only after apply, and the build it
// replaces is no longer judged.
func TestEndStateJudgesFrameworks(t *testing.T) {
	venv := facts.PythonEnv{Interpreter: "/opt/torch/bin/python", Prefix: "/opt/torch", Virtual: true, SitePackages: []string{"/opt/torch/lib/python3.10/site-packages"},
		Frameworks: []facts.Framework{{Name: "pytorch", Version: "2.5.1+cu124", Variant: "cu124", CUDA: "12.4", Package: "torch", Installer: "pip", Location: "/opt/torch/lib/python3.10/site-packages/torch"}}}
	obs := &facts.Observation{
		PCI:    []facts.PCIDevice{{Address: "0000:01:00.0", VendorID: 0x10de}},
		NVML:   facts.NVML{Status: "ok", DriverVersion: "550.54.15"},
		Driver: facts.Driver{ModuleVersion: "550.54.15", LibraryVersion: "550.54.15"},
		Python: []facts.PythonEnv{venv},
	}
	downgrade := plan.Step{Address: "driver", After: map[string]string{"kernel_modules": "proprietary"}, Operations: []plan.Operation{
		{Kind: plan.OpPackages, Packages: &plan.PackagesOp{Manager: plan.ManagerApt, Install: []plan.PackagePin{{Name: "nvidia-driver-470", Version: "470.256.02-0ubuntu0.22.04.1"}}}},
	}}
	torch := func(v string) plan.Step {
		return plan.Step{Address: "framework.pytorch", Operations: []plan.Operation{{Kind: plan.OpPackages, Packages: &plan.PackagesOp{
			Manager: plan.ManagerPip, Venv: "/opt/torch", Python: "/usr/bin/python3", Install: []plan.PackagePin{{Name: "torch", Version: v}}}}}}
	}
	judge := func(steps ...plan.Step) map[string]finding.Status {
		out := map[string]finding.Status{}
		for _, c := range doctor.Judge(doctor.Input{Obs: providers.EndState(obs, steps)}, finding.Plan) {
			if strings.HasPrefix(c.ID, "framework") && c.Status.Flagged() {
				out[c.ID] = c.Status
			}
		}
		return out
	}
	const id = "framework.driver:/opt/torch/bin/python:pytorch"
	if got := judge(); len(got) != 0 {
		t.Errorf("as observed: %v, want nothing flagged (CUDA 12.4 on 550)", got)
	}
	if got := judge(downgrade); got[id] != finding.Problem {
		t.Errorf("torch for CUDA 12.4 on driver 470: %v, want %s", got, id)
	}
	if got := judge(downgrade, torch("2.5.1+cu118")); got[id] != finding.Warning {
		t.Errorf("torch for CUDA 11.8 on driver 470: %v, want %s warned of (minor-version compatibility)", got, id)
	}
	if got := judge(downgrade, torch("2.5.1")); len(got) != 0 {
		t.Errorf("a torch whose build is known after apply: %v, want nothing judged", got)
	}
	end := providers.EndState(obs, []plan.Step{torch("2.5.1+cu118")})
	if fw := end.Python[0].Frameworks; len(fw) != 1 || fw[0].CUDA != "11.8" || fw[0].Location != "/opt/torch/lib/python3.10/site-packages/torch" {
		t.Errorf("predicted frameworks %+v", fw)
	}
	if obs.Python[0].Frameworks[0].CUDA != "12.4" {
		t.Error("EndState changed the observation's frameworks")
	}
}

// The GPUs' settings as the steps leave them: a MIG step on a GPU whose
// persistence mode is off leaves doctor's gpu.mig-persistence warning;
// nvidia-persistenced enabled by the plan, or a device step that turns
// persistence on, clears it.
func TestEndStateJudgesMIGPersistence(t *testing.T) {
	obs := &facts.Observation{NVML: facts.NVML{Status: "ok", DriverVersion: "550.54.15", Devices: []facts.GPUDevice{
		{Index: 0, UUID: "GPU-0", PersistenceMode: "disabled", MIGMode: "disabled"},
	}}}
	migOn := plan.Step{Address: `mig["0"]`, Operations: []plan.Operation{{Kind: plan.OpDevice, Device: &plan.DeviceOp{UUID: "GPU-0", Setting: plan.SettingMIGMode, Value: "enabled"}}}}
	persistenced := plan.Step{Address: "driver.persistence", Operations: []plan.Operation{{Kind: plan.OpService, Service: &plan.ServiceOp{Unit: "nvidia-persistenced.service", Enable: true, Now: true}}}}
	setting := plan.Step{Address: `device["0"]`, Operations: []plan.Operation{{Kind: plan.OpDevice, Device: &plan.DeviceOp{UUID: "GPU-0", Setting: plan.SettingPersistenceMode, Value: plan.PersistenceEnabled}}}}
	judge := func(steps ...plan.Step) finding.Status {
		for _, c := range doctor.Judge(doctor.Input{Obs: providers.EndState(obs, steps)}, finding.Plan) {
			if c.ID == "gpu.mig-persistence" {
				return c.Status
			}
		}
		return ""
	}
	if got := judge(); got != "" {
		t.Errorf("no GPU in MIG mode: %q", got)
	}
	if got := judge(migOn); got != finding.Warning {
		t.Errorf("MIG without persistence: %q, want a warning", got)
	}
	if got := judge(migOn, persistenced); got != finding.OK {
		t.Errorf("MIG with nvidia-persistenced enabled: %q", got)
	}
	if got := judge(migOn, setting); got != finding.OK {
		t.Errorf("MIG with persistence set on the GPU: %q", got)
	}
	if obs.NVML.Devices[0].MIGMode != "disabled" {
		t.Error("EndState changed the observation's GPUs")
	}
}

// Device access as the steps leave it: under the systemd cgroup driver a
// node without its /dev/char link loses containers their GPU at the next
// daemon-reload (doctor's containers.dev-char); the links a plan makes
// clear it, and a Docker configuration the plan switches to the systemd
// driver raises it.
func TestEndStateJudgesCharLinks(t *testing.T) {
	gpu := facts.DeviceNode{Path: "/dev/nvidia0", Char: true, Major: 195, Minor: 0, Mode: "0666"}
	obs := &facts.Observation{
		DeviceNodes: []facts.DeviceNode{gpu},
		Containers: facts.Containers{Toolkit: facts.ContainerToolkit{Version: "1.17.8"}, Engines: []facts.EngineConfig{
			{Engine: "docker", Path: "/etc/docker/daemon.json", Exists: true, Content: "{}\n", NVIDIARuntime: true},
		}},
		DeviceAccess: facts.DeviceAccess{CgroupVersion: "v1", CharLinks: []string{}, MissingCharLinks: []string{"/dev/nvidia0"},
			CgroupDrivers: []facts.CgroupDriver{{Engine: "docker", File: "/etc/docker/daemon.json", Driver: "cgroupfs", Default: true}, {Engine: "kubelet", File: "/var/lib/kubelet/config.yaml", Driver: "systemd"}}},
	}
	link := plan.Step{Address: "container_toolkit.dev_char", Operations: []plan.Operation{{Kind: plan.OpFile, File: &plan.FileOp{Path: "/dev/char/195:0", Symlink: "/dev/nvidia0"}}}}
	systemd := plan.Step{Address: "container_toolkit.engine.docker", Operations: []plan.Operation{{Kind: plan.OpFile, File: &plan.FileOp{Path: "/etc/docker/daemon.json",
		Content: "{\n  \"exec-opts\": [\"native.cgroupdriver=systemd\"]\n}\n"}}}}
	judge := func(steps ...plan.Step) finding.Status {
		for _, c := range doctor.Judge(doctor.Input{Obs: providers.EndState(obs, steps)}, finding.Plan) {
			if c.ID == "containers.dev-char" {
				return c.Status
			}
		}
		return ""
	}
	// The kubelet alone uses the systemd driver.
	if got := judge(); got != finding.Warning {
		t.Errorf("as observed: %q, want the kubelet's systemd driver warned of", got)
	}
	if got := judge(link); got != finding.OK {
		t.Errorf("with the link the plan makes: %q", got)
	}
	end := providers.EndState(obs, []plan.Step{systemd})
	if d := end.DeviceAccess.CgroupDrivers; len(d) != 2 || d[0].Engine != "docker" || d[0].Driver != "systemd" || d[1].Engine != "kubelet" {
		t.Errorf("predicted cgroup drivers %+v, want docker's systemd, then the kubelet's", d)
	}
	if obs.DeviceAccess.CgroupDrivers[0].Driver != "cgroupfs" || len(obs.DeviceAccess.MissingCharLinks) != 1 {
		t.Error("EndState changed the observation's device access")
	}
}
