package containers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"go.yaml.in/yaml/v3"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpuenv/gpuenv/internal/childproc"
	"github.com/gpuenv/gpuenv/planner/compat"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/cdi"
	"github.com/gpuenv/gpuenv/providers/host/pkgdb"
	"github.com/gpuenv/gpuenv/spec"
	"github.com/gpuenv/gpuenv/spec/version"
)

// ToolkitPackages are the container toolkit's packages in NVIDIA's
// libnvidia-container repository, the toolkit first: installing it pulls
// in the others at its own version.
var ToolkitPackages = []string{"nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container-tools", "libnvidia-container1"}

// Hook executables: nvidia-cdi-hook from toolkit 1.16, nvidia-ctk's hook
// subcommand before (the toolkit's CHANGELOG, v1.16.0-rc.1).
const (
	CDIHookPath = "/usr/bin/nvidia-cdi-hook"
	CTKPath     = "/usr/bin/nvidia-ctk"
)

// procGPUs has one directory per GPU, named by its PCI address.
const procGPUs = "/proc/driver/nvidia/gpus"

// engineOrder is the order of Containers.Engines.
var engineOrder = []spec.Engine{spec.EngineDocker, spec.EngineContainerd, spec.EngineCRIO}

// Observe reads the container toolkit from the package list, the
// engines' configuration files, the CDI specs, and what a CDI spec is
// made from: the GPUs the driver lists and the driver's files.
func Observe(ctx context.Context, h *host.Host, pkgs facts.Packages, drv facts.Driver) (facts.Containers, []facts.Warning) {
	var out facts.Containers
	var warns []facts.Warning
	out.Toolkit = observeToolkit(h, pkgs)
	for _, e := range engineOrder {
		out.Engines = append(out.Engines, observeEngine(h, e))
	}
	out.CDISpecs, warns = observeCDI(h)
	if out.CDISpecs == nil {
		out.CDISpecs = []facts.CDISpec{}
	}
	out.CDIInUse = cdiInUse(out.CDISpecs)
	gpus, w := observeGPUs(h)
	out.GPUs = gpus
	warns = append(warns, w...)
	out.DriverVersion = driverVersion(drv)
	files, w := driverFiles(ctx, h, pkgs, out.DriverVersion)
	out.DriverFiles = files
	out.DevCharRules = observeDevCharRules(h)
	minors, w2 := observeMIGMinors(h)
	out.MIGMinors = minors
	return out, append(append(warns, w...), w2...)
}

// MIGMinorsPath lists the driver's MIG capabilities with the minor of
// the /dev/nvidia-caps node of each, one "<capability> <minor>" a line
// (NVIDIA's MIG user guide, "/dev based nvidia-capabilities"). The
// driver writes it when its nvidia-caps support is loaded, whether or
// not any GPU is in MIG mode.
const MIGMinorsPath = "/proc/driver/nvidia-caps/mig-minors"

// observeMIGMinors reads MIGMinorsPath; a line that does not read as a
// capability and a minor is a warning, not a guess.
func observeMIGMinors(h *host.Host) ([]facts.MIGMinor, []facts.Warning) {
	data, err := h.ReadFileLimit(MIGMinorsPath, MaxConfigSize)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, []facts.Warning{{Path: MIGMinorsPath, Message: err.Error()}}
	}
	var out []facts.MIGMinor
	var warns []facts.Warning
	n := 0
	for line := range strings.Lines(string(data)) {
		n++
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		minor := -1
		if len(f) == 2 {
			if m, err := strconv.Atoi(f[1]); err == nil && m >= 0 {
				minor = m
			}
		}
		if minor < 0 || !validMIGCapability(f[0]) {
			warns = append(warns, facts.Warning{Path: MIGMinorsPath, Message: fmt.Sprintf("line %d: %q is not \"<capability> <minor>\"", n, line)})
			continue
		}
		out = append(out, facts.MIGMinor{Capability: f[0], Minor: minor})
	}
	return out, warns
}

// validMIGCapability accepts the capabilities the MIG user guide lists:
// config, monitor, and the access of a GPU instance or of one of its
// compute instances.
func validMIGCapability(c string) bool {
	if c == "config" || c == "monitor" {
		return true
	}
	var gpu, gi, ci int
	if n, _ := fmt.Sscanf(c, "gpu%d/gi%d/ci%d/access", &gpu, &gi, &ci); n == 3 && c == fmt.Sprintf("gpu%d/gi%d/ci%d/access", gpu, gi, ci) {
		return true
	}
	n, _ := fmt.Sscanf(c, "gpu%d/gi%d/access", &gpu, &gi)
	return n == 2 && c == fmt.Sprintf("gpu%d/gi%d/access", gpu, gi)
}

// DevCharRuleDirs are where udev reads a rule named DevCharRuleName
// from, the first outranking the others.
var DevCharRuleDirs = []string{"/etc/udev/rules.d", "/usr/lib/udev/rules.d", "/lib/udev/rules.d"}

// DevCharRuleName is the rule's name in NVIDIA's advice (NVIDIA/nvidia-
// container-toolkit#48), which gpuenv keeps so that its rule and one
// installed by hand replace each other rather than both running.
const DevCharRuleName = "71-nvidia-dev-char.rules"

func observeDevCharRules(h *host.Host) []facts.FileDigest {
	var out []facts.FileDigest
	for _, dir := range DevCharRuleDirs {
		p := path.Join(dir, DevCharRuleName)
		if _, err := h.Lstat(p); err != nil {
			continue
		}
		d := facts.FileDigest{Path: p}
		if data, err := h.ReadFileLimit(p, MaxConfigSize); err == nil {
			d.SHA256 = host.SHA256Of(data)
		}
		out = append(out, d)
	}
	return out
}

func observeToolkit(h *host.Host, pkgs facts.Packages) facts.ContainerToolkit {
	t := toolkitInstalled(pkgs)
	if t.Version == "" {
		return t
	}
	switch {
	case exists(h, CDIHookPath):
		t.HookPath = CDIHookPath
	case exists(h, CTKPath):
		t.HookPath = CTKPath
	}
	if t.HookPath != "" {
		if v, err := version.Parse(t.Version); err == nil {
			t.Hooks = compat.ToolkitHooks(v)
		}
	}
	return t
}

// toolkitInstalled is the toolkit's packages and version from the package
// list; "" when it is not installed.
func toolkitInstalled(pkgs facts.Packages) facts.ContainerToolkit {
	var t facts.ContainerToolkit
	for _, p := range pkgs.Packages {
		if slices.Contains(ToolkitPackages, p.Name) && p.State == facts.StateInstalled {
			t.Packages = append(t.Packages, p)
			if p.Name == ToolkitPackages[0] || (p.Name == "nvidia-container-toolkit-base" && t.Version == "") {
				if v, err := version.FromDebian(p.Version); err == nil {
					t.Version = v.String()
				} else {
					t.Version = p.Version
				}
			}
		}
	}
	return t
}

func exists(h *host.Host, p string) bool {
	_, err := h.Stat(p)
	return err == nil
}

func observeEngine(h *host.Host, e spec.Engine) facts.EngineConfig {
	c := facts.EngineConfig{Engine: string(e), Path: EngineConfigPath(e)}
	data, err := h.ReadFileLimit(c.Path, MaxConfigSize)
	if errors.Is(err, fs.ErrNotExist) {
		return c
	}
	c.Exists = true
	if err != nil {
		c.Error = err.Error()
		return c
	}
	c.SHA256 = host.SHA256Of(data)
	c.Content = string(data)
	if fi, err := h.Stat(c.Path); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			c.Mode, c.UID, c.GID = st.Mode&0o7777, int(st.Uid), int(st.Gid)
		}
	}
	parseEngine(&c)
	return c
}

// parseEngine reads what c.Content says of the NVIDIA runtime.
func parseEngine(c *facts.EngineConfig) {
	k, _ := kindOf(spec.Engine(c.Engine))
	st, err := k.parse(c.Content)
	if err != nil {
		c.Error = err.Error()
		return
	}
	c.NVIDIARuntime = st.nvidia
	c.DefaultRuntime = st.defaultRuntime
	c.Version = st.version
}

// observeCDI reads every spec in both directories and keeps those for
// nvidia.com and management.nvidia.com devices.
func observeCDI(h *host.Host) ([]facts.CDISpec, []facts.Warning) {
	var out []facts.CDISpec
	var warns []facts.Warning
	for _, dir := range []string{cdi.StaticCDIDir, cdi.DynamicCDIDir} {
		entries, err := h.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, ent := range entries {
			p := path.Join(dir, ent.Name())
			if !cdiPath(p) || ent.IsDir() {
				continue
			}
			data, err := h.ReadFileLimit(p, MaxConfigSize)
			if err != nil {
				warns = append(warns, facts.Warning{Path: p, Message: err.Error()})
				continue
			}
			if s, ok := readCDI(h, p, data); ok {
				out = append(out, s)
			}
		}
	}
	return out, warns
}

// readCDI reads the spec at p, whose content is data; false when it is
// not for nvidia.com or management.nvidia.com devices. With h nil, no path it names is looked for:
// none is taken to be gone.
func readCDI(h *host.Host, p string, data []byte) (facts.CDISpec, bool) {
	s := facts.CDISpec{Path: p, SHA256: host.SHA256Of(data)}
	var raw cdispec.Spec
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&raw); err != nil {
		s.Error = err.Error()
		return s, true
	}
	if !strings.HasPrefix(raw.Kind, cdi.CDIVendor+"/") && !strings.HasPrefix(raw.Kind, cdi.ManagementVendor+"/") {
		return s, false
	}
	s.Kind = raw.Kind
	describeCDI(h, &raw, &s)
	return s, true
}

// describeCDI fills in what a spec names: its devices and their device
// nodes, the driver version of its libraries, the hooks it runs, and the
// host paths that are gone.
func describeCDI(h *host.Host, raw *cdispec.Spec, s *facts.CDISpec) {
	var paths []string
	addEdits := func(e *cdispec.ContainerEdits) {
		for _, n := range e.DeviceNodes {
			p := n.HostPath
			if p == "" {
				p = n.Path
			}
			paths = append(paths, p)
			if !slices.Contains(s.DeviceNodes, p) {
				s.DeviceNodes = append(s.DeviceNodes, p)
			}
		}
		for _, m := range e.Mounts {
			paths = append(paths, m.HostPath)
			if v := libraryVersion(m.HostPath); v != "" && s.DriverVersion == "" {
				s.DriverVersion = v
			}
		}
		for _, hk := range e.Hooks {
			paths = append(paths, hk.Path)
			if name := hookName(hk); name != "" && !slices.Contains(s.Hooks, name) {
				s.Hooks = append(s.Hooks, name)
			}
		}
	}
	addEdits(&raw.ContainerEdits)
	for i := range raw.Devices {
		s.Devices = append(s.Devices, raw.Devices[i].Name)
		addEdits(&raw.Devices[i].ContainerEdits)
	}
	if h == nil {
		return
	}
	seen := map[string]bool{}
	for _, p := range paths {
		if p == "" || seen[p] {
			continue
		}
		seen[p] = true
		if _, err := h.Lstat(p); err != nil {
			s.Missing = append(s.Missing, p)
		}
	}
}

// libraryVersion is the driver version a library path names:
// libcuda.so.550.54.15 and libnvidia-ml.so.550.54.15 carry it.
func libraryVersion(p string) string {
	base := path.Base(p)
	for _, lib := range []string{"libcuda.so.", "libnvidia-ml.so."} {
		if v, ok := strings.CutPrefix(base, lib); ok && strings.Count(v, ".") >= 1 {
			return v
		}
	}
	return ""
}

// hookName is the hook a CDI hook entry runs: the argument after the
// executable (nvidia-cdi-hook <name>) or after "hook" (nvidia-ctk hook
// <name>).
func hookName(hk *cdispec.Hook) string {
	args := hk.Args
	if len(args) > 0 {
		args = args[1:]
	}
	if len(args) > 0 && args[0] == "hook" {
		args = args[1:]
	}
	if len(args) == 0 {
		return ""
	}
	return args[0]
}

// cdiInUse is the spec engines use for nvidia.com/gpu.
func cdiInUse(specs []facts.CDISpec) string { return specInUse(specs, cdi.CDIKind) }

// observeGPUs reads each GPU's information file: its minor number (its
// /dev/nvidia<minor>) and UUID.
func observeGPUs(h *host.Host) ([]facts.ContainerGPU, []facts.Warning) {
	entries, err := h.ReadDir(procGPUs)
	if err != nil {
		return nil, nil
	}
	var out []facts.ContainerGPU
	var warns []facts.Warning
	for _, ent := range entries {
		p := path.Join(procGPUs, ent.Name(), "information")
		data, err := h.ReadFile(p)
		if err != nil {
			warns = append(warns, facts.Warning{Path: p, Message: err.Error()})
			continue
		}
		g := facts.ContainerGPU{PCIBusID: ent.Name(), Minor: -1}
		for line := range strings.Lines(string(data)) {
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			v = strings.TrimSpace(v)
			switch strings.TrimSpace(k) {
			case "Device Minor":
				if n, err := strconv.Atoi(v); err == nil {
					g.Minor = n
				}
			case "GPU UUID":
				g.UUID = v
			}
		}
		if g.Minor < 0 {
			warns = append(warns, facts.Warning{Path: p, Message: "no Device Minor line"})
			continue
		}
		out = append(out, g)
	}
	// ReadDir sorts by name, which is the PCI address: NVML's order.
	for i := range out {
		out[i].Index = i
	}
	return out, warns
}

func driverVersion(d facts.Driver) string {
	if d.LibraryVersion != "" {
		return d.LibraryVersion
	}
	if len(d.Libraries) > 0 {
		return d.Libraries[0].Version
	}
	return d.ModuleVersion
}

// driverTools are the driver's programs a container may run.
var driverTools = []string{"nvidia-smi", "nvidia-debugdump", "nvidia-persistenced", "nvidia-cuda-mps-control", "nvidia-cuda-mps-server"}

// driverFiles lists, from the file lists of the installed packages of
// the driver's version, the libraries of that version and their links,
// the GSP firmware, and the driver's tools: dpkg's lists are files under
// /var/lib/dpkg/info; rpm's database is read through rpm -ql, one command
// for all the driver's packages.
func driverFiles(ctx context.Context, h *host.Host, pkgs facts.Packages, ver string) ([]string, []facts.Warning) {
	if ver == "" {
		return nil, nil
	}
	var names []string
	var lists [][]string
	for _, p := range pkgs.Packages {
		if p.State != facts.StateInstalled || !strings.HasPrefix(p.Version, ver) && !strings.Contains(p.Version, ":"+ver) ||
			slices.Contains(ToolkitPackages, p.Name) {
			continue
		}
		switch pkgs.Manager {
		case facts.DatabaseDpkg:
			if list, err := pkgdb.FileList(h, p.Name, p.Architecture); err == nil {
				lists = append(lists, strings.Fields(string(list)))
			}
		case facts.DatabaseRPM:
			names = append(names, p.Name)
		}
	}
	if len(names) > 0 {
		var stdout bytes.Buffer
		var stderr childproc.Tail
		if err := h.Run(ctx, host.Command{Argv: pkgdb.RPMFilesQuery(names...), Stdout: &stdout, Stderr: &stderr}); err != nil {
			return nil, []facts.Warning{{Message: fmt.Sprintf("listing the files of driver %s's packages (%s): %v %s", ver, strings.Join(names, ", "), err, stderr.Text(0))}}
		}
		lists = append(lists, pkgdb.ParseRPMFiles(stdout.Bytes()))
	}
	var out []string
	for _, list := range lists {
		for _, f := range list {
			if isDriverFile(f, ver) && !slices.Contains(out, f) {
				if fi, err := h.Stat(f); err == nil && !fi.IsDir() {
					out = append(out, f)
				}
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

func isDriverFile(f, ver string) bool {
	base := path.Base(f)
	switch {
	case strings.HasPrefix(f, "/lib/firmware/nvidia/"+ver+"/"), strings.HasPrefix(f, "/usr/lib/firmware/nvidia/"+ver+"/"):
		return true
	case (strings.HasPrefix(f, "/usr/bin/") || strings.HasPrefix(f, "/usr/sbin/")) && slices.Contains(driverTools, base):
		return true
	case strings.HasPrefix(base, "lib") && strings.Contains(base, ".so."):
		// The library of the version, and its SONAME link
		// (libcuda.so.1), which programs open.
		return strings.HasSuffix(base, ".so."+ver) || strings.HasSuffix(base, ".so.1")
	}
	return false
}
