package doctor

import (
	"slices"
	"testing"
	"time"

	"github.com/gpuenv/gpuenv/planner/facts"
)

// TestMismatchFollowsTheRule: observe's problem is the doctor's rule
// (doctor.DriverLibraryMismatch), on the cases the copies disagreed on.
func TestMismatchFollowsTheRule(t *testing.T) {
	lib := func(v string) facts.Library {
		return facts.Library{Path: "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so." + v, Version: v}
	}
	tests := []struct {
		name string
		libs []facts.Library
		want string // the problem, "" for none
	}{
		{"the module's version among others", []facts.Library{lib("535.183.01"), lib("550.54.15")}, ""},
		{"several versions, none the module's", []facts.Library{lib("535.183.01"), lib("550.127.05")},
			"Driver/library version mismatch: module 550.54.15, libraries 535.183.01, 550.127.05 (an upgrade without a reboot)"},
		{"two files of one other version", []facts.Library{lib("550.127.05"), {Path: "/usr/lib/i386-linux-gnu/libnvidia-ml.so.550.127.05", Version: "550.127.05"}},
			"Driver/library version mismatch: module 550.54.15, libraries 550.127.05 (an upgrade without a reboot)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps := ObserveFindings(&facts.Observation{Driver: facts.Driver{ModuleVersion: "550.54.15", Libraries: tt.libs}})
			var got string
			if len(ps) == 1 {
				got = ps[0].Message()
			}
			if got != tt.want || len(ps) > 1 {
				t.Errorf("problems %v; want %q", ps, tt.want)
			}
		})
	}
}

// TestStaleInitramfsFollowsTheRule: observe's stale-initramfs problem is
// the doctor's (doctor.StaleNouveauBlacklist, and no GPU no problem), on
// the cases the copies disagreed on; it used to flag all three.
func TestStaleInitramfsFollowsTheRule(t *testing.T) {
	built := time.Date(2024, 4, 22, 9, 12, 31, 0, time.UTC)
	file := func(name string, mod time.Time) facts.Blacklist {
		return facts.Blacklist{Module: "nouveau", Directive: "blacklist", File: "/etc/modprobe.d/" + name, Line: 1, ModTime: mod}
	}
	gpu := []facts.PCIDevice{{Address: "0000:01:00.0", VendorID: 0x10de, Driver: "nvidia"}}
	tests := []struct {
		name  string
		pci   []facts.PCIDevice
		lists []facts.Blacklist
		want  bool
	}{
		{"newer blacklist", gpu, []facts.Blacklist{file("a.conf", built.Add(time.Hour))}, true},
		{"newer blacklist, no GPU", nil, []facts.Blacklist{file("a.conf", built.Add(time.Hour))}, false},
		{"one older, one newer", gpu, []facts.Blacklist{file("b.conf", built.Add(time.Hour)), file("a.conf", built.Add(-time.Hour))}, false},
		{"newer file and the kernel command line", gpu, []facts.Blacklist{file("a.conf", built.Add(time.Hour)), {Module: "nouveau", Directive: "modprobe.blacklist", File: "/proc/cmdline"}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps := ObserveFindings(&facts.Observation{PCI: tt.pci, Kernel: facts.Kernel{
				Blacklists: tt.lists, Initramfs: &facts.FileTime{Path: "/boot/initrd.img", ModTime: built},
				Loaded: []facts.LoadedModule{{Name: "nvidia"}},
			}})
			var stale []string
			for _, p := range ps {
				if p.ID == "kernel.initramfs" {
					stale = append(stale, p.Message())
				}
			}
			if got := len(stale) == 1; got != tt.want || len(stale) > 1 {
				t.Errorf("problems %v, want a stale initramfs: %v", ps, tt.want)
			}
		})
	}
}

// TestNouveauFollowsTheRule: with no NVIDIA GPU, nouveau in the module
// list takes nothing from the nvidia driver; the doctor skips the check,
// and observe (which used to flag it) now says nothing either.
func TestNouveauFollowsTheRule(t *testing.T) {
	obs := &facts.Observation{Kernel: facts.Kernel{Loaded: []facts.LoadedModule{{Name: "nouveau"}}}}
	if ps := ObserveFindings(obs); len(ps) != 0 {
		t.Errorf("problems %v without a GPU, want none", ps)
	}
	obs.PCI = []facts.PCIDevice{{Address: "0000:01:00.0", VendorID: 0x10de}}
	var ids []string
	for _, p := range ObserveFindings(obs) {
		ids = append(ids, p.ID)
	}
	if !slices.Contains(ids, "kernel.nouveau") {
		t.Errorf("problems %v with a GPU, want nouveau's", ids)
	}
}
