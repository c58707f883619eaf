package driver

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
)

// ParseProcVersion reads /proc/driver/nvidia/version (host.ParseProcVersion).
func ParseProcVersion(data []byte) (version, flavor string, err error) {
	return host.ParseProcVersion(data)
}

// IsDriverVersion reports whether s is shaped like an NVIDIA driver
// version (host.IsDriverVersion).
func IsDriverVersion(s string) bool { return host.IsDriverVersion(s) }

// ParseModules reads /proc/modules, keeping the modules keep reports (all
// of them when keep is nil). A line that does not parse is reported and
// skipped. Each line is
//
//	name size refcount used_by state address [(taints)]
//
// where used_by is "-" or a comma-terminated list.
func ParseModules(data []byte, keep func(name string) bool) ([]facts.LoadedModule, []error) {
	var mods []facts.LoadedModule
	var errs []error
	for n, line := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 5 {
			errs = append(errs, fmt.Errorf("line %d: %d fields, want at least 5: %q", n+1, len(f), clip(line)))
			continue
		}
		if keep != nil && !keep(f[0]) {
			continue
		}
		size, err1 := strconv.ParseUint(f[1], 10, 64)
		ref, err2 := strconv.Atoi(f[2])
		if err := errors.Join(err1, err2); err != nil || ref < -1 {
			errs = append(errs, fmt.Errorf("line %d: size or refcount is not a number: %q", n+1, clip(line)))
			continue
		}
		m := facts.LoadedModule{Name: f[0], Size: size, RefCount: ref, State: f[4]}
		if f[3] != "-" {
			for _, u := range strings.Split(f[3], ",") {
				if u != "" {
					m.UsedBy = append(m.UsedBy, u)
				}
			}
		}
		if len(f) > 6 {
			m.Taints = strings.Trim(f[6], "()")
		}
		mods = append(mods, m)
	}
	return mods, errs
}

// Relevant reports whether a kernel module takes part in driving an NVIDIA
// GPU: the nvidia modules (nvidia, nvidia_uvm, nvidia_drm, nvidia_modeset,
// nvidia_peermem …), the in-tree nouveau and its Ubuntu backport, and the
// old framebuffer drivers that grab the card.
func Relevant(module string) bool {
	m := Canonical(module)
	return strings.HasPrefix(m, "nvidia") || m == "nouveau" || m == "lbm_nouveau" || m == "rivafb"
}

// Canonical spells a module name as the kernel does: modprobe treats "-"
// and "_" alike, /proc/modules writes "_".
func Canonical(module string) string { return strings.ReplaceAll(module, "-", "_") }

// ModprobeDirective is one module-blocking directive of a modprobe
// configuration file.
type ModprobeDirective struct {
	Module    string
	Directive string // "blacklist", "install", "alias off"
	Line      int
}

// ParseModprobe reads a modprobe.d(5) file and returns the directives that
// keep a module from loading: "blacklist M", "install M <command>" (gpuenv
// treats any install command for a GPU module as replacing the load, as
// /bin/false and /bin/true do), and "alias M off". Lines may continue
// with a trailing backslash; '#' starts a comment line. Lines it does not
// understand are reported.
func ParseModprobe(data []byte) ([]ModprobeDirective, []error) {
	var out []ModprobeDirective
	var errs []error
	lines := strings.Split(string(data), "\n")
	for i := 0; i < len(lines); i++ {
		start := i + 1
		line := lines[i]
		for strings.HasSuffix(line, "\\") && i+1 < len(lines) {
			i++
			line = strings.TrimSuffix(line, "\\") + " " + lines[i]
		}
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Fields(line)
		switch f[0] {
		case "blacklist":
			if len(f) != 2 {
				errs = append(errs, fmt.Errorf("line %d: blacklist takes one module: %q", start, clip(line)))
				continue
			}
			out = append(out, ModprobeDirective{Module: Canonical(f[1]), Directive: "blacklist", Line: start})
		case "install":
			if len(f) < 3 {
				errs = append(errs, fmt.Errorf("line %d: install needs a module and a command: %q", start, clip(line)))
				continue
			}
			if blocks(f[2:]) {
				out = append(out, ModprobeDirective{Module: Canonical(f[1]), Directive: "install", Line: start})
			}
		case "alias":
			if len(f) != 3 {
				errs = append(errs, fmt.Errorf("line %d: alias takes a wildcard and a module: %q", start, clip(line)))
				continue
			}
			if f[2] == "off" {
				out = append(out, ModprobeDirective{Module: Canonical(f[1]), Directive: "alias off", Line: start})
			}
		case "options", "remove", "softdep", "weakdep", "include":
		default:
			errs = append(errs, fmt.Errorf("line %d: unknown command %q", start, clip(f[0])))
		}
	}
	return out, errs
}

// blocks reports whether an install command stops the module from loading:
// /bin/false or /bin/true alone (possibly through "exec"). A command that
// runs modprobe itself loads the module after some preparation.
func blocks(cmd []string) bool {
	if cmd[0] == "exec" && len(cmd) > 1 {
		cmd = cmd[1:]
	}
	if len(cmd) != 1 {
		return false
	}
	switch cmd[0] {
	case "/bin/false", "/bin/true", "/usr/bin/false", "/usr/bin/true", "false", "true":
		return true
	}
	return false
}

// ParseCmdline returns the modules the kernel command line blacklists:
// modprobe.blacklist=a,b (honoured by modprobe), rd.driver.blacklist=
// (dracut's, for the initramfs) and module_blacklist= (the kernel's own,
// which refuses the module whoever loads it).
func ParseCmdline(data []byte) []facts.Blacklist {
	var out []facts.Blacklist
	for _, arg := range strings.Fields(string(data)) {
		if arg == "--" {
			break // what follows is init's, not the kernel's
		}
		key, val, ok := strings.Cut(arg, "=")
		if !ok || (key != "modprobe.blacklist" && key != "rd.driver.blacklist" && key != "module_blacklist") {
			continue
		}
		for _, m := range strings.Split(val, ",") {
			if m != "" {
				out = append(out, facts.Blacklist{Module: Canonical(m), Directive: key, File: Cmdline})
			}
		}
	}
	return out
}

// LibraryVersion is the version in a versioned library file name
// ("libnvidia-ml.so.550.54.15" → "550.54.15"), or "" for the soname links
// (".so.1", ".so").
func LibraryVersion(name, prefix string) string {
	v, ok := strings.CutPrefix(name, prefix)
	if !ok || !IsDriverVersion(v) {
		return ""
	}
	return v
}

// ParsePCIUevent reads the uevent file of a PCI device in sysfs: DRIVER
// (absent when none is bound), PCI_CLASS (hex, no prefix), PCI_ID and
// PCI_SUBSYS_ID (VENDOR:DEVICE in hex).
func ParsePCIUevent(data []byte) (facts.PCIDevice, error) {
	var d facts.PCIDevice
	var haveID, haveClass bool
	for _, line := range strings.Split(string(data), "\n") {
		key, val, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok {
			continue
		}
		switch key {
		case "DRIVER":
			d.Driver = val
		case "PCI_CLASS":
			c, err := strconv.ParseUint(val, 16, 24)
			if err != nil {
				return facts.PCIDevice{}, fmt.Errorf("PCI_CLASS %q: not a hexadecimal class", clip(val))
			}
			d.Class, haveClass = uint32(c), true
		case "PCI_ID", "PCI_SUBSYS_ID":
			v, dev, err := pciPair(val)
			if err != nil {
				return facts.PCIDevice{}, fmt.Errorf("%s %q: %v", key, clip(val), err)
			}
			if key == "PCI_ID" {
				d.VendorID, d.DeviceID, haveID = v, dev, true
			} else {
				d.SubsystemVendor, d.SubsystemDevice = v, dev
			}
		}
	}
	if !haveID || !haveClass {
		return facts.PCIDevice{}, errors.New("no PCI_ID or PCI_CLASS line")
	}
	return d, nil
}

func pciPair(s string) (uint16, uint16, error) {
	a, b, ok := strings.Cut(s, ":")
	if !ok {
		return 0, 0, errors.New("want VENDOR:DEVICE")
	}
	x, err1 := strconv.ParseUint(a, 16, 16)
	y, err2 := strconv.ParseUint(b, 16, 16)
	if err := errors.Join(err1, err2); err != nil {
		return 0, 0, errors.New("want VENDOR:DEVICE in hexadecimal")
	}
	return uint16(x), uint16(y), nil
}

// CUDAVersion turns NVML's CUDA driver version (1000×major + 10×minor)
// into "major.minor".
func CUDAVersion(v int) string {
	if v <= 0 {
		return ""
	}
	return fmt.Sprintf("%d.%d", v/1000, v%1000/10)
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
