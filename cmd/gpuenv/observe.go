package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers"
	"github.com/gpuenv/gpuenv/providers/host"
)

// hostOptions are handed to every host handle this process opens. It is
// empty in gpuenv itself; test-only entry points (a gpuenv built with
// go-nvml's mock) put their NVML here, so that no flag of the real binary
// can swap the library.
var hostOptions []host.Option

// openHost opens the host at --root.
func openHost(g *globalOptions) (*host.Host, error) {
	return host.New(g.Root, hostOptions...)
}

// onHost is the RunE of a command that works on the host at --root: it
// opens the host and runs f on it.
func onHost(g *globalOptions, f func(cmd *cobra.Command, h *host.Host) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		h, err := openHost(g)
		if err != nil {
			return err
		}
		return f(cmd, h)
	}
}

func newObserveCmd(g *globalOptions) *cobra.Command {
	var pythons []string
	cmd := &cobra.Command{
		Use:   "observe",
		Short: "Show what is on the host: GPUs, driver, kernel modules, CUDA, cuDNN, frameworks",
		Long: `Observe reads the host (--root) and prints, one section per layer, what is
installed and running: the GPUs on the PCI bus and their kernel driver, the
loaded modules and blacklists, NVML's view, the driver libraries, device
nodes, packages, CUDA toolkits, cuDNN, Python environments and their
frameworks, groups and the system-wide environment. Problems are flagged
with "!" where they show. It changes nothing and starts no process on a
Debian-family host.

With --json it prints the observation document (schema_version) that plan,
apply and doctor work from.`,
		Args: cobra.NoArgs,
		RunE: onHost(g, func(cmd *cobra.Command, h *host.Host) error {
			v := newObserveView(g)
			obs := providers.Observe(cmd.Context(), h, providers.ObserveOptions{Pythons: pythons})
			return v.Observation(obs)
		}),
	}
	repeatable(cmd.Flags(), &pythons, "python", "a Python `INTERPRETER` (path inside --root) whose environment to observe; repeatable")
	addJSONFlag(cmd, g)
	return cmd
}

// observeView shows observe's result, for a person or as JSON; the flags
// choose one, once, in newObserveView.
type observeView interface {
	// Observation shows obs and returns the first write error.
	Observation(obs *facts.Observation) error
}

// newObserveView chooses observe's view from the flags: the observation
// document with --json, else sections for a person.
func newObserveView(g *globalOptions) observeView {
	if g.JSON {
		return &observeJSON{g: g}
	}
	return &observeHuman{printer: printer{w: g.Stdout}, color: g.Color(), root: g.Root}
}

// observeJSON prints the observation document.
type observeJSON struct {
	g *globalOptions
}

var _ observeView = (*observeJSON)(nil)

func (v *observeJSON) Observation(obs *facts.Observation) error {
	return writeJSON(v.g, obs)
}

// observeHuman renders an observation for a person. It only formats: every
// judgement (problems included) is in the observation.
type observeHuman struct {
	printer
	color bool
	// root is --root as the user wrote it.
	root string
	// problems are the observation's, taken out as their section prints.
	problems []facts.Problem
}

var _ observeView = (*observeHuman)(nil)

// section starts a layer's block and ends the previous one with its
// problems.
func (v *observeHuman) section(title string) {
	v.printf("\n%s\n", title)
}

func (v *observeHuman) item(format string, args ...any) {
	v.printf("  "+format+"\n", args...)
}

// flag prints the problems of the given layers.
func (v *observeHuman) flag(layers ...string) {
	rest := v.problems[:0]
	for _, p := range v.problems {
		if !slices.Contains(layers, p.Layer) {
			rest = append(rest, p)
			continue
		}
		line := "! " + p.Message
		if v.color {
			line = "\x1b[31m" + line + "\x1b[0m"
		}
		v.printf("  %s\n", line)
	}
	v.problems = rest
}

// Observation prints obs, one section per layer, each with its problems.
func (v *observeHuman) Observation(obs *facts.Observation) error {
	v.problems = slices.Clone(obs.Problems)
	v.printf("Host %s\n", v.root)
	v.os(obs)
	v.kernel(obs)
	v.gpus(obs)
	v.nvml(obs)
	v.driver(obs)
	v.devices(obs)
	v.packages(obs)
	v.repositories(obs)
	v.cuda(obs)
	v.cudnn(obs)
	v.python(obs)
	v.groups(obs)
	v.environment(obs)
	if len(v.problems) > 0 {
		v.section("Other problems")
		for _, p := range v.problems {
			v.item("! %s: %s", p.Layer, p.Message)
		}
	}
	if len(obs.Warnings) > 0 {
		v.section("Warnings (could not read everything)")
		for _, w := range obs.Warnings {
			if w.Path != "" {
				v.item("%s: %s", w.Path, w.Message)
			} else {
				v.item("%s", w.Message)
			}
		}
	}
	return v.err
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func (v *observeHuman) os(obs *facts.Observation) {
	o := obs.OS
	v.section("OS")
	name := o.Name
	if name == "" {
		name = strings.TrimSpace(o.ID + " " + o.VersionID)
	}
	family := map[string]string{"deb": "Debian family, dpkg", "rpm": "RPM family"}[o.Family]
	v.item("%s  (id %s, version %s; %s)", orUnknown(name), orUnknown(o.ID), orUnknown(o.VersionID), orUnknown(family))
	if o.Arch != "" {
		v.item("architecture %s", o.Arch)
	}
	v.initProcess(obs.Init)
	v.flag("os")
}

// initProcess says what process 1 is, and so whether systemd takes a
// changed setting now or at the next boot.
func (v *observeHuman) initProcess(in facts.Init) {
	switch {
	case in.Systemd:
		v.item("init: systemd, process 1 of the running system")
	case !in.Live && in.PID1 != "":
		v.item("init: %s per /proc/1/comm; not the running system, so systemd settings take effect at its next boot", in.PID1)
	case !in.Live:
		v.item("init: none; not the running system, so systemd settings take effect at its next boot")
	case in.PID1 == "":
		v.item("init: unknown (no /proc/1/comm), so systemd settings take effect at the next boot with systemd")
	default:
		v.item("init: %s, not systemd, so systemd settings take effect only at a boot with systemd", in.PID1)
	}
}

func (v *observeHuman) kernel(obs *facts.Observation) {
	k := obs.Kernel
	v.section("Kernel")
	v.item("running %s, Secure Boot %s", orUnknown(k.Release), orUnknown(k.SecureBoot))
	if len(k.Loaded) == 0 {
		v.item("loaded GPU modules: none")
	} else {
		var names []string
		for _, m := range k.Loaded {
			s := m.Name
			if m.Taints != "" {
				s += " (" + m.Taints + ")"
			}
			names = append(names, s)
		}
		v.item("loaded GPU modules: %s", strings.Join(names, ", "))
	}
	if len(k.Blacklists) == 0 {
		v.item("blacklisted: nothing GPU-related")
	}
	for _, b := range k.Blacklists {
		where := b.File
		if b.Line > 0 {
			where = fmt.Sprintf("%s:%d", b.File, b.Line)
		}
		v.item("blacklisted: %s (%s, %s)", b.Module, b.Directive, where)
	}
	if ir := k.Initramfs; ir != nil {
		v.item("initramfs %s, built %s", ir.Path, ir.ModTime.Format(time.DateTime))
	}
	for _, ik := range k.Installed {
		var notes []string
		if ik.Running {
			notes = append(notes, "running")
		}
		if ik.Headers {
			notes = append(notes, "headers installed")
		} else {
			notes = append(notes, "no headers")
		}
		for _, m := range ik.NvidiaModules {
			s := "module " + m.Path
			if m.Version != "" {
				s += " " + m.Version
			}
			notes = append(notes, s)
		}
		for _, d := range ik.DKMS {
			state := "built"
			if !d.Built {
				state = "not built"
			}
			notes = append(notes, fmt.Sprintf("dkms %s/%s %s", d.Module, d.Version, state))
		}
		v.item("kernel %s: %s", ik.Release, strings.Join(notes, "; "))
	}
	v.flag("kernel")
}

func (v *observeHuman) gpus(obs *facts.Observation) {
	v.section("GPUs on the PCI bus")
	if len(obs.PCI) == 0 {
		v.item("no NVIDIA GPU")
	}
	for _, d := range obs.PCI {
		model := d.Model
		if model == "" {
			model = "unknown model"
		}
		if d.Architecture != "" {
			model += " (" + d.Architecture
			if d.ComputeCapability != "" {
				model += ", compute capability " + d.ComputeCapability
			}
			model += ")"
		}
		drv := d.Driver
		if drv == "" {
			drv = "none"
		}
		v.item("%s  %04x:%04x  %s  driver: %s", d.Address, d.VendorID, d.DeviceID, model, drv)
	}
	v.flag("pci")
}

func (v *observeHuman) nvml(obs *facts.Observation) {
	n := obs.NVML
	v.section("NVML")
	if n.Status != "ok" {
		v.item("%s: %s", strings.ReplaceAll(n.Status, "_", " "), n.Error)
		v.flag("nvml")
		return
	}
	v.item("driver %s, CUDA driver API %s, NVML %s", orUnknown(n.DriverVersion), orUnknown(n.CUDADriverVersion), orUnknown(n.NVMLVersion))
	for _, d := range n.Devices {
		var modes []string
		for _, m := range []struct{ name, val string }{{"persistence", d.PersistenceMode}, {"compute", d.ComputeMode}, {"MIG", d.MIGMode}} {
			if m.val != "" {
				modes = append(modes, m.name+" "+m.val)
			}
		}
		if d.MIGDevices > 0 {
			modes = append(modes, fmt.Sprintf("%d MIG devices", d.MIGDevices))
		}
		v.item("%d  %s  %s  %s  memory %s (%s used)  compute capability %s  %s",
			d.Index, d.Name, d.UUID, d.PCIBusID, bytesText(d.MemoryTotal), bytesText(d.MemoryUsed), orUnknown(d.ComputeCapability), strings.Join(modes, ", "))
		for _, p := range d.Processes {
			v.item("   process %d %s  %s", p.PID, p.Name, bytesText(p.UsedMemory))
		}
	}
	v.flag("nvml")
}

func bytesText(b uint64) string {
	const gib = 1 << 30
	if b >= gib {
		return fmt.Sprintf("%.1f GiB", float64(b)/gib)
	}
	return fmt.Sprintf("%d MiB", b>>20)
}

func (v *observeHuman) driver(obs *facts.Observation) {
	d := obs.Driver
	v.section("Driver")
	if d.ModuleVersion == "" {
		v.item("kernel module: not loaded")
	} else {
		flavor := d.ModuleFlavor
		if flavor == "" {
			flavor = "flavour unknown"
		}
		v.item("kernel module %s (%s; from %s)", d.ModuleVersion, flavor, d.ModuleVersionFrom)
	}
	if len(d.Libraries) == 0 {
		v.item("libnvidia-ml: not installed")
	}
	for _, l := range d.Libraries {
		v.item("library %s (%s)", l.Version, l.Path)
	}
	if d.LibraryVersion != "" {
		v.item("libnvidia-ml.so.1 leads to %s", d.LibraryVersion)
	}
	v.flag("driver")
}

func (v *observeHuman) devices(obs *facts.Observation) {
	v.section("Device nodes")
	if len(obs.DeviceNodes) == 0 {
		v.item("no /dev/nvidia* nodes")
	}
	for _, n := range obs.DeviceNodes {
		kind := "not a character device"
		if n.Char {
			kind = fmt.Sprintf("char %d:%d", n.Major, n.Minor)
		}
		group := n.Group
		if group == "" {
			group = fmt.Sprint(n.GID)
		}
		v.item("%s  %s  mode %s  uid %d  group %s", n.Path, kind, n.Mode, n.UID, group)
	}
	v.flag("devices")
}

func (v *observeHuman) packages(obs *facts.Observation) {
	p := obs.Packages
	v.section("Packages")
	if p.Manager == "" {
		v.item("no package database gpuenv reads")
		v.flag("packages")
		return
	}
	v.item("%s: %d packages, %d GPU-related", p.Manager, p.Total, len(p.Packages))
	for _, pkg := range p.Packages {
		var notes []string
		if pkg.State != "" && pkg.State != facts.StateInstalled {
			notes = append(notes, string(pkg.State))
		}
		if pkg.Hold {
			notes = append(notes, "held")
		}
		line := pkg.Name + " " + pkg.Version
		if pkg.Architecture != "" {
			line += " " + pkg.Architecture
		}
		if len(notes) > 0 {
			line += " (" + strings.Join(notes, ", ") + ")"
		}
		v.item("%s", line)
	}
	v.flag("packages")
}

func (v *observeHuman) repositories(obs *facts.Observation) {
	v.section("Package repositories")
	if len(obs.Repositories) == 0 {
		v.item("none enabled")
	}
	for _, r := range obs.Repositories {
		where := r.File
		if r.ID != "" {
			where += " [" + r.ID + "]"
		}
		what := slices.Concat(r.URIs, r.Suites, r.Components)
		v.item("%s: %s", where, strings.Join(what, " "))
	}
	v.flag("repositories")
}

func (v *observeHuman) cuda(obs *facts.Observation) {
	c := obs.CUDA
	v.section("CUDA toolkits")
	if len(c.Toolkits) == 0 {
		v.item("none")
	}
	for _, t := range c.Toolkits {
		line := fmt.Sprintf("%s %s (from %s, %s layout)", t.Path, orUnknown(t.Version), orUnknown(t.VersionFrom), orUnknown(t.Layout))
		if t.Nvcc != "" {
			line += ", nvcc " + t.Nvcc
		} else {
			line += ", no nvcc"
		}
		if t.Package != "" {
			line += ", package " + t.Package
		}
		v.item("%s", line)
	}
	if c.Default != "" {
		v.item("/usr/local/cuda -> %s", c.Default)
	}
	v.flag("cuda")
}

func (v *observeHuman) cudnn(obs *facts.Observation) {
	v.section("cuDNN")
	if len(obs.CuDNN.Installs) == 0 {
		v.item("none")
	}
	for _, i := range obs.CuDNN.Installs {
		line := orUnknown(i.Version)
		if i.CUDAMajor != "" {
			line += " for CUDA " + i.CUDAMajor
		}
		if i.Header != "" {
			line += ", header " + i.Header
		}
		if len(i.Libraries) > 0 {
			line += fmt.Sprintf(", %d libraries (%s …)", len(i.Libraries), i.Libraries[0])
		}
		if i.Package != "" {
			line += ", package " + i.Package
		}
		v.item("%s", line)
	}
	v.flag("cudnn")
}

func (v *observeHuman) python(obs *facts.Observation) {
	v.section("Python environments")
	if len(obs.Python) == 0 {
		v.item("none found")
	}
	for _, e := range obs.Python {
		kind := "system"
		if e.Virtual {
			kind = "venv"
		}
		v.item("%s (Python %s, %s, prefix %s)", e.Interpreter, orUnknown(e.Version), kind, e.Prefix)
		if len(e.Frameworks) == 0 {
			v.item("   no framework")
		}
		for _, f := range e.Frameworks {
			var notes []string
			switch {
			case f.CPUOnly:
				notes = append(notes, "CPU only")
			case f.CUDA != "":
				notes = append(notes, "CUDA "+f.CUDA)
			}
			if f.CuDNN != "" {
				notes = append(notes, "cuDNN "+f.CuDNN)
			}
			if f.Installer != "" {
				notes = append(notes, "via "+f.Installer)
			}
			for _, p := range f.Plugins {
				notes = append(notes, "plugin "+p.Path+" "+p.Version)
			}
			v.item("   %s %s (%s)", f.Name, f.Version, strings.Join(notes, ", "))
		}
	}
	v.flag("python", "framework")
}

// gpuGroups are the groups whose members can reach GPU device nodes on
// the distributions gpuenv knows; the full list is in --json.
var gpuGroups = []string{"video", "render", "nvidia"}

func (v *observeHuman) groups(obs *facts.Observation) {
	v.section("Groups")
	shown := 0
	for _, g := range obs.Groups {
		if !slices.Contains(gpuGroups, g.Name) {
			continue
		}
		shown++
		members := append(slices.Clone(g.Members), g.PrimaryOf...)
		list := "no members"
		if len(members) > 0 {
			list = strings.Join(members, ", ")
		}
		v.item("%s (gid %d): %s", g.Name, g.GID, list)
	}
	if shown == 0 {
		v.item("no video, render or nvidia group (%d groups in all)", len(obs.Groups))
	}
	v.flag("groups")
}

func (v *observeHuman) environment(obs *facts.Observation) {
	e := obs.Environment
	v.section("Environment")
	if len(e.Variables) == 0 {
		v.item("no GPU-related variables set system-wide")
	}
	for _, a := range e.Variables {
		v.item("%s=%s  (%s:%d)", a.Name, a.Value, a.File, a.Line)
	}
	var dirs []string
	for _, p := range e.LoaderPaths {
		dirs = append(dirs, p.Dir)
	}
	if len(dirs) > 0 {
		v.item("loader paths: %s", strings.Join(dirs, ", "))
	}
	for _, m := range e.Managed {
		v.item("gpuenv file %s", m)
	}
	v.flag("environment")
}
