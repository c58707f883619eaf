package doctor_test

import (
	"strings"
	"testing"
	"time"

	"github.com/gpuenv/gpuenv/planner/doctor"
	"github.com/gpuenv/gpuenv/planner/facts"
)

func libs(versions ...string) []facts.Library {
	var out []facts.Library
	for i, v := range versions {
		dir := "/usr/lib/x86_64-linux-gnu/"
		if i%2 == 1 {
			dir = "/usr/lib/i386-linux-gnu/"
		}
		out = append(out, facts.Library{Path: dir + "libnvidia-ml.so." + v, Version: v})
	}
	return out
}

// TestDriverLibraryMismatch pins the one mismatch rule. The rows marked
// "disagreed" are the cases on which the three copies it replaces (the
// driver provider's problems, the planner's warning and the doctor's
// driver.versions check) gave different answers.
func TestDriverLibraryMismatch(t *testing.T) {
	tests := []struct {
		name    string
		driver  facts.Driver
		nvml    string
		library string // the mismatching library version, "" for none
		nvmlToo bool
	}{
		{name: "no module", driver: facts.Driver{LibraryVersion: "550.54.15", Libraries: libs("550.54.15")}},
		{name: "loader pick agrees", driver: facts.Driver{ModuleVersion: "550.54.15", LibraryVersion: "550.54.15", Libraries: libs("550.54.15")}},
		{name: "loader pick differs", driver: facts.Driver{ModuleVersion: "550.54.15", LibraryVersion: "550.127.05", Libraries: libs("550.127.05")}, library: "550.127.05"},
		{name: "loader pick differs though the module's library is installed too", driver: facts.Driver{ModuleVersion: "550.54.15", LibraryVersion: "550.127.05", Libraries: libs("550.54.15", "550.127.05")}, library: "550.127.05"},
		{name: "no loader pick, one library of the module's version", driver: facts.Driver{ModuleVersion: "550.54.15", Libraries: libs("550.54.15")}},
		{name: "no loader pick, one other library", driver: facts.Driver{ModuleVersion: "550.54.15", Libraries: libs("550.127.05")}, library: "550.127.05"},
		// disagreed: the doctor took the version only from a single
		// library file and called 64- and 32-bit copies of the new
		// version "both 550.54.15"; the provider and the planner saw the
		// mismatch.
		{name: "disagreed: no loader pick, two files of one other version", driver: facts.Driver{ModuleVersion: "550.54.15", Libraries: libs("550.127.05", "550.127.05")}, library: "550.127.05"},
		// disagreed: the planner warned about any library that differs
		// from the module; the provider and the doctor did not. A library
		// of the module's own version is installed, so nothing says the
		// programs get another.
		{name: "disagreed: no loader pick, the module's version among others", driver: facts.Driver{ModuleVersion: "550.54.15", Libraries: libs("535.183.01", "550.54.15")}},
		// disagreed: the provider and the doctor found no single library
		// version and said nothing; the planner warned. Whichever library
		// a program loads differs from the module, so it is a mismatch.
		{name: "disagreed: no loader pick, several versions, none the module's", driver: facts.Driver{ModuleVersion: "550.54.15", Libraries: libs("535.183.01", "550.127.05")}, library: "535.183.01, 550.127.05"},
		{name: "NVML says so", driver: facts.Driver{ModuleVersion: "550.54.15", LibraryVersion: "550.127.05"}, nvml: "driver_library_mismatch", library: "550.127.05", nvmlToo: true},
		{name: "NVML says so alone", nvml: "driver_library_mismatch", nvmlToo: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := doctor.DriverLibraryMismatch(&facts.Observation{Driver: tt.driver, NVML: facts.NVML{Status: tt.nvml}})
			if m.Library != tt.library || m.NVML != tt.nvmlToo || m.Module != tt.driver.ModuleVersion {
				t.Errorf("got %+v, want library %q, NVML %v", m, tt.library, tt.nvmlToo)
			}
			if m.InFiles() != (tt.library != "") || m.Found() != (tt.library != "" || tt.nvmlToo) {
				t.Errorf("InFiles %v, Found %v for %+v", m.InFiles(), m.Found(), m)
			}
		})
	}
}

// TestDriverVersion pins which driver version the host runs: NVML's, else
// the loaded module's, else the library's; a value that does not parse is
// passed over.
func TestDriverVersion(t *testing.T) {
	tests := []struct {
		name      string
		obs       facts.Observation
		want, src string
	}{
		{name: "none"},
		{name: "NVML first", obs: facts.Observation{NVML: facts.NVML{DriverVersion: "550.54.15"}, Driver: facts.Driver{ModuleVersion: "550.54.14", ModuleVersionFrom: "/proc/driver/nvidia/version", LibraryVersion: "550.127.05"}}, want: "550.54.15", src: "NVML"},
		{name: "module without NVML", obs: facts.Observation{Driver: facts.Driver{ModuleVersion: "550.54.15", ModuleVersionFrom: "/sys/module/nvidia/version", LibraryVersion: "550.127.05"}}, want: "550.54.15", src: "/sys/module/nvidia/version"},
		{name: "module without its source", obs: facts.Observation{Driver: facts.Driver{ModuleVersion: "550.54.15"}}, want: "550.54.15", src: "the loaded module"},
		{name: "library alone", obs: facts.Observation{Driver: facts.Driver{LibraryVersion: "550.127.05"}}, want: "550.127.05", src: "libnvidia-ml.so.1"},
		{name: "unparsable NVML answer", obs: facts.Observation{NVML: facts.NVML{DriverVersion: "unknown"}, Driver: facts.Driver{LibraryVersion: "550.127.05"}}, want: "550.127.05", src: "libnvidia-ml.so.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, src := doctor.DriverVersion(&tt.obs)
			if v.String() != tt.want || src != tt.src {
				t.Errorf("got %q from %q, want %q from %q", v, src, tt.want, tt.src)
			}
		})
	}
}

// TestDriverVersionsCheckFollowsTheRule: the driver.versions check judges
// by DriverLibraryMismatch, on the cases the copies disagreed on.
func TestDriverVersionsCheckFollowsTheRule(t *testing.T) {
	tests := []struct {
		name    string
		libs    []facts.Library
		want    doctor.Status
		summary string
	}{
		{"two files of one other version", libs("550.127.05", "550.127.05"), doctor.Problem, "module 550.54.15, libraries 550.127.05"},
		{"the module's version among others", libs("535.183.01", "550.54.15"), doctor.OK, ""},
		{"several versions, none the module's", libs("535.183.01", "550.127.05"), doctor.Problem, "libraries 535.183.01, 550.127.05"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obs := &facts.Observation{Driver: facts.Driver{ModuleVersion: "550.54.15", ModuleVersionFrom: "/proc/driver/nvidia/version", Libraries: tt.libs}}
			for _, c := range doctor.Run(doctor.Input{Obs: obs}).Checks {
				if c.ID != "driver.versions" {
					continue
				}
				if c.Status != tt.want || !strings.Contains(c.Summary, tt.summary) {
					t.Errorf("driver.versions: %s %q, want %s %q", c.Status, c.Summary, tt.want, tt.summary)
				}
				return
			}
			t.Fatal("no driver.versions check")
		})
	}
}

// TestStaleNouveauBlacklist pins the stale-initramfs rule. It was written
// three times: observe's problem flagged any blacklist file newer than the
// initramfs, the doctor's kernel.initramfs check only when every file was
// newer and ignored the kernel command line, and the kernel provider's
// planner (which decides to rebuild the initramfs) held the rule kept
// here.
func TestStaleNouveauBlacklist(t *testing.T) {
	built := time.Date(2024, 4, 22, 9, 12, 31, 0, time.UTC)
	file := func(name string, mod time.Time) facts.Blacklist {
		return facts.Blacklist{Module: "nouveau", Directive: "blacklist", File: "/etc/modprobe.d/" + name, Line: 1, ModTime: mod}
	}
	cmdline := facts.Blacklist{Module: "nouveau", Directive: "modprobe.blacklist", File: "/proc/cmdline"}
	older, newer := built.Add(-time.Hour), built.Add(time.Hour)
	tests := []struct {
		name  string
		lists []facts.Blacklist
		ir    *facts.FileTime
		want  string // the stale file, "" for none
	}{
		{name: "no initramfs", lists: []facts.Blacklist{file("a.conf", newer)}},
		{name: "initramfs time unknown", lists: []facts.Blacklist{file("a.conf", newer)}, ir: &facts.FileTime{Path: "/boot/initrd.img"}},
		{name: "no blacklist", ir: &facts.FileTime{Path: "/boot/initrd.img", ModTime: built}},
		{name: "older blacklist", lists: []facts.Blacklist{file("a.conf", older)}, ir: &facts.FileTime{Path: "/boot/initrd.img", ModTime: built}},
		{name: "newer blacklist", lists: []facts.Blacklist{file("a.conf", newer)}, ir: &facts.FileTime{Path: "/boot/initrd.img", ModTime: built}, want: "/etc/modprobe.d/a.conf"},
		{name: "another module's newer blacklist", lists: []facts.Blacklist{{Module: "nvidiafb", Directive: "blacklist", File: "/etc/modprobe.d/fb.conf", ModTime: newer}}, ir: &facts.FileTime{Path: "/boot/initrd.img", ModTime: built}},
		// disagreed: observe flagged the newer file; the initramfs holds
		// the older one, which is enough.
		{name: "disagreed: one older, one newer", lists: []facts.Blacklist{file("b.conf", newer), file("a.conf", older)}, ir: &facts.FileTime{Path: "/boot/initrd.img", ModTime: built}},
		// disagreed: observe and the doctor flagged it; the kernel
		// command line blacklists nouveau without the initramfs.
		{name: "disagreed: newer file, and the kernel command line", lists: []facts.Blacklist{file("a.conf", newer), cmdline}, ir: &facts.FileTime{Path: "/boot/initrd.img", ModTime: built}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := doctor.StaleNouveauBlacklist(&facts.Observation{Kernel: facts.Kernel{Blacklists: tt.lists, Initramfs: tt.ir}})
			switch {
			case got == nil && tt.want != "":
				t.Errorf("not stale, want %s", tt.want)
			case got != nil && got.File != tt.want:
				t.Errorf("stale by %s, want %q", got.File, tt.want)
			}
		})
	}
}

// TestInitramfsCheckFollowsTheRule: the kernel.initramfs check with a
// blacklist on the kernel command line.
func TestInitramfsCheckFollowsTheRule(t *testing.T) {
	built := time.Date(2024, 4, 22, 9, 12, 31, 0, time.UTC)
	obs := &facts.Observation{
		PCI: []facts.PCIDevice{{Address: "0000:01:00.0", VendorID: 0x10de}},
		Kernel: facts.Kernel{
			Initramfs: &facts.FileTime{Path: "/boot/initrd.img", ModTime: built},
			Blacklists: []facts.Blacklist{
				{Module: "nouveau", Directive: "blacklist", File: "/etc/modprobe.d/blacklist-nouveau.conf", Line: 1, ModTime: built.Add(time.Hour)},
				{Module: "nouveau", Directive: "modprobe.blacklist", File: "/proc/cmdline"},
			},
		},
	}
	for _, c := range doctor.Run(doctor.Input{Obs: obs}).Checks {
		if c.ID == "kernel.initramfs" {
			if c.Status != doctor.OK || !strings.Contains(c.Summary, "kernel command line") {
				t.Errorf("kernel.initramfs: %s %q, want ok by the kernel command line", c.Status, c.Summary)
			}
			return
		}
	}
	t.Fatal("no kernel.initramfs check")
}

// TestIndexOrderAmbiguous pins the device-order rule the planner's warning
// and the env.cuda-device-order check share. The planner's copy warned
// with no GPU at all and counted the larger of NVML's and the bus's GPUs;
// GPUCount counts what CUDA can enumerate.
func TestIndexOrderAmbiguous(t *testing.T) {
	tests := []struct {
		gpus    int
		visible []string
		order   string
		want    bool
	}{
		{2, []string{"0", "1"}, "", true},
		{2, []string{" 1"}, "FASTEST_FIRST", true},
		{2, []string{"0"}, "PCI_BUS_ID", false},
		{2, []string{"GPU-a", "MIG-b"}, "", false},
		{1, []string{"0"}, "", false},
		{0, []string{"0"}, "", false},
		{8, []string{"99999999999"}, "", false},
	}
	for _, tt := range tests {
		if got := doctor.IndexOrderAmbiguous(tt.gpus, tt.visible, tt.order); got != tt.want {
			t.Errorf("IndexOrderAmbiguous(%d, %q, %q) = %v, want %v", tt.gpus, tt.visible, tt.order, got, tt.want)
		}
	}
	one := &facts.Observation{PCI: []facts.PCIDevice{{Address: "0000:17:00.0"}, {Address: "0000:65:00.0"}}, NVML: facts.NVML{Devices: []facts.GPUDevice{{Index: 0}}}}
	if n := doctor.GPUCount(one); n != 1 {
		t.Errorf("GPUCount with NVML listing one of two = %d, want NVML's 1", n)
	}
	if n := doctor.GPUCount(&facts.Observation{PCI: one.PCI}); n != 2 {
		t.Errorf("GPUCount without NVML = %d, want the bus's 2", n)
	}
}

// TestNouveauCheckFollowsTheRule: a GPU bound to nouveau is nouveau
// running, though the module list was not read (a root's files). The
// doctor's copy looked at the module list alone; observe's problem and the
// kernel planner looked at both, as NouveauLoaded does.
func TestNouveauCheckFollowsTheRule(t *testing.T) {
	obs := &facts.Observation{PCI: []facts.PCIDevice{{Address: "0000:01:00.0", VendorID: 0x10de, Driver: "nouveau"}}}
	if !doctor.NouveauLoaded(obs) {
		t.Error("NouveauLoaded = false for a GPU bound to nouveau")
	}
	for _, c := range doctor.Run(doctor.Input{Obs: obs}).Checks {
		if c.ID == "kernel.nouveau" {
			if c.Status != doctor.Problem {
				t.Errorf("kernel.nouveau: %s %q, want a problem", c.Status, c.Summary)
			}
			return
		}
	}
	t.Fatal("no kernel.nouveau check")
}
