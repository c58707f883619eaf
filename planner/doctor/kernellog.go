package doctor

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuenv/gpuenv/planner/compat"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/spec/lazyregexp"
	"github.com/gpuenv/gpuenv/spec/version"
)

// novaDrivers are the names the in-tree nova driver is bound under: the
// kernel registers its PCI driver as "NovaCore" (the name of
// drivers/gpu/nova-core/nova_core.rs's module_pci_driver!, and what NVRM
// names in "GPU … is already bound to NovaCore"); its module is
// nova_core.
var novaDrivers = []string{"NovaCore", "nova_core", "nova-core"}

func isNova(driver string) bool { return slices.Contains(novaDrivers, driver) }

// logEvents are the kernel log's events of the given kinds.
func (d *doctor) logEvents(kinds ...string) []facts.KernelEvent {
	l := d.obs.Kernel.Log
	if l == nil {
		return nil
	}
	var out []facts.KernelEvent
	for _, e := range l.Events {
		if slices.Contains(kinds, e.Kind) {
			out = append(out, e)
		}
	}
	return out
}

// eventText is an event as evidence: where it was logged and what it says.
func eventText(e facts.KernelEvent) string {
	s := e.Source + ": NVRM: " + e.Message
	if e.Count > 1 {
		s += fmt.Sprintf(" (logged %d times)", e.Count)
	}
	return s
}

// logGPU is a GPU the judgements below weigh: from the PCI bus, or from
// the kernel log where the bus is not visible (a root's files).
type logGPU struct {
	address string
	gpu     compat.GPU
	known   bool
}

func (g logGPU) name() string {
	if g.known {
		return fmt.Sprintf("%s (%s, %s)", g.address, orUnknown(g.gpu.Model), archTitle(g.gpu.Arch))
	}
	return g.address
}

func archTitle(name string) string {
	if a, ok := compat.Arch(name); ok {
		return a.Title
	}
	return name
}

// gpusForLog lists the host's GPUs with their table rows.
func (d *doctor) gpusForLog() []logGPU {
	if d.logGPUs != nil {
		// Three checks ask; the answer is the facts'.
		return d.logGPUs
	}
	out := make([]logGPU, 0, len(d.obs.PCI))
	seen := map[string]bool{}
	for _, p := range d.obs.PCI {
		g, ok := compat.GPUByPCIID(p.DeviceID)
		out = append(out, logGPU{address: p.Address, gpu: g, known: ok})
		seen[p.Address] = true
	}
	for _, e := range d.logEvents(facts.EventOpenModulesRequired, facts.EventGSPRequired, facts.EventUnsupportedGPU) {
		if seen[e.PCIAddress] || e.PCIID == "" {
			continue
		}
		seen[e.PCIAddress] = true
		_, dev, _ := strings.Cut(e.PCIID, ":")
		id, err := strconv.ParseUint(dev, 16, 16)
		if err != nil {
			continue
		}
		g, ok := compat.GPUByPCIID(uint16(id))
		out = append(out, logGPU{address: e.PCIAddress, gpu: g, known: ok})
	}
	d.logGPUs = out
	return out
}

// openNeed says what a GPU needs of the module flavour.
func openNeed(g compat.GPU) compat.OpenModules {
	a, ok := compat.Arch(g.Arch)
	if !ok {
		return ""
	}
	if g.OpenRequired {
		return compat.OpenRequired
	}
	return a.Open
}

// driverPackageRe matches the packages whose version is the driver's own.
// The names are grouped by their common start, so that the matcher
// leaves a name at its first letter that no group takes.
var driverPackageRe = lazyregexp.New(`^(?:nvidia-(?:driver(?:-[0-9]+)?(?:-server)?(?:-open)?|utils-[0-9]+(?:-server)?|dkms-[0-9]+(?:-server)?(?:-open)?|kernel-common-[0-9]+(?:-server)?|headless(?:-no-dkms)?-[0-9]+(?:-server)?(?:-open)?|open(?:-[0-9]+)?|kernel-dkms|open-kernel-dkms|smi)|libnvidia-(?:compute-[0-9]+(?:-server)?|ml1)|cuda-drivers(?:-[0-9]+)?|kmod-nvidia-(?:latest|open)-dkms)$`)

// nameBranch is the branch a package's name carries ("565" of
// nvidia-utils-565-server).
var nameBranch = lazyregexp.New(`-([0-9]{3})(-|$)`)

// upstreamVersion is a package version's driver part: "580.95.05" of
// "580.95.05-0ubuntu0.24.04.2" or "3:580.65.06-1.el9".
func upstreamVersion(v string) string {
	if _, rest, ok := strings.Cut(v, ":"); ok {
		v = rest
	}
	end := strings.IndexFunc(v, func(r rune) bool { return r != '.' && (r < '0' || r > '9') })
	if end >= 0 {
		v = v[:end]
	}
	return strings.Trim(v, ".")
}

// driverPackages are the installed packages that carry the driver, with
// evidence that names each and, for a transitional package whose name
// carries another branch than its version, says so.
func (d *doctor) driverPackages() (versions []version.Version, evidence []string) {
	for _, p := range d.obs.Packages.Packages {
		if p.State != facts.StateInstalled || !driverPackageRe.MatchString(p.Name) {
			continue
		}
		up := upstreamVersion(p.Version)
		v, err := version.Parse(up)
		if err != nil || v.Major() < 100 {
			continue
		}
		versions = append(versions, v)
		s := fmt.Sprintf("package %s %s", p.Name, p.Version)
		if m := nameBranch.FindStringSubmatch(p.Name); m != nil && m[1] != strconv.FormatUint(v.Major(), 10) {
			// Ubuntu turns a retired branch's packages into transitional
			// ones that install a newer branch (compat-facts §7:
			// nvidia-utils-565-server depends on nvidia-utils-580-server).
			s += fmt.Sprintf(": its name says %s, it installs %d (a transitional package)", m[1], v.Major())
		}
		evidence = append(evidence, s)
	}
	return versions, evidence
}

// installedFlavor is the flavour of the nvidia module on the host and
// the evidence for it: the loaded module's, else the one the kernel log
// shows loading in this boot, else the one the driver's refusal implies,
// else what the installed packages' names say.
func (d *doctor) installedFlavor() (string, string) {
	dr := d.obs.Driver
	if dr.ModuleFlavor != "" {
		from := dr.ModuleVersionFrom
		if from == "" {
			from = "/proc/driver/nvidia/version"
		}
		return dr.ModuleFlavor, fmt.Sprintf("%s: the %s nvidia module %s is loaded", from, dr.ModuleFlavor, dr.ModuleVersion)
	}
	if l := d.obs.Kernel.Log; l != nil && l.Module != nil {
		return l.Module.Flavor, fmt.Sprintf("%s: the %s nvidia module %s was loaded in this boot", l.Module.Source, l.Module.Flavor, l.Module.Version)
	}
	if e := d.logEvents(facts.EventOpenModulesRequired); len(e) > 0 {
		return "proprietary", eventText(e[0])
	}
	if e := d.logEvents(facts.EventGSPRequired); len(e) > 0 {
		return "open", eventText(e[0])
	}
	for _, p := range d.obs.Packages.Packages {
		if p.State != facts.StateInstalled {
			continue
		}
		n := p.Name
		switch {
		case n == "nvidia-open" || strings.HasPrefix(n, "nvidia-open-") || n == "kmod-nvidia-open-dkms" ||
			(strings.HasPrefix(n, "nvidia-dkms-") || strings.HasPrefix(n, "nvidia-driver-") || strings.HasPrefix(n, "linux-modules-nvidia-")) && strings.HasSuffix(n, "-open"):
			return "open", fmt.Sprintf("package %s %s: the open modules", n, p.Version)
		}
	}
	for _, p := range d.obs.Packages.Packages {
		if p.State != facts.StateInstalled {
			continue
		}
		n := p.Name
		if n == "nvidia-kernel-dkms" || n == "kmod-nvidia-latest-dkms" || strings.HasPrefix(n, "nvidia-dkms-") && !strings.HasSuffix(n, "-open") {
			return "proprietary", fmt.Sprintf("package %s %s: the proprietary modules", n, p.Version)
		}
	}
	return "", ""
}

// driverFlavor judges the module flavour against each GPU's generation:
// Blackwell (and GH200) run only under the open modules, GPUs before
// Turing only under the proprietary ones. The driver says so in the
// kernel log when it refuses a GPU; the table says so before it loads.
func (d *doctor) driverFlavor() {
	c := Check{ID: "driver.flavor", Group: GroupKernel}
	if hidden, why := d.hostKernelHidden(); hidden {
		d.skip(c, why)
		return
	}
	gpus := d.gpusForLog()
	if len(gpus) == 0 {
		d.skip(c, "No GPU to match a module flavour to")
		return
	}
	flavor, from := d.installedFlavor()
	if flavor == "" {
		d.skip(c, "No module flavour known: none loaded, none in the kernel log, no driver package that names one")
		return
	}
	c.Evidence = append(c.Evidence, from)
	var needOpen, needProp []string
	for _, g := range gpus {
		switch openNeed(g.gpu) {
		case compat.OpenRequired:
			needOpen = append(needOpen, g.name())
		case compat.OpenUnsupported:
			needProp = append(needProp, g.name())
		}
	}
	// The driver's own word, which holds also for a GPU the table does
	// not know.
	evidence := func(e facts.KernelEvent) {
		if t := eventText(e); !slices.Contains(c.Evidence, t) {
			c.Evidence = append(c.Evidence, t)
		}
	}
	for _, e := range d.logEvents(facts.EventOpenModulesRequired) {
		evidence(e)
		if !slices.ContainsFunc(needOpen, func(s string) bool { return strings.HasPrefix(s, e.PCIAddress) }) {
			needOpen = append(needOpen, e.PCIAddress)
		}
	}
	for _, e := range d.logEvents(facts.EventGSPRequired) {
		evidence(e)
		if !slices.ContainsFunc(needProp, func(s string) bool { return strings.HasPrefix(s, e.PCIAddress) }) {
			needProp = append(needProp, e.PCIAddress)
		}
	}
	reboot := []string{"reboot"}
	switch {
	case len(needOpen) > 0 && len(needProp) > 0:
		c.Status = Problem
		c.Summary = fmt.Sprintf("No module flavour drives every GPU: %s need the open modules, %s the proprietary ones", strings.Join(needOpen, ", "), strings.Join(needProp, ", "))
		c.Fix = &Fix{Text: "One host cannot drive both with one driver: move the older GPUs to another host, or pass one kind through to a virtual machine."}
	case flavor == "proprietary" && len(needOpen) > 0:
		c.Status = Problem
		c.Summary = fmt.Sprintf("The proprietary nvidia modules cannot drive %s: it requires the open kernel modules", strings.Join(needOpen, ", "))
		c.Fix = &Fix{Text: "Install the open kernel modules of the same branch in place of the proprietary ones (Ubuntu: nvidia-driver-<branch>-open; NVIDIA's repository: nvidia-open) and reboot; with gpuenv:",
			Spec: "driver {\n  kernel_modules = \"open\"\n}", Commands: reboot}
	case flavor == "open" && len(needProp) > 0:
		c.Status = Problem
		c.Summary = fmt.Sprintf("The open nvidia modules cannot drive %s: GPUs before Turing have no GSP and need the proprietary modules", strings.Join(needProp, ", "))
		c.Fix = &Fix{Text: "Install the proprietary kernel modules of the same branch in place of the open ones (Ubuntu: nvidia-driver-<branch> without -open; Fedora with RPM Fusion or negativo17: the kernel, not kernel-open, akmod) and reboot; with gpuenv:",
			Spec: "driver {\n  kernel_modules = \"proprietary\"\n}", Commands: reboot}
	default:
		c.Status = OK
		c.Summary = fmt.Sprintf("The %s modules drive every GPU's generation", flavor)
	}
	d.add(c)
}

// driverBranch judges the installed driver's branch against each GPU's
// generation: a branch that dropped it (Kepler after 470; Maxwell,
// Pascal and Volta after 580) or predates it leaves the GPU unused. The
// version is the loaded module's, else the one the log shows loading,
// else the refusing driver's, else the installed packages' (whose names
// may carry an older branch than they install).
func (d *doctor) driverBranch() {
	c := Check{ID: "driver.branch", Group: GroupKernel}
	if d.inWSL() {
		d.skip(c, "WSL: the Windows driver serves the GPU")
		return
	}
	gpus := d.gpusForLog()
	refusals := d.logEvents(facts.EventLegacyGPU, facts.EventUnsupportedGPU)
	var vers []version.Version
	var from []string
	switch dr := d.obs.Driver; {
	case dr.ModuleVersion != "":
		if v, err := version.Parse(dr.ModuleVersion); err == nil {
			vers = append(vers, v)
			from = append(from, fmt.Sprintf("%s: nvidia module %s", dr.ModuleVersionFrom, dr.ModuleVersion))
		}
	case d.obs.Kernel.Log != nil && d.obs.Kernel.Log.Module != nil:
		m := d.obs.Kernel.Log.Module
		if v, err := version.Parse(m.Version); err == nil {
			vers = append(vers, v)
			from = append(from, fmt.Sprintf("%s: nvidia module %s loaded in this boot", m.Source, m.Version))
		}
	}
	pv, pe := d.driverPackages()
	if len(vers) == 0 {
		vers = pv
	}
	from = append(from, pe...)
	if len(vers) == 0 {
		for _, e := range refusals {
			if v, err := version.Parse(e.Driver); err == nil {
				vers = append(vers, v)
			}
		}
	}
	if len(gpus) == 0 && len(refusals) == 0 {
		d.skip(c, "No GPU to match a driver branch to")
		return
	}
	if len(vers) == 0 {
		why := "no module is loaded"
		if d.moduleLoaded() {
			why = "the loaded module names none"
		}
		d.skip(c, "No driver version known: "+why+", nor does the kernel log or a driver package")
		return
	}
	c.Evidence = append(c.Evidence, from...)
	// The newest installed version is what a reboot loads.
	drv := slices.MaxFunc(vers, version.Version.Compare)
	var dropped []string
	for _, g := range gpus {
		if !g.known {
			continue
		}
		if ok, why := compat.GPUSupportedBy(g.gpu, drv); !ok {
			dropped = append(dropped, g.name())
			c.Evidence = append(c.Evidence, fmt.Sprintf("%s: driver %s: %s", g.address, drv, why))
		}
	}
	for _, e := range refusals {
		c.Evidence = append(c.Evidence, eventText(e))
		who := e.PCIAddress
		if who == "" {
			who = e.GPUName
		}
		if !slices.ContainsFunc(dropped, func(s string) bool { return strings.HasPrefix(s, who) }) {
			dropped = append(dropped, who)
		}
	}
	if len(dropped) == 0 {
		c.Status = OK
		c.Summary = fmt.Sprintf("Driver %s supports every GPU's generation", drv)
		d.add(c)
		return
	}
	c.Status = Problem
	c.Summary = fmt.Sprintf("Driver %s does not support %s: the driver ignores it", drv, strings.Join(dropped, ", "))
	branch := d.recommendedBranch()
	for _, e := range refusals {
		if e.Kind == facts.EventLegacyGPU {
			if b, err := strconv.ParseUint(e.Branch, 10, 64); err == nil && (branch == 0 || b < branch) {
				branch = b
			}
		}
	}
	if branch != 0 && branch != drv.Major() {
		c.Fix = &Fix{Text: fmt.Sprintf("Install the %d branch, the newest that supports every GPU here, and keep the package manager from upgrading past it (Ubuntu: nvidia-driver-%d; NVIDIA's repository: nvidia-driver-pinning-%d first); with gpuenv, which pins it:", branch, branch, branch),
			Spec: fmt.Sprintf("driver {\n  version = \"%d.*\"\n}", branch), Commands: []string{"reboot"}}
	} else {
		c.Fix = &Fix{Text: "No driver branch in gpuenv's tables supports every GPU here; install the legacy branch NVIDIA's message names, or move the older GPU to another host."}
	}
	d.add(c)
}

// kernelNVRM reports the driver's failures to initialise a GPU that the
// checks above do not already explain, and the in-tree nova driver's
// hold on a GPU the bus does not show.
func (d *doctor) kernelNVRM() {
	c := Check{ID: "kernel.nvrm", Group: GroupKernel}
	l := d.obs.Kernel.Log
	if l == nil {
		d.skip(c, "No kernel log to read (none in the root, or not readable)")
		return
	}
	for _, s := range l.Sources {
		t := fmt.Sprintf("%s: %s read", s.Path, bytesText(uint64(s.Bytes)))
		switch {
		case s.Error != "":
			t = s.Path + ": " + s.Error
		case s.BootStart:
			t += ", back to the start of the boot"
		case s.Truncated:
			t += ", its end only (bounded)"
		}
		c.Evidence = append(c.Evidence, t)
	}
	explained := map[string]bool{}
	for _, e := range d.logEvents(facts.EventOpenModulesRequired, facts.EventGSPRequired, facts.EventUnsupportedGPU) {
		explained[e.PCIAddress] = true
	}
	legacy := len(d.logEvents(facts.EventLegacyGPU)) > 0
	var nova, failed []facts.KernelEvent
	for _, e := range d.logEvents(facts.EventBoundToNova) {
		if !slices.ContainsFunc(d.obs.PCI, func(p facts.PCIDevice) bool { return p.Address == e.PCIAddress && isNova(p.Driver) }) {
			nova = append(nova, e)
		}
	}
	for _, e := range d.logEvents(facts.EventRmInitFailed) {
		if !explained[e.PCIAddress] && !legacy {
			failed = append(failed, e)
		}
	}
	switch {
	case len(nova) > 0:
		c.Status = Problem
		for _, e := range nova {
			c.Evidence = append(c.Evidence, eventText(e))
		}
		c.Summary = "The kernel's in-tree nova driver holds the GPU: the nvidia driver cannot take it (\"already bound to NovaCore\")"
		c.Fix = novaFix(d)
	case len(failed) > 0:
		c.Status = Problem
		var who []string
		for _, e := range failed {
			c.Evidence = append(c.Evidence, eventText(e))
			who = append(who, fmt.Sprintf("%s (%s)", orUnknown(e.PCIAddress), e.Code))
		}
		c.Summary = "The nvidia driver could not initialise " + strings.Join(who, ", ") + " (RmInitAdapter failed)"
		c.Fix = &Fix{Text: "The NVRM lines logged just before RmInitAdapter name the cause (journalctl -k -b | grep NVRM, or dmesg); the checks above found none they know. Where those lines speak of the GSP firmware, a full power cycle (not a reboot) and the newest driver of the branch are where to start."}
		if gsp := d.logEvents(facts.EventGSPInitFailed); len(gsp) > 0 {
			c.Evidence = append(c.Evidence, eventText(gsp[0]))
			flavor, from := d.installedFlavor()
			if flavor == "open" && !slices.ContainsFunc(d.gpusForLog(), func(g logGPU) bool { return openNeed(g.gpu) == compat.OpenRequired }) {
				// The open modules always run the GSP firmware; the
				// proprietary ones can run without it
				// (NVreg_EnableGpuFirmware=0), as NVIDIA's maintainers
				// say in NVIDIA/open-gpu-kernel-modules#820, and
				// NVIDIA/open-gpu-kernel-modules#116 was mended by
				// going back to them.
				c.Evidence = append(c.Evidence, from)
				c.Fix = &Fix{Text: "The GSP firmware did not start under the open modules, which cannot run without it. The proprietary modules of the same branch drive this GPU and can run without the GSP firmware (options nvidia NVreg_EnableGpuFirmware=0); with gpuenv:",
					Spec: "driver {\n  kernel_modules = \"proprietary\"\n}", Commands: []string{"reboot"}}
			}
		}
	default:
		c.Status = OK
		c.Summary = "The kernel log of this boot has no refusal by the NVIDIA driver that the checks above do not cover"
	}
	d.add(c)
}

// novaFix keeps nova from claiming NVIDIA GPUs.
func novaFix(d *doctor) *Fix {
	return &Fix{Text: "Blacklist nova_core (and nova_drm) as nouveau is blacklisted, rebuild the initramfs and reboot:",
		Commands: []string{"printf 'blacklist nova_core\\nblacklist nova_drm\\n' > /etc/modprobe.d/blacklist-nova.conf", d.initramfsCommand(), "reboot"}}
}
