package doctor_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner/doctor"
	"github.com/gpuenv/gpuenv/providers"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

// healthyKernLog is a working host's kern.log: an earlier boot with an
// Xid and a refusal, then this boot loading the fixture's module.
const healthyKernLog = `Nov 30 09:00:00 dgx kernel: [    0.000000] Linux version 5.15.0-105-generic (buildd@lcy02-amd64-007) #115-Ubuntu SMP
Nov 30 09:00:05 dgx kernel: [    5.100000] NVRM: The NVIDIA GPU 0000:17:00.0 (PCI ID: 10de:2330)
Nov 30 09:00:05 dgx kernel: [    5.100000] NVRM: installed in this system requires use of the NVIDIA open kernel modules.
Nov 30 10:00:00 dgx kernel: [ 3600.000000] NVRM: Xid (PCI:0000:17:00): 79, pid=1234, GPU has fallen off the bus.
Dec  1 08:00:00 dgx kernel: [    0.000000] Linux version 5.15.0-105-generic (buildd@lcy02-amd64-007) #115-Ubuntu SMP
Dec  1 08:00:04 dgx kernel: [    4.200000] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build  (dvs-builder@U16-I3-B03-4-3)  Tue Feb 13 01:10:03 UTC 2024
Dec  1 08:00:05 dgx kernel: [    5.000000] audit: type=1400 audit(1701417605.000:2): apparmor="STATUS" operation="profile_load"
`

// A working host whose log holds an earlier boot's refusal stays healthy:
// only the boot the log last records counts, and the checks that read
// it say they read it.
func TestHealthyWithKernelLog(t *testing.T) {
	r := machine{fixture: "ubuntu2204-working", nvml: dgx(nil), user: ml, pythons: []string{"/opt/venv/bin/python"},
		change: writeFile("var/log/kern.log", healthyKernLog)}.report(t)
	if !r.Healthy {
		for _, c := range r.Checks {
			if c.Status == doctor.Problem {
				t.Errorf("%s: %s", c.ID, c.Summary)
			}
		}
	}
	for _, id := range []string{"kernel.nvrm", "driver.flavor", "driver.branch"} {
		if c := checkOf(t, r, id); c.Status != doctor.OK {
			t.Errorf("%s: %s %s", id, c.Status, c.Summary)
		}
	}
	if ev := strings.Join(checkOf(t, r, "kernel.nvrm").Evidence, "\n"); !strings.Contains(ev, "/var/log/kern.log") || !strings.Contains(ev, "start of the boot") {
		t.Errorf("kernel.nvrm does not say what it read:\n%s", ev)
	}
	if r.KernelLog == nil || r.KernelLog.Module == nil || r.KernelLog.Module.Version != "550.54.15" {
		t.Errorf("the report's kernel_log: %+v", r.KernelLog)
	}
}

// Without any log the flavour and the branch are still judged, from the
// loaded module and the installed packages against the GPU table, on a
// host of one GPU.
func TestFlavorAndBranchFromFacts(t *testing.T) {
	gpu := func(id string) func(*testing.T, string) {
		return writeFile("sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/uevent", "DRIVER=nvidia\nPCI_CLASS=30200\nPCI_ID=10DE:"+id+"\nPCI_SLOT_NAME=0000:01:00.0\n")
	}
	module := func(flavor, v string) func(*testing.T, string) {
		kind := "x86_64 Kernel Module"
		if flavor == "open" {
			kind = "Open Kernel Module for x86_64"
		}
		return writeFile("proc/driver/nvidia/version", "NVRM version: NVIDIA UNIX "+kind+"  "+v+"  Release Build  (dvs-builder@U16-I3-B03-4-3)  Tue Feb 13 01:10:03 UTC 2024\n")
	}
	both := func(fs ...func(*testing.T, string)) func(*testing.T, string) {
		return func(t *testing.T, root string) {
			for _, f := range fs {
				f(t, root)
			}
		}
	}
	for _, tc := range []struct {
		name   string
		change func(*testing.T, string)
		id     string
		status doctor.Status
		want   string // in the fix
	}{
		{"blackwell under proprietary", both(gpu("2B85"), module("proprietary", "570.86.16")), "driver.flavor", doctor.Problem, `kernel_modules = "open"`},
		{"pascal under open", both(gpu("1D01"), module("open", "570.86.16")), "driver.flavor", doctor.Problem, `kernel_modules = "proprietary"`},
		{"hopper under open", both(gpu("2330"), module("open", "570.86.16")), "driver.flavor", doctor.OK, ""},
		{"kepler under 535", both(gpu("1024"), module("proprietary", "535.183.01")), "driver.branch", doctor.Problem, `version = "470.*"`},
		{"pascal under 590", both(gpu("1D01"), module("proprietary", "590.48.01")), "driver.branch", doctor.Problem, `version = "580.*"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := checkOf(t, machine{fixture: "tensorflow-no-cudnn", change: tc.change}.report(t), tc.id)
			if c.Status != tc.status {
				t.Fatalf("%s %s\n%s", c.Status, c.Summary, strings.Join(c.Evidence, "\n"))
			}
			if tc.want != "" && (c.Fix == nil || !strings.Contains(c.Fix.Spec, tc.want)) {
				t.Errorf("fix %+v lacks %q", c.Fix, tc.want)
			}
		})
	}
}

// A distribution's transitional package installs a newer branch than its
// name says: the branch judged is the version's, and the evidence says
// so.
func TestTransitionalPackage(t *testing.T) {
	status := "Package: nvidia-utils-565-server\nStatus: install ok installed\nArchitecture: amd64\nVersion: 580.95.05-0ubuntu0.22.04.2\nDepends: nvidia-utils-580-server\n\n"
	change := func(t *testing.T, root string) {
		writeFile("sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/uevent", "PCI_CLASS=30200\nPCI_ID=10DE:1024\nPCI_SLOT_NAME=0000:01:00.0\n")(t, root)
		writeFile("var/lib/dpkg/status", status)(t, root)
		for _, p := range []string{"proc/driver/nvidia", "sys/module/nvidia", "proc/modules"} {
			if err := os.RemoveAll(filepath.Join(root, p)); err != nil {
				t.Fatal(err)
			}
		}
	}
	c := checkOf(t, machine{fixture: "tensorflow-no-cudnn", change: change}.report(t), "driver.branch")
	ev := strings.Join(c.Evidence, "\n")
	if c.Status != doctor.Problem || !strings.Contains(c.Summary, "Driver 580.95.05 does not support 0000:01:00.0") ||
		!strings.Contains(ev, "its name says 565, it installs 580 (a transitional package)") || !strings.Contains(c.Fix.Spec, `version = "470.*"`) {
		t.Errorf("%s %s\n%s", c.Status, c.Summary, ev)
	}
}

// Modules switched off by other tools: what keeps nvidia from loading at
// all is a problem while it is not loaded; a plain blacklist of a loaded
// module is a warning; the framebuffer driver nvidiafb and Debian's
// install lines that load nvidia-current are no block at all.
func TestKernelBlocked(t *testing.T) {
	unload := func(t *testing.T, root string) {
		for _, p := range []string{"proc/driver/nvidia", "sys/module/nvidia"} {
			if err := os.RemoveAll(filepath.Join(root, p)); err != nil {
				t.Fatal(err)
			}
		}
		writeFile("proc/modules", "ast 57344 0 - Live 0x0000000000000000\n")(t, root)
	}
	for _, tc := range []struct {
		name, fixture string
		change        func(*testing.T, string)
		status        doctor.Status
		want          string // in the fix, or the evidence when OK
	}{
		{"alias off, not loaded", "ubuntu2204-working", func(t *testing.T, root string) {
			unload(t, root)
			writeFile("usr/lib/modprobe.d/blacklist-nvidia.conf", "blacklist nvidia\nalias nvidia off\n")(t, root)
		}, doctor.Problem, "prime-select nvidia"},
		{"install /bin/false, loaded", "ubuntu2204-working", writeFile("etc/modprobe.d/no-gpu.conf", "install nvidia /bin/false\n"), doctor.Warning, "update-initramfs -u"},
		{"kernel parameter, not loaded", "ubuntu2204-working", func(t *testing.T, root string) {
			unload(t, root)
			writeFile("proc/cmdline", "BOOT_IMAGE=/vmlinuz ro module_blacklist=nvidia,nvidia_uvm quiet\n")(t, root)
		}, doctor.Problem, "GRUB_CMDLINE_LINUX"},
		{"display modules only", "ubuntu2204-working", writeFile("etc/modprobe.d/headless.conf", "blacklist nvidia-drm\nblacklist nvidia_modeset\n"), doctor.OK, "blacklist nvidia_drm"},
		{"debian's install lines", "debian12-distro", nil, doctor.OK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := checkOf(t, machine{fixture: tc.fixture, change: tc.change}.report(t), "kernel.blocked")
			if c.Status != tc.status {
				t.Fatalf("%s %s\n%s", c.Status, c.Summary, strings.Join(c.Evidence, "\n"))
			}
			got := strings.Join(c.Evidence, "\n")
			if c.Fix != nil {
				got = c.Fix.Text + "\n" + strings.Join(c.Fix.Commands, "\n")
			}
			if !strings.Contains(got, tc.want) {
				t.Errorf("%q lacks %q", got, tc.want)
			}
		})
	}
}

// The GSP firmware that did not start under the open modules points to
// the proprietary ones, which can run without it, for a GPU they drive;
// the log lines are those of
// https://github.com/NVIDIA/open-gpu-kernel-modules/issues/116.
func TestGSPFirmwareUnderOpenModules(t *testing.T) {
	log := `[    3.596579] NVRM kgspInitRm_IMPL: missing NVDEC0 engine, cannot initialize GSP-RM
[    3.596583] NVRM RmInitAdapter: Cannot initialize GSP firmware RM
[    3.596745] NVRM: GPU 0000:01:00.0: RmInitAdapter failed! (0x63:0x56:1689)
[    3.597360] NVRM: GPU 0000:01:00.0: rm_init_adapter failed, device minor number 0
`
	change := func(t *testing.T, root string) {
		writeFile("sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/uevent", "DRIVER=nvidia\nPCI_CLASS=30000\nPCI_ID=10DE:1F08\nPCI_SLOT_NAME=0000:01:00.0\n")(t, root)
		writeFile("proc/driver/nvidia/version", "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  515.43.04  Release Build  (dvs-builder@U16-T02-35-3)  Mon Apr 25 23:39:05 UTC 2022\n")(t, root)
		writeFile("var/log/kern.log", log)(t, root)
	}
	c := checkOf(t, machine{fixture: "tensorflow-no-cudnn", change: change}.report(t), "kernel.nvrm")
	if c.Status != doctor.Problem || !strings.Contains(c.Summary, "0000:01:00.0 (0x63:0x56:1689)") || c.Fix == nil || !strings.Contains(c.Fix.Spec, `kernel_modules = "proprietary"`) {
		t.Errorf("%s %s\n%+v", c.Status, c.Summary, c.Fix)
	}
}

// BenchmarkChecks is doctor's checks alone on the working fixture's
// observation, the kernel log read from a kern.log of this boot: what
// doctor adds to an observation.
func BenchmarkChecks(b *testing.B) {
	root := hosttest.Build(b, "ubuntu2204-working")
	if err := os.MkdirAll(filepath.Join(root, "var/log"), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "var/log/kern.log"), []byte(healthyKernLog), 0o644); err != nil {
		b.Fatal(err)
	}
	obs := providers.Observe(context.Background(), hosttest.New(b, root), providers.ObserveOptions{})
	b.ReportAllocs()
	for b.Loop() {
		doctor.Run(doctor.Input{Obs: obs})
	}
}
