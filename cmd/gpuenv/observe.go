package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuenv/gpuenv/planner/doctor"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/finding"
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
	opts := hostOptions
	if g.debugging() {
		opts = append(slices.Clone(opts), host.WithCommandLog(g.logCommand))
	}
	h, err := host.New(g.Root, opts...)
	if err != nil {
		return nil, err
	}
	return h, checkRoot(h)
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
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := newObserveView(g)
			h, err := openHost(g)
			if err != nil {
				return err
			}
			// An interpreter not there yet is a fact of the host, which
			// the document records (a fleet's collector observes hosts
			// before their environments are made, and plan --facts
			// plans making them); anything else that is no interpreter
			// is refused.
			missing, err := missingPrograms(h, "--python", pythons)
			if err != nil {
				return err
			}
			for _, p := range missing {
				fmt.Fprintf(g.Stderr, "Warning: --python %s: no such file%s; the observation records that it is missing.\n", esc(p), insideRoot(h))
			}
			opts := providers.ObserveOptions{Pythons: pythons}
			if h.Live() {
				opts.Session = sessionVariables(g)
			}
			obs := providers.Observe(cmd.Context(), h, opts)
			attachVerified(g, h, obs)
			return v.Observation(obs)
		},
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
	problems []finding.Finding
}

var _ observeView = (*observeHuman)(nil)

// section starts a block of the output.
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
		// A warning is marked as the health section marks one.
		mark := "!"
		if p.Status == finding.Warning {
			mark = "~"
		}
		line := mark + " " + esc(p.Message())
		if v.color && p.Status != finding.Warning {
			line = "\x1b[31m" + line + "\x1b[0m"
		}
		v.printfEscaped("  %s\n", line)
		v.fix(p)
	}
	v.problems = rest
}

// fix prints, under a problem, a fix that Message leaves out: one with a
// spec or commands, which do not fit its line.
func (v *observeHuman) fix(p finding.Finding) {
	f := p.Fix
	if f == nil || p.Message() != p.Summary || f.Text == "" {
		return
	}
	v.item("    %s", f.Text)
	for _, line := range strings.Split(f.Spec, "\n") {
		if line != "" {
			v.item("      %s", line)
		}
	}
	for _, c := range f.Commands {
		v.item("    $ %s", c)
	}
}

// Observation prints obs, one section per layer, each with its problems.
func (v *observeHuman) Observation(obs *facts.Observation) error {
	v.problems = slices.Clone(obs.Problems)
	v.printf("Host %s\n", v.root)
	for _, sec := range []struct {
		title string
		show  func(*facts.Observation)
		// layers are those whose problems the section shows.
		layers []string
	}{
		{"OS", v.os, []string{"os"}},
		{"Where programs run", v.context, []string{"context"}},
		{"Kernel", v.kernel, []string{"kernel"}},
		{"GPUs on the PCI bus", v.gpus, []string{"pci"}},
		{"NVML", v.nvml, []string{"nvml"}},
		{"Driver", v.driver, []string{"driver"}},
		{"Device nodes", v.devices, []string{"devices"}},
		{"GPU health", v.health, nil},
		{"Packages", v.packages, []string{"packages"}},
		{"Package repositories", v.repositories, []string{"repositories"}},
		{"CUDA toolkits", v.cuda, []string{"cuda"}},
		{"cuDNN", v.cudnn, []string{"cudnn"}},
		{"Python environments", v.python, []string{"python", "framework"}},
		{"Dynamic loader", v.loader, []string{"loader"}},
		{"Groups", v.groups, []string{"groups"}},
		{"Environment", v.environment, []string{"environment"}},
	} {
		v.section(sec.title)
		sec.show(obs)
		v.flag(sec.layers...)
	}
	if len(v.problems) > 0 {
		v.section("Other problems")
		for _, p := range v.problems {
			v.item("! %s: %s", p.Layer, p.Message())
			v.fix(p)
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

// each shows every element of xs with show, or says empty when there is
// none.
func each[T any](v *observeHuman, xs []T, empty string, show func(T)) {
	if len(xs) == 0 {
		v.item("%s", empty)
	}
	for _, x := range xs {
		show(x)
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func (v *observeHuman) os(obs *facts.Observation) {
	o := obs.OS
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
	each(v, k.Blacklists, "blacklisted: nothing GPU-related", func(b facts.Blacklist) {
		where := b.File
		if b.Line > 0 {
			where = fmt.Sprintf("%s:%d", b.File, b.Line)
		}
		v.item("blacklisted: %s (%s, %s)", b.Module, b.Directive, where)
	})
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
}

func (v *observeHuman) gpus(obs *facts.Observation) {
	each(v, obs.PCI, "no NVIDIA GPU", func(d facts.PCIDevice) {
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
	})
}

func (v *observeHuman) nvml(obs *facts.Observation) {
	n := obs.NVML
	if n.Status != "ok" {
		v.item("%s: %s", strings.ReplaceAll(n.Status, "_", " "), n.Error)
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
}

// health shows each GPU's states in a line, and under it what doctor's
// GPU state checks find wrong with it, in their words.
func (v *observeHuman) health(obs *facts.Observation) {
	states := doctor.GPUStates(obs)
	each(v, states, "no GPU to judge", func(s doctor.GPUState) {
		name := s.Name
		if s.Model != "" {
			name += " " + s.Model
		}
		v.item("%s: %s", name, strings.Join(s.States, "; "))
		for _, f := range s.Findings {
			mark := "!"
			if f.Status == doctor.Warning {
				mark = "~"
			}
			line := mark + " " + esc(f.Text)
			if v.color && f.Status == doctor.Problem {
				line = "\x1b[31m" + line + "\x1b[0m"
			}
			v.printfEscaped("    %s\n", line)
		}
	})
	// The health rules' problems are the findings just shown under their
	// GPUs, in the same words.
	v.problems = slices.DeleteFunc(v.problems, func(p finding.Finding) bool { return p.Layer == "health" })
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
	if d.ModuleVersion == "" {
		v.item("kernel module: not loaded")
	} else {
		flavor := d.ModuleFlavor
		if flavor == "" {
			flavor = "flavour unknown"
		}
		v.item("kernel module %s (%s; from %s)", d.ModuleVersion, flavor, d.ModuleVersionFrom)
	}
	each(v, d.Libraries, "libnvidia-ml: not installed", func(l facts.Library) {
		v.item("library %s (%s)", l.Version, l.Path)
	})
	if d.LibraryVersion != "" {
		v.item("libnvidia-ml.so.1 leads to %s", d.LibraryVersion)
	}
}

func (v *observeHuman) devices(obs *facts.Observation) {
	each(v, obs.DeviceNodes, "no /dev/nvidia* nodes", func(n facts.DeviceNode) {
		kind := "not a character device"
		if n.Char {
			kind = fmt.Sprintf("char %d:%d", n.Major, n.Minor)
		}
		group := n.Group
		if group == "" {
			group = fmt.Sprint(n.GID)
		}
		v.item("%s  %s  mode %s  uid %d  group %s", n.Path, kind, n.Mode, n.UID, group)
	})
}

func (v *observeHuman) packages(obs *facts.Observation) {
	p := obs.Packages
	if p.Manager == "" {
		v.item("no package database gpuenv reads")
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
}

func (v *observeHuman) repositories(obs *facts.Observation) {
	each(v, obs.Repositories, "none enabled", func(r facts.Repository) {
		where := r.File
		if r.ID != "" {
			where += " [" + r.ID + "]"
		}
		what := slices.Concat(r.URIs, r.Suites, r.Components)
		v.item("%s: %s", where, strings.Join(what, " "))
	})
}

func (v *observeHuman) cuda(obs *facts.Observation) {
	c := obs.CUDA
	each(v, c.Toolkits, "none", func(t facts.Toolkit) {
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
	})
	if c.Default != "" {
		v.item("/usr/local/cuda -> %s", c.Default)
	}
}

func (v *observeHuman) cudnn(obs *facts.Observation) {
	each(v, obs.CuDNN.Installs, "none", func(i facts.CuDNNInstall) {
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
	})
}

func (v *observeHuman) python(obs *facts.Observation) {
	each(v, obs.Python, "none found", func(e facts.PythonEnv) {
		kind := "system"
		if e.Virtual {
			kind = "venv"
		}
		v.item("%s (Python %s, %s, prefix %s)", e.Interpreter, orUnknown(e.Version), kind, e.Prefix)
		each(v, e.Frameworks, "   no framework", func(f facts.Framework) {
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
		})
	})
}

// gpuGroups are the groups whose members can reach GPU device nodes on
// the distributions gpuenv knows; the full list is in --json.
var gpuGroups = []string{"video", "render", "nvidia"}

func (v *observeHuman) groups(obs *facts.Observation) {
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
}

func (v *observeHuman) environment(obs *facts.Observation) {
	e := obs.Environment
	each(v, e.Variables, "no GPU-related variables set system-wide", func(a facts.Assignment) {
		v.item("%s=%s  (%s:%d)", a.Name, a.Value, a.File, a.Line)
	})
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
}

// context shows where programs on the root run, one line per fact; the
// files each was read from are in --json.
func (v *observeHuman) context(obs *facts.Observation) {
	c := obs.Context
	line := orUnknown(c.Kind)
	if k := c.Container; k != nil {
		var notes []string
		if k.Rootless {
			notes = append(notes, "rootless")
		}
		if k.OverlayRoot {
			notes = append(notes, "overlay root")
		}
		notes = append(notes, "GPU device nodes "+yesNo(k.DeviceNodes), "driver libraries "+yesNo(k.DriverLibraries))
		if k.CUDAVersion != "" {
			notes = append(notes, "image CUDA "+k.CUDAVersion)
		}
		if k.RequireCUDA != "" {
			notes = append(notes, "requires "+k.RequireCUDA)
		}
		line = fmt.Sprintf("container (%s): %s", k.Engine, strings.Join(notes, ", "))
	}
	if len(c.Evidence) > 0 {
		line += fmt.Sprintf("  (from %s; --json names them)", count(len(c.Evidence), "fact", "facts"))
	}
	v.item("%s", line)
	if u := c.UserNamespace; u != nil {
		v.item("user namespace %q: %s owned by the overflow id %d", u.UIDMap, count(len(u.UnmappedNodes), "device node", "device nodes"), u.OverflowUID)
	}
	if j := c.Job; j != nil {
		gpus := "no GPU allocated"
		if len(j.GPUs) > 0 {
			gpus = "GPUs " + strings.Join(j.GPUs, ",")
		}
		node := ""
		if len(j.NodeGPUs) > 0 {
			node = fmt.Sprintf(" (the node declares %d)", len(j.NodeGPUs))
		}
		v.item("%s job %s: %s%s", j.Scheduler, j.ID, gpus, node)
	}
	if w := c.WSL; w != nil {
		v.item("WSL: /dev/dxg %s, %s of the Windows driver, %s of a Linux driver", presence(w.DXG), count(len(w.Libraries), "library", "libraries"), count(len(w.LinuxDriver), "libcuda file", "libcuda files"))
	}
	if s := c.Suspend; s != nil && s.CanSuspend {
		services := "no suspend services"
		if len(s.Services) > 0 {
			services = strings.Join(s.Services, ", ")
		}
		line := fmt.Sprintf("suspend: NVreg_PreserveVideoMemoryAllocations=%s, %s", orUnknown(s.PreserveVideoMemory), services)
		if s.Resumes > 0 {
			line += fmt.Sprintf(", resumed %s since boot", count(s.Resumes, "time", "times"))
		}
		v.item("%s", line)
	}
}

// loader shows the loader's cache and search path and, per consumer,
// how many of its libraries resolve; only libraries that are missing,
// come through LD_LIBRARY_PATH or hide another file get a line of their
// own (--json has every resolution).
func (v *observeHuman) loader(obs *facts.Observation) {
	l := obs.Loader
	cache := "absent"
	switch {
	case l.Cache.Error != "":
		cache = "unreadable: " + l.Cache.Error
	case l.Cache.Present:
		cache = count(l.Cache.Entries, "entry", "entries")
	case l.Cache.Simulated:
		cache = fmt.Sprintf("absent; ldconfig would write %s", count(l.Cache.Entries, "entry", "entries"))
	}
	v.item("cache %s: %s", orUnknown(l.Cache.Path), cache)
	for _, d := range l.Cache.Uncached {
		v.item("not in the cache: %s (%s)", d.Dir, d.From)
	}
	for _, d := range l.LibraryPath {
		v.item("LD_LIBRARY_PATH %s (%s)", d.Dir, d.From)
	}
	each(v, l.Consumers, "no framework, toolkit or program to resolve", func(c facts.LoaderResolution) {
		who := c.Subject
		if c.Kind == "framework" {
			who = c.Framework + " in " + c.Python
		}
		missing := 0
		for _, r := range c.Libraries {
			if r.Path == "" {
				missing++
			}
		}
		line := fmt.Sprintf("%s %s: %d of %s found", c.Kind, who, len(c.Libraries)-missing, count(len(c.Libraries), "library", "libraries"))
		v.item("%s", line)
		for _, r := range c.Libraries {
			switch {
			case r.Path == "":
				v.item("   %s: not found%s", r.Soname, elsewhereText(r.Elsewhere))
			case r.Via == "LD_LIBRARY_PATH" || len(r.Shadows) > 0:
				v.item("   %s → %s%s (%s)%s", r.Soname, r.Path, versionText(r.Version), r.Via, shadowText(r.Shadows))
			}
		}
	})
}

func versionText(v string) string {
	if v == "" {
		return ""
	}
	return " " + v
}

func shadowText(s []facts.LibraryCandidate) string {
	if len(s) == 0 {
		return ""
	}
	out := fmt.Sprintf(", hides %s%s", s[0].Path, versionText(s[0].Version))
	if len(s) > 1 {
		out += fmt.Sprintf(" and %d more", len(s)-1)
	}
	return out
}

func elsewhereText(paths []string) string {
	if len(paths) == 0 {
		return ""
	}
	return " (present in " + strings.Join(paths, ", ") + ", outside the search order)"
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func presence(b bool) string {
	if b {
		return "present"
	}
	return "absent"
}

// count is "1 library", "2 libraries".
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
