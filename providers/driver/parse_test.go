package driver_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/driver"
)

func TestParseProcVersion(t *testing.T) {
	cases := []struct {
		in, version, flavor string
		fails               bool
	}{
		// compat-facts §8, verbatim.
		{"NVRM version: NVIDIA UNIX x86_64 Kernel Module  515.76  Mon Sep 12 19:21:56 UTC 2022\nGCC version:  gcc version 7.5.0 (Ubuntu 7.5.0-3ubuntu1~18.04)\n", "515.76", "proprietary", false},
		{"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  575.57.08  Release Build  (dvs-builder@U16-I3-B03-4-3)  Tue May 27 20:32:03 UTC 2025\n", "575.57.08", "open", false},
		{"NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  550.54.15  Release Build  (dvs-builder@U16-I3-B03-4-3)  Tue Feb 13 01:10:03 UTC 2024\n", "550.54.15", "open", false},
		{"NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.261.03  Debian 535.261.03-1  Sat Aug 16 12:14:46 UTC 2025\n", "535.261.03", "proprietary", false},
		{"NVRM version: NVIDIA UNIX x86_64 Kernel Mod", "", "", true}, // truncated
		{"", "", "", true},
		{"GCC version:  gcc version 12.2.0\n", "", "", true},
		{"NVRM version: something else 1.2.3.4.5\n", "", "", true},
	}
	for _, c := range cases {
		v, f, err := driver.ParseProcVersion([]byte(c.in))
		if v != c.version || f != c.flavor || (err != nil) != c.fails {
			t.Errorf("ParseProcVersion(%q) = %q, %q, %v; want %q, %q, fails %v", c.in, v, f, err, c.version, c.flavor, c.fails)
		}
	}
}

func TestParseModules(t *testing.T) {
	in := `nvidia_uvm 1437696 0 - Live 0x0000000000000000 (POE)
nvidia 56860672 3 nvidia_drm,nvidia_modeset,nvidia_uvm, Live 0x0000000000000000 (POE)
ext4 987136 1 - Live 0x0000000000000000
nouveau 2306048 3 - Loading 0xffffffffc0a00000
broken line
nvidia_drm x 0 - Live 0x0
`
	mods, errs := driver.ParseModules([]byte(in), driver.Relevant)
	want := []facts.LoadedModule{
		{Name: "nvidia_uvm", Size: 1437696, State: "Live", Taints: "POE"},
		{Name: "nvidia", Size: 56860672, RefCount: 3, UsedBy: []string{"nvidia_drm", "nvidia_modeset", "nvidia_uvm"}, State: "Live", Taints: "POE"},
		{Name: "nouveau", Size: 2306048, RefCount: 3, State: "Loading"},
	}
	if diff := cmp.Diff(want, mods); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if len(errs) != 2 || !strings.Contains(errs[0].Error(), "line 5") || !strings.Contains(errs[1].Error(), "line 6") {
		t.Errorf("errors %v, want lines 5 and 6", errs)
	}
}

func TestRelevant(t *testing.T) {
	for m, want := range map[string]bool{
		"nvidia": true, "nvidia_uvm": true, "nvidia-drm": true, "nouveau": true, "lbm-nouveau": true,
		"nvidiafb": true, "i2c_nvidia_gpu": false, "drm": false, "ast": false,
	} {
		if driver.Relevant(m) != want {
			t.Errorf("Relevant(%q) = %v", m, !want)
		}
	}
}

func TestParseModprobe(t *testing.T) {
	in := `# blacklist in a comment
blacklist nouveau
blacklist lbm-nouveau
alias nouveau off
alias char-major-195* nvidia
install nvidia modprobe nvidia-current $CMDLINE_OPTS
install nouveau /bin/false
install nvidia-drm \
    /bin/true
options nouveau modeset=0
remove nvidia modprobe -r -i nvidia-drm nvidia
blacklist
frobnicate nvidia
`
	got, errs := driver.ParseModprobe([]byte(in))
	want := []driver.ModprobeDirective{
		{Module: "nouveau", Directive: "blacklist", Line: 2},
		{Module: "lbm_nouveau", Directive: "blacklist", Line: 3},
		{Module: "nouveau", Directive: "alias off", Line: 4},
		{Module: "nouveau", Directive: "install", Line: 7},
		{Module: "nvidia_drm", Directive: "install", Line: 8},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if len(errs) != 2 || !strings.Contains(errs[0].Error(), "line 12") || !strings.Contains(errs[1].Error(), "line 13") {
		t.Errorf("errors %v, want lines 12 and 13", errs)
	}
}

func TestParseCmdline(t *testing.T) {
	got := driver.ParseCmdline([]byte("BOOT_IMAGE=/vmlinuz ro rd.driver.blacklist=nouveau modprobe.blacklist=nouveau,nvidia-drm,, quiet module_blacklist=nvidia -- modprobe.blacklist=init\n"))
	want := []facts.Blacklist{
		{Module: "nouveau", Directive: "rd.driver.blacklist", File: driver.Cmdline},
		{Module: "nouveau", Directive: "modprobe.blacklist", File: driver.Cmdline},
		{Module: "nvidia_drm", Directive: "modprobe.blacklist", File: driver.Cmdline},
		{Module: "nvidia", Directive: "module_blacklist", File: driver.Cmdline},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestLibraryVersion(t *testing.T) {
	for name, want := range map[string]string{
		"libnvidia-ml.so.550.54.15": "550.54.15", "libnvidia-ml.so.1": "", "libnvidia-ml.so": "",
		"libnvidia-ml.so.515.76": "515.76", "libnvidia-ml.so.550.54.15.bak": "", "libcuda.so.550.54.15": "",
	} {
		if got := driver.LibraryVersion(name, "libnvidia-ml.so."); got != want {
			t.Errorf("LibraryVersion(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestCUDAVersion(t *testing.T) {
	for in, want := range map[int]string{12040: "12.4", 12020: "12.2", 11080: "11.8", 13000: "13.0", 12090: "12.9", 0: ""} {
		if got := driver.CUDAVersion(in); got != want {
			t.Errorf("CUDAVersion(%d) = %q, want %q", in, got, want)
		}
	}
}

func FuzzParseProcVersion(f *testing.F) {
	f.Add([]byte("NVRM version: NVIDIA UNIX x86_64 Kernel Module  515.76  Mon Sep 12 19:21:56 UTC 2022\n"))
	f.Add([]byte("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  575.57.08  Release Build  (x@y)  date\n"))
	f.Add([]byte("NVRM version:"))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, flavor, err := driver.ParseProcVersion(data)
		if err == nil && !driver.IsDriverVersion(v) {
			t.Errorf("accepted version %q", v)
		}
		if err != nil && (v != "" || flavor != "") {
			t.Errorf("error %v with values %q %q", err, v, flavor)
		}
	})
}

func FuzzParseModules(f *testing.F) {
	f.Add([]byte("nvidia 56860672 3 nvidia_drm,nvidia_modeset, Live 0x0000000000000000 (POE)\n"))
	f.Add([]byte("nvidia_uvm 1437696 0 - Live 0x0\nx y\n"))
	f.Add([]byte("nvidia 1 -1 - Live 0x0 ()\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		mods, _ := driver.ParseModules(data, nil)
		for _, m := range mods {
			if m.Name == "" || strings.ContainsAny(m.Name, " \n") {
				t.Errorf("bad module name %q", m.Name)
			}
		}
	})
}

func FuzzParseModprobe(f *testing.F) {
	f.Add([]byte("blacklist nouveau\ninstall nouveau /bin/false\nalias nouveau off\n"))
	f.Add([]byte("install nvidia \\\n modprobe x\\"))
	f.Add([]byte("options\nremove\n\\"))
	f.Fuzz(func(t *testing.T, data []byte) {
		dirs, _ := driver.ParseModprobe(data)
		lines := strings.Count(string(data), "\n") + 1
		for _, d := range dirs {
			if d.Module == "" || d.Line < 1 || d.Line > lines {
				t.Errorf("bad directive %+v", d)
			}
		}
	})
}

func FuzzParseCmdline(f *testing.F) {
	f.Add([]byte("ro modprobe.blacklist=nouveau,nvidia rd.driver.blacklist=nouveau"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, b := range driver.ParseCmdline(data) {
			if b.Module == "" {
				t.Error("empty module")
			}
		}
	})
}

func TestParsePCIUevent(t *testing.T) {
	got, err := driver.ParsePCIUevent([]byte("DRIVER=nvidia\nPCI_CLASS=30200\nPCI_ID=10DE:2330\nPCI_SUBSYS_ID=10DE:16C1\nPCI_SLOT_NAME=0000:18:00.0\nMODALIAS=pci:v000010DEd00002330sv000010DEsd000016C1bc03sc02i00\n"))
	want := facts.PCIDevice{VendorID: 0x10de, DeviceID: 0x2330, SubsystemVendor: 0x10de, SubsystemDevice: 0x16c1, Class: 0x030200, Driver: "nvidia"}
	if err != nil || got != want {
		t.Errorf("ParsePCIUevent = %+v, %v; want %+v", got, err, want)
	}
	unbound, err := driver.ParsePCIUevent([]byte("PCI_CLASS=30200\nPCI_ID=10DE:2330\n"))
	if err != nil || unbound.Driver != "" || unbound.DeviceID != 0x2330 {
		t.Errorf("unbound = %+v, %v", unbound, err)
	}
	for _, bad := range []string{"", "PCI_CLASS=30200\n", "PCI_ID=10DE:2330\n", "PCI_CLASS=xyz\nPCI_ID=10DE:2330\n", "PCI_CLASS=30200\nPCI_ID=10DE2330\n", "PCI_CLASS=30200\nPCI_ID=10DE:12345\n"} {
		if d, err := driver.ParsePCIUevent([]byte(bad)); err == nil {
			t.Errorf("ParsePCIUevent(%q) = %+v, want an error", bad, d)
		}
	}
}

func FuzzParsePCIUevent(f *testing.F) {
	f.Add([]byte("DRIVER=nvidia\nPCI_CLASS=30200\nPCI_ID=10DE:2330\nPCI_SUBSYS_ID=10DE:16C1\n"))
	f.Add([]byte("PCI_CLASS=\nPCI_ID=:\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := driver.ParsePCIUevent(data)
		if err != nil && d != (facts.PCIDevice{}) {
			t.Errorf("error %v with a device %+v", err, d)
		}
		if err == nil && d.Class > 0xffffff {
			t.Errorf("class %x", d.Class)
		}
	})
}
