package driver_test

import (
	"context"
	"encoding/pem"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/planner/doctor"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/finding"
	"github.com/gpuenv/gpuenv/providers"
	"github.com/gpuenv/gpuenv/providers/driver"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
	"github.com/gpuenv/gpuenv/providers/observer/system"
)

// observe runs system and driver observation over root, as the
// aggregator does.
func observe(t *testing.T, root string, n host.NVML) *facts.Observation {
	t.Helper()
	h := hosttest.New(t, root)
	obs := &facts.Observation{}
	system.Observe(context.Background(), h, obs)
	driver.Observe(context.Background(), h, n, obs)
	// The problems are judged on the finished observation, as
	// providers.Observe does.
	obs.Problems = doctor.ObserveFindings(obs)
	return obs
}

// problems are the observation's problems as "layer: message".
func problems(obs *facts.Observation) []string {
	var out []string
	for _, p := range obs.Problems {
		out = append(out, p.Layer+": "+p.Message())
	}
	return out
}

func checkProblems(t *testing.T, obs *facts.Observation, want ...string) {
	t.Helper()
	if diff := cmp.Diff(want, problems(obs)); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

func TestFreshH100(t *testing.T) {
	obs := observe(t, hosttest.Build(t, "ubuntu2204-h100-fresh"), nil)
	want := []facts.PCIDevice{{
		Address: "0000:17:00.0", VendorID: 0x10de, DeviceID: 0x2330, SubsystemVendor: 0x10de, SubsystemDevice: 0x16c1,
		PCIID: "10de:2330", SubsystemID: "10de:16c1",
		Class: 0x030200, Model: "H100 SXM5 80GB HBM3", Architecture: "Hopper", ComputeCapability: "9.0",
	}}
	// The ASPEED VGA of the BMC is a display controller too, but not
	// NVIDIA's.
	if diff := cmp.Diff(want, obs.PCI); diff != "" {
		t.Errorf("PCI (-want +got):\n%s", diff)
	}
	if obs.Driver.ModuleVersion != "" || len(obs.Driver.Libraries) != 0 || len(obs.DeviceNodes) != 0 || len(obs.Kernel.Loaded) != 0 {
		t.Errorf("a fresh machine shows a driver: %+v, nodes %v, loaded %v", obs.Driver, obs.DeviceNodes, obs.Kernel.Loaded)
	}
	if obs.NVML.Status != "not_attempted" {
		t.Errorf("NVML status %q on a fixture root", obs.NVML.Status)
	}
	// Doctor's verdicts: no driver, and nothing yet keeps nouveau away
	// (a warning).
	checkProblems(t, obs,
		"pci: No kernel driver is bound to 0000:17:00.0 — The nvidia module must be installed and loaded: the kernel-module checks say what stops it.",
		"kernel: The nvidia kernel module is not loaded",
		"kernel: nouveau is not loaded, but nothing blacklists it: it can take the GPU at the next boot")
	if st := obs.Problems[2].Status; st != finding.Warning {
		t.Errorf("an unblacklisted nouveau that is not loaded is a %s, want doctor's warning", st)
	}
	if len(obs.Kernel.Installed) != 1 || !obs.Kernel.Installed[0].Headers || !obs.Kernel.Installed[0].Running {
		t.Errorf("installed kernels %+v", obs.Kernel.Installed)
	}
	if len(obs.Warnings) != 0 {
		t.Errorf("warnings %v", obs.Warnings)
	}
}

func TestWorkingDGX(t *testing.T) {
	obs := observe(t, hosttest.Build(t, "ubuntu2204-working"), nil)
	if len(obs.PCI) != 8 {
		t.Fatalf("%d GPUs, want 8 (the NVSwitches are not GPUs)", len(obs.PCI))
	}
	for i, d := range obs.PCI {
		if d.Address != hosttest.DGXBusIDs[i] || d.Driver != "nvidia" {
			t.Errorf("GPU %d: %s bound to %q", i, d.Address, d.Driver)
		}
	}
	wantDriver := facts.Driver{
		ModuleVersion: "550.54.15", ModuleVersionFrom: driver.ProcVersion, ModuleFlavor: "open",
		Libraries:      []facts.Library{{Path: "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.15", Version: "550.54.15"}},
		LibraryVersion: "550.54.15",
	}
	if diff := cmp.Diff(wantDriver, obs.Driver); diff != "" {
		t.Errorf("driver (-want +got):\n%s", diff)
	}
	if len(obs.Problems) != 0 || len(obs.Warnings) != 0 {
		t.Errorf("a working machine has problems %v, warnings %v", problems(obs), obs.Warnings)
	}
	running := obs.Kernel.Installed[0]
	wantK := facts.InstalledKernel{
		Release: "5.15.0-105-generic", Running: true, Headers: true,
		NvidiaModules: []facts.ModuleFile{{Path: "/lib/modules/5.15.0-105-generic/updates/dkms/nvidia.ko", Version: "550.54.15", Tree: "dkms"}},
		DKMS:          []facts.DKMSBuild{{Module: "nvidia", Version: "550.54.15", Arch: "x86_64", Built: true}},
	}
	if diff := cmp.Diff(wantK, running); diff != "" {
		t.Errorf("running kernel (-want +got):\n%s", diff)
	}
	if obs.Kernel.Initramfs == nil || obs.Kernel.Initramfs.Path != "/boot/initrd.img-5.15.0-105-generic" {
		t.Errorf("initramfs %+v", obs.Kernel.Initramfs)
	}
	var nodes []string
	for _, n := range obs.DeviceNodes {
		nodes = append(nodes, n.Path)
	}
	for _, want := range []string{"/dev/nvidia0", "/dev/nvidia7", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-caps/nvidia-cap1"} {
		if !contains(nodes, want) {
			t.Errorf("device node %s missing from %v", want, nodes)
		}
	}
	if os.Geteuid() == 0 {
		// Device nodes are real only when the fixture was built as root.
		for _, n := range obs.DeviceNodes {
			if n.Path == "/dev/nvidia-uvm" && (!n.Char || n.Major != 508 || n.Minor != 0 || n.Mode != "0666") {
				t.Errorf("nvidia-uvm node %+v", n)
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

func TestMismatchAfterUpgrade(t *testing.T) {
	obs := observe(t, hosttest.Build(t, "ubuntu2204-mismatch"), nil)
	// Doctor's words for the rule (driver.versions), and its fix.
	checkProblems(t, obs, "driver: Driver/library version mismatch: module 550.54.15, libraries 550.127.05 (an upgrade without a reboot)")
	if f := obs.Problems[0]; f.ID != "driver.versions" || f.Fix == nil || f.Fix.Spec != "driver {\n  hold = true\n}" {
		t.Errorf("the mismatch is not doctor's driver.versions with its fix: %+v", f)
	}
}

// TestMismatchWithNVML: with NVML saying the same, the problem is stated
// once, as doctor's NVML group says it first (nvml.init), and nothing is called after the failed Init (the mock panics).
func TestMismatchWithNVML(t *testing.T) {
	n := host.NewNVML(hosttest.FailingNVML(nvml.ERROR_LIB_RM_VERSION_MISMATCH))
	obs := observe(t, hosttest.Build(t, "ubuntu2204-mismatch"), n)
	if obs.NVML.Status != "driver_library_mismatch" || !strings.Contains(obs.NVML.Error, "reboot") {
		t.Errorf("NVML %+v", obs.NVML)
	}
	if len(obs.Problems) != 1 || obs.Problems[0].ID != "nvml.init" || obs.Problems[0].Layer != "nvml" {
		t.Errorf("problems %v, want the mismatch once, where NVML is, as doctor's nvml.init says it", problems(obs))
	}
}

func TestDebianDistro(t *testing.T) {
	obs := observe(t, hosttest.Build(t, "debian12-distro"), nil)
	d := obs.Driver
	if d.ModuleVersion != "535.261.03" || d.ModuleFlavor != "proprietary" || d.LibraryVersion != "535.261.03" {
		t.Errorf("driver %+v", d)
	}
	if len(obs.PCI) != 1 || obs.PCI[0].Model != "L4" || obs.PCI[0].Architecture != "Ada Lovelace" && obs.PCI[0].Architecture == "" {
		t.Errorf("PCI %+v", obs.PCI)
	}
	// Debian's modprobe file renames modules with install commands that
	// load them: not a blacklist. Its nouveau blacklist is.
	want := []facts.Blacklist{{Module: "nouveau", Directive: "blacklist", File: "/etc/modprobe.d/nvidia-blacklists-nouveau.conf", Line: 4,
		ModTime: time.Date(2025, 8, 30, 12, 0, 0, 0, time.UTC)}}
	if diff := cmp.Diff(want, obs.Kernel.Blacklists); diff != "" {
		t.Errorf("blacklists (-want +got):\n%s", diff)
	}
	byRel := map[string]facts.InstalledKernel{}
	for _, k := range obs.Kernel.Installed {
		byRel[k.Release] = k
	}
	old, cur := byRel["6.1.0-27-amd64"], byRel["6.1.0-28-amd64"]
	if old.Headers || !cur.Headers {
		t.Errorf("headers: old %v (its build link dangles), running %v", old.Headers, cur.Headers)
	}
	if len(cur.NvidiaModules) != 1 || cur.NvidiaModules[0].Path != "/lib/modules/6.1.0-28-amd64/updates/dkms/nvidia-current.ko" || cur.DKMS[0].Module != "nvidia-current" {
		t.Errorf("running kernel modules %+v", cur)
	}
	if len(obs.Problems) != 0 || len(obs.Warnings) != 0 {
		t.Errorf("problems %v, warnings %v", problems(obs), obs.Warnings)
	}
}

func TestRHEL9(t *testing.T) {
	obs := observe(t, hosttest.Build(t, "rhel9"), nil)
	var cmdline []string
	for _, b := range obs.Kernel.Blacklists {
		if b.File == driver.Cmdline {
			cmdline = append(cmdline, b.Directive+"="+b.Module)
		}
	}
	if diff := cmp.Diff([]string{"rd.driver.blacklist=nouveau", "modprobe.blacklist=nouveau"}, cmdline); diff != "" {
		t.Errorf("command-line blacklists (-want +got):\n%s", diff)
	}
	k := obs.Kernel.Installed[0]
	if !k.Headers || len(k.NvidiaModules) != 1 || k.NvidiaModules[0].Version != "550.90.07" || !strings.HasSuffix(k.NvidiaModules[0].Path, "/extra/nvidia.ko.xz") {
		t.Errorf("kernel %+v", k)
	}
	if obs.Kernel.Initramfs == nil || obs.Kernel.Initramfs.Path != "/boot/initramfs-5.14.0-427.13.1.el9_4.x86_64.img" {
		t.Errorf("initramfs %+v", obs.Kernel.Initramfs)
	}
	if obs.Driver.LibraryVersion != "550.90.07" || obs.Driver.ModuleFlavor != "open" || obs.Kernel.SecureBoot != "unknown" {
		t.Errorf("driver %+v, Secure Boot %q", obs.Driver, obs.Kernel.SecureBoot)
	}
}

func TestNouveau(t *testing.T) {
	obs := observe(t, hosttest.Build(t, "nouveau"), nil)
	if len(obs.PCI) != 1 || obs.PCI[0].Driver != "nouveau" || obs.PCI[0].Address != "0000:01:00.0" {
		t.Errorf("PCI %+v; want only the VGA function, bound to nouveau", obs.PCI)
	}
	checkProblems(t, obs,
		"pci: nouveau drives 0000:01:00.0: the nvidia driver cannot take it",
		"kernel: The nvidia kernel module is not loaded",
		"kernel: nouveau is loaded: the nvidia driver cannot take the GPU while it is")
	var loaded []string
	for _, m := range obs.Kernel.Loaded {
		loaded = append(loaded, m.Name)
	}
	if diff := cmp.Diff([]string{"nouveau"}, loaded); diff != "" {
		t.Errorf("loaded (-want +got):\n%s", diff)
	}
}

func TestWorkstationFunctions(t *testing.T) {
	obs := observe(t, hosttest.Build(t, "tensorflow-no-cudnn"), nil)
	if len(obs.PCI) != 1 || obs.PCI[0].DeviceID != 0x2684 || obs.PCI[0].Class != 0x030000 {
		t.Errorf("PCI %+v; the HDMI audio function is not a GPU", obs.PCI)
	}
	if obs.Driver.ModuleFlavor != "proprietary" || obs.Driver.ModuleVersion != "545.23.08" {
		t.Errorf("driver %+v", obs.Driver)
	}
}

// build lays out a fixture and lets the test change it.
func build(t *testing.T, name string, change func(root string)) string {
	root := hosttest.Build(t, name)
	change(root)
	return root
}

// TestProblemsOfChanges: a fixture changed as machines drift shows the
// problems the drift brings.
func TestProblemsOfChanges(t *testing.T) {
	for _, tc := range []struct {
		name, fixture string
		change        func(t *testing.T, root string)
		want          []string
	}{
		{"a nouveau blacklist newer than the initramfs", "nouveau", func(t *testing.T, root string) {
			hosttest.WriteFile(t, root, "etc/modprobe.d/blacklist-nouveau.conf", "blacklist nouveau\noptions nouveau modeset=0\n")
			later := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
			os.Chtimes(filepath.Join(root, "etc/modprobe.d/blacklist-nouveau.conf"), later, later)
		}, []string{
			"pci: nouveau drives 0000:01:00.0: the nvidia driver cannot take it",
			"kernel: The nvidia kernel module is not loaded",
			"kernel: nouveau is loaded: the nvidia driver cannot take the GPU while it is",
			"kernel: nouveau is loaded although blacklisted: the blacklist is newer than the initramfs it loads from",
		}},
		// A new kernel was installed and booted without headers, so DKMS
		// could not build for it.
		{"a kernel update without its module", "debian12-distro", func(t *testing.T, root string) {
			hosttest.WriteFile(t, root, "proc/sys/kernel/osrelease", "6.1.0-29-amd64\n")
			hosttest.WriteFile(t, root, "proc/modules", "ext4 987136 1 - Live 0x0000000000000000\n")
			os.Remove(filepath.Join(root, "proc/driver/nvidia/version"))
			os.Remove(filepath.Join(root, "sys/module/nvidia/version"))
			os.Remove(filepath.Join(root, "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/driver"))
			hosttest.WriteFile(t, root, "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/uevent", "PCI_CLASS=30200\nPCI_ID=10DE:27B8\nPCI_SUBSYS_ID=10DE:16CA\n")
			os.MkdirAll(filepath.Join(root, "usr/lib/modules/6.1.0-29-amd64/kernel"), 0o755)
		}, []string{
			"pci: No kernel driver is bound to 0000:01:00.0 — The nvidia module must be installed and loaded: the kernel-module checks say what stops it.",
			"kernel: The nvidia kernel module is not loaded",
			"kernel: No nvidia module for the running kernel 6.1.0-29-amd64",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := hosttest.Build(t, tc.fixture)
			tc.change(t, root)
			checkProblems(t, observe(t, root, nil), tc.want...)
		})
	}
}

// TestMalformedFiles: each broken file is a warning naming it, and the rest
// of the observation stands.
func TestMalformedFiles(t *testing.T) {
	root := build(t, "ubuntu2204-working", func(root string) {
		hosttest.WriteFile(t, root, "proc/driver/nvidia/version", "NVRM version: NVIDIA UNIX Open Kernel Mod")
		hosttest.WriteFile(t, root, "proc/modules", "nvidia_uvm 1540096 0 - Live 0x0 (OE)\nnvidia 86384")
		hosttest.WriteFile(t, root, "usr/lib/modprobe.d/nvidia-graphics-drivers.conf", "blacklist nouveau\nblacklist\n")
		hosttest.WriteFile(t, root, "sys/devices/pci0000:16/0000:17:00.0/0000:18:00.0/uevent", "DRIVER=nvidia\nPCI_CLASS=30200\nPCI_ID=zz\n")
		hosttest.WriteFile(t, root, "sys/devices/pci0000:16/0000:17:00.0/0000:18:00.0/class", "garbage\n")
	})
	obs := observe(t, root, nil)
	want := map[string]string{
		driver.ProcVersion: "no driver version",
		driver.ProcModules: "line 2",
		"/usr/lib/modprobe.d/nvidia-graphics-drivers.conf": "line 2: blacklist takes one module",
		"/sys/bus/pci/devices/0000:18:00.0/uevent":         "PCI_ID",
		"/sys/bus/pci/devices/0000:18:00.0/class":          "not a hexadecimal",
	}
	for _, w := range obs.Warnings {
		if frag, ok := want[w.Path]; ok && strings.Contains(w.Message, frag) {
			delete(want, w.Path)
		}
	}
	if len(want) > 0 {
		t.Errorf("missing warnings %v; got %v", want, obs.Warnings)
	}
	// The version still comes from sysfs, and the flavour from the taints.
	if obs.Driver.ModuleVersion != "550.54.15" || obs.Driver.ModuleVersionFrom != driver.SysVersion {
		t.Errorf("driver %+v", obs.Driver)
	}
	if len(obs.PCI) != 7 {
		t.Errorf("%d GPUs, want the 7 whose uevent or class could be read", len(obs.PCI))
	}
	if len(obs.Kernel.Blacklists) == 0 {
		t.Error("the readable blacklist line was dropped")
	}
}

func TestFlavorFromTaints(t *testing.T) {
	root := build(t, "debian12-distro", func(root string) {
		os.Remove(filepath.Join(root, "proc/driver/nvidia/version"))
	})
	d := observe(t, root, nil).Driver
	if d.ModuleVersion != "535.261.03" || d.ModuleFlavor != "proprietary" || d.ModuleVersionFrom != driver.SysVersion {
		t.Errorf("driver %+v; want the version from sysfs and the flavour from the P taint", d)
	}
}

func TestNVMLDGXH100(t *testing.T) {
	n := host.NewNVML(hosttest.NVMLServer("dgxh100"))
	obs := observe(t, hosttest.Build(t, "ubuntu2204-working"), n)
	r := obs.NVML
	if r.Status != "ok" || r.Error != "" || r.DriverVersion != "550.54.15" || r.CUDADriverVersion != "12.4" || r.NVMLVersion != "12.550.54.15" {
		t.Errorf("NVML %+v", r)
	}
	if len(r.Devices) != 8 {
		t.Fatalf("%d devices", len(r.Devices))
	}
	// NVML's bus ids are spelled as sysfs spells the fixture's.
	for i, d := range r.Devices {
		if d.PCIBusID != obs.PCI[i].Address {
			t.Errorf("device %d at %s, PCI GPU %d at %s", i, d.PCIBusID, i, obs.PCI[i].Address)
		}
	}
	want := facts.GPUDevice{Index: 7, Name: "NVIDIA H100 80GB HBM3", UUID: "GPU-00000000-0000-0000-0000-000000000007", PCIBusID: "0000:db:00.0",
		MemoryTotal: 80 << 30, ComputeCapability: "9.0", PersistenceMode: "enabled", ComputeMode: "default", MIGMode: "disabled", MIGModePending: "disabled"}
	if diff := cmp.Diff(want, r.Devices[7]); diff != "" {
		t.Errorf("device 7 (-want +got):\n%s", diff)
	}
	if len(obs.Problems) != 0 || len(obs.Warnings) != 0 {
		t.Errorf("problems %v warnings %v", problems(obs), obs.Warnings)
	}
}

func TestNVMLFailuresAreProblemsWhenAGPUIsThere(t *testing.T) {
	for _, tc := range []struct {
		fixture string
		ret     nvml.Return
		status  string
	}{
		// A loaded module: NVML is asked, and its answer is the status.
		{"ubuntu2204-working", nvml.ERROR_LIBRARY_NOT_FOUND, "library_not_found"},
		{"ubuntu2204-working", nvml.ERROR_DRIVER_NOT_LOADED, "driver_not_loaded"},
		{"ubuntu2204-working", nvml.ERROR_NO_PERMISSION, "no_permission"},
		{"ubuntu2204-working", nvml.ERROR_UNKNOWN, "other"},
		// No module and no library: the files answer, whatever NVML
		// would have said.
		{"ubuntu2204-h100-fresh", nvml.ERROR_UNKNOWN, "library_not_found"},
	} {
		n := host.NewNVML(hosttest.FailingNVML(tc.ret))
		obs := observe(t, hosttest.Build(t, tc.fixture), n)
		if obs.NVML.Status != tc.status || obs.NVML.Error == "" {
			t.Errorf("%s, %v: NVML %+v", tc.fixture, tc.ret, obs.NVML)
		}
		// Doctor's nvml.init words the rule; NVML's own error is its
		// evidence.
		found := false
		for _, p := range obs.Problems {
			found = found || (p.Layer == "nvml" && p.ID == "nvml.init" && slices.Contains(p.Evidence, "NVML: "+obs.NVML.Error))
		}
		if !found {
			t.Errorf("%s, %v: no nvml problem in %v", tc.fixture, tc.ret, problems(obs))
		}
	}
}

// countingNVML counts the calls to Init of the NVML it wraps.
type countingNVML struct {
	host.NVML
	inits int
}

func (c *countingNVML) Init() error {
	c.inits++
	return c.NVML.Init()
}

// NVML, started as root with no module loaded, creates /dev/nvidiactl:
// observing must not start it then, and must tell its status from the
// files exactly as NVML would have (issue: observation changes nothing).
func TestNVMLNotStartedWithoutModule(t *testing.T) {
	for _, tc := range []struct {
		name   string
		root   func(t *testing.T) string
		inits  int
		status string
		from   string
	}{
		{"no module, no library", func(t *testing.T) string { return hosttest.Build(t, "ubuntu2204-h100-fresh") }, 0, "library_not_found", "files"},
		{"no module, the library installed", func(t *testing.T) string {
			root := hosttest.Build(t, "ubuntu2204-h100-fresh")
			hosttest.WriteFile(t, root, "usr/lib/x86_64-linux-gnu/libnvidia-ml.so.535.261.03", "")
			return root
		}, 0, "driver_not_loaded", "files"},
		{"the module loaded", func(t *testing.T) string { return hosttest.Build(t, "ubuntu2204-working") }, 1, "ok", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &countingNVML{NVML: host.NewNVML(hosttest.NVMLServer("dgxh100"))}
			obs := observe(t, tc.root(t), n)
			if n.inits != tc.inits || obs.NVML.Status != tc.status || obs.NVML.From != tc.from {
				t.Errorf("NVML started %d times, %+v; want %d, %s from %q", n.inits, obs.NVML, tc.inits, tc.status, tc.from)
			}
		})
	}
}

// TestNoGPUNoNVMLProblem: a machine without a GPU and without the library
// (this one, say) has nothing wrong with it.
func TestNoGPUNoNVMLProblem(t *testing.T) {
	n := host.NewNVML(hosttest.FailingNVML(nvml.ERROR_LIBRARY_NOT_FOUND))
	obs := observe(t, t.TempDir(), n)
	if obs.NVML.Status != "library_not_found" || len(obs.Problems) != 0 {
		t.Errorf("NVML %+v, problems %v", obs.NVML, problems(obs))
	}
}

func TestNVMLWithProcessesAndMIG(t *testing.T) {
	s := hosttest.NVMLServer("dgxh100")
	d0 := s.Devices[0].(interface {
		SetMigMode(int) (nvml.Return, nvml.Return)
	})
	d0.SetMigMode(nvml.DEVICE_MIG_ENABLE)
	obs := observe(t, hosttest.Build(t, "ubuntu2204-working"), host.NewNVML(s))
	if obs.NVML.Devices[0].MIGMode != "enabled" || obs.NVML.Devices[1].MIGMode != "disabled" {
		t.Errorf("MIG modes %q %q", obs.NVML.Devices[0].MIGMode, obs.NVML.Devices[1].MIGMode)
	}
}

// TestPCIWithoutUevent: a root whose sysfs has only the single-value files
// gives the same GPUs.
func TestPCIWithoutUevent(t *testing.T) {
	for _, fixture := range []string{"ubuntu2204-working", "nouveau", "tensorflow-no-cudnn"} {
		want := observe(t, hosttest.Build(t, fixture), nil).PCI
		root := build(t, fixture, func(root string) {
			matches, _ := filepath.Glob(filepath.Join(root, "sys/devices/*/*/uevent"))
			more, _ := filepath.Glob(filepath.Join(root, "sys/devices/*/*/*/uevent"))
			for _, m := range append(matches, more...) {
				if err := os.Remove(m); err != nil {
					t.Fatal(err)
				}
			}
			if len(matches)+len(more) == 0 {
				t.Fatal("the fixture has no uevent files")
			}
		})
		obs := observe(t, root, nil)
		if diff := cmp.Diff(want, obs.PCI); diff != "" {
			t.Errorf("%s: PCI from attributes (-uevent +attributes):\n%s", fixture, diff)
		}
		if len(obs.Warnings) != 0 {
			t.Errorf("%s: warnings %v", fixture, obs.Warnings)
		}
	}
}

// TestGPUMissingFromNVML: the PCI bus has eight GPUs bound to nvidia, NVML
// lists seven.
func TestGPUMissingFromNVML(t *testing.T) {
	s := hosttest.NVMLServer("dgxh100")
	s.Devices = s.Devices[:7]
	obs := observe(t, hosttest.Build(t, "ubuntu2204-working"), host.NewNVML(s))
	checkProblems(t, obs, "health: GPU 0000:db:00.0 is bound to nvidia but NVML does not list it: it may have fallen off the bus or failed to initialise — Drain the node, check its power, cooling and the GPU's seating and cabling, and reboot")
}

// With Secure Boot on, whether DKMS's signing key is in the MOK list:
// the certificate appears whole in the list's signature data.
func TestSigningKey(t *testing.T) {
	cert := []byte("\x30\x82\x03\x1cDKMS module signing key certificate")
	for _, tc := range []struct {
		name  string
		files map[string][]byte
		want  string
	}{
		{"enrolled", map[string][]byte{"var/lib/dkms/mok.pub": cert, "sys/firmware/efi/mok-variables/MokListRT": append(append([]byte("\xa1\x59\xc0\xa5 header"), cert...), "next"...)}, "enrolled"},
		{"enrolled, PEM key, EFI variable", map[string][]byte{
			"var/lib/dkms/mok.pub": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert}),
			"sys/firmware/efi/efivars/MokListRT-605dab50-e046-4300-abb6-3dd810dd8b23": append([]byte("\x06\x00\x00\x00list"), cert...),
		}, "enrolled"},
		{"not enrolled", map[string][]byte{"var/lib/dkms/mok.pub": cert, "sys/firmware/efi/mok-variables/MokListRT": []byte("another key")}, "not_enrolled"},
		{"no key yet", map[string][]byte{"sys/firmware/efi/mok-variables/MokListRT": []byte("another key")}, ""},
		{"no list", map[string][]byte{"var/lib/dkms/mok.pub": cert}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := hosttest.Fixture(t, "ubuntu2204-working")
			files := map[string][]byte{"sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c": {6, 0, 0, 0, 1}}
			maps.Copy(files, tc.files)
			for p, data := range files {
				if err := os.MkdirAll(filepath.Dir(filepath.Join(h.Root(), p)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(h.Root(), p), data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			obs := providers.Observe(context.Background(), h, providers.ObserveOptions{})
			if obs.Kernel.SecureBoot != "enabled" || obs.Kernel.SigningKey != tc.want {
				t.Errorf("secure boot %q, signing key %q, want %q", obs.Kernel.SecureBoot, obs.Kernel.SigningKey, tc.want)
			}
		})
	}
}
