package doctor

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpuenv/gpuenv/planner/compat"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/spec/version"
)

// specBlacklistNouveau is the spec change that keeps nouveau off the GPU;
// gpuenv rebuilds the initramfs with it.
const specBlacklistNouveau = "driver {\n  blacklist_nouveau = true\n}"

func (d *doctor) pciGPUs() {
	o := d.obs
	c := Check{ID: "pci.gpus", Group: GroupPCI}
	switch {
	case d.inWSL() && !HasGPU(o):
		c.Status, c.Summary = Skipped, "WSL shows no PCI bus: the GPU is the Windows host's (context.wsl)"
	case !HasGPU(o):
		c.Status = Problem
		c.Summary = "No NVIDIA GPU on the PCI bus"
		c.Evidence = []string{"/sys/bus/pci/devices: no display or 3D controller of vendor 0x10de (NVIDIA)"}
		c.Fix = &Fix{Text: "Nothing on this host can use a GPU until one is present: in a virtual machine, pass the GPU through; on a cloud instance, choose a GPU instance type."}
	case len(o.PCI) == 0:
		c.Status = OK
		c.Summary = fmt.Sprintf("%s through NVML (the PCI bus is not visible here)", plural(len(o.NVML.Devices), "GPU"))
		for _, g := range o.NVML.Devices {
			c.Evidence = append(c.Evidence, fmt.Sprintf("NVML: GPU %d %s %s", g.Index, g.Name, g.PCIBusID))
		}
	default:
		c.Status = OK
		models := map[string]int{}
		var order []string
		for _, p := range o.PCI {
			m := orUnknown(p.Model)
			if models[m] == 0 {
				order = append(order, m)
			}
			models[m]++
			desc := fmt.Sprintf("/sys/bus/pci/devices/%s: %04x:%04x %s", p.Address, p.VendorID, p.DeviceID, m)
			if p.Architecture != "" {
				desc += fmt.Sprintf(" (%s, compute capability %s)", p.Architecture, orUnknown(p.ComputeCapability))
			}
			c.Evidence = append(c.Evidence, desc)
		}
		var parts []string
		for _, m := range order {
			parts = append(parts, fmt.Sprintf("%d × %s", models[m], m))
		}
		c.Summary = fmt.Sprintf("%s on the PCI bus: %s", plural(len(o.PCI), "NVIDIA GPU"), strings.Join(parts, ", "))
	}
	d.add(c)
}

func (d *doctor) pciDriver() {
	o := d.obs
	c := Check{ID: "pci.driver", Group: GroupPCI}
	if d.skipLive(c, "The driver each GPU is bound to") {
		return
	}
	if len(o.PCI) == 0 {
		c.Status = Skipped
		c.Summary = "No GPU on the PCI bus to look at"
		d.add(c)
		return
	}
	by := map[string][]string{}
	for _, p := range o.PCI {
		drv := p.Driver
		if drv == "" {
			drv = "none"
		}
		by[drv] = append(by[drv], p.Address)
		c.Evidence = append(c.Evidence, fmt.Sprintf("/sys/bus/pci/devices/%s/driver: %s", p.Address, drv))
	}
	switch {
	case len(by["nouveau"]) > 0:
		c.Status = Problem
		c.Summary = fmt.Sprintf("nouveau drives %s: the nvidia driver cannot take it", strings.Join(by["nouveau"], ", "))
		c.Fix = &Fix{Text: "Blacklist nouveau, rebuild the initramfs and reboot; with gpuenv:", Spec: specBlacklistNouveau, Commands: []string{"reboot"}}
	case len(by["nvidia"]) == len(o.PCI):
		c.Status = OK
		c.Summary = "Every GPU is bound to the nvidia driver"
	case len(by["vfio-pci"]) > 0:
		c.Status = Warning
		if len(by["nvidia"]) == 0 {
			c.Status = Problem
		}
		c.Summary = fmt.Sprintf("%s reserved for virtual machines (vfio-pci): programs on this host cannot use it", strings.Join(by["vfio-pci"], ", "))
		c.Fix = &Fix{Text: "If this host should use the GPU itself, remove its device id from vfio-pci.ids (kernel command line or /etc/modprobe.d) and reboot."}
	case len(by["none"]) > 0:
		c.Status = Problem
		c.Summary = fmt.Sprintf("No kernel driver is bound to %s", strings.Join(by["none"], ", "))
		c.Fix = &Fix{Text: "The nvidia module must be installed and loaded: the kernel-module checks say what stops it."}
	case len(novaBound(by)) > 0:
		c.Status = Problem
		c.Summary = fmt.Sprintf("nova_core, the kernel's newer in-tree NVIDIA driver, drives %s: the nvidia driver cannot take it (\"NVRM: GPU is already bound to NovaCore\")", strings.Join(novaBound(by), ", "))
		for _, e := range d.logEvents(facts.EventBoundToNova) {
			c.Evidence = append(c.Evidence, eventText(e))
		}
		c.Fix = novaFix(d)
	default:
		c.Status = Problem
		var others []string
		for drv, addrs := range by {
			if drv != "nvidia" {
				others = append(others, fmt.Sprintf("%s (%s)", strings.Join(addrs, ", "), drv))
			}
		}
		slices.Sort(others)
		c.Summary = "A GPU is bound to another driver: " + strings.Join(others, ", ")
		c.Fix = &Fix{Text: "Unbind it from that driver and keep that driver from claiming NVIDIA GPUs, then reboot."}
	}
	d.add(c)
}

// novaBound lists the GPUs bound to the nova driver, under any of its
// names.
func novaBound(by map[string][]string) []string {
	var out []string
	for _, n := range novaDrivers {
		out = append(out, by[n]...)
	}
	return out
}

// recommendedBranch is the newest driver branch that supports every GPU
// on the host, for a fix that installs a driver.
func (d *doctor) recommendedBranch() uint64 {
	branches := compat.DriverBranches()
	for _, b := range slices.Backward(branches) {
		all := true
		for _, p := range d.obs.PCI {
			if p.Architecture == "" {
				continue
			}
			if g, ok := compat.GPUByPCIID(p.DeviceID); ok {
				if ok, _ := compat.BranchSupportsArch(version.MustParse(strconv.FormatUint(b.Branch, 10)), g.Arch); !ok {
					all = false
				}
			}
		}
		if all {
			return b.Branch
		}
	}
	return 0
}

// runningKernel is the running kernel's entry among the installed ones.
func (d *doctor) runningKernel() *facts.InstalledKernel {
	for i, k := range d.obs.Kernel.Installed {
		if k.Running || k.Release == d.obs.Kernel.Release {
			return &d.obs.Kernel.Installed[i]
		}
	}
	return nil
}

// moduleFiles describes the nvidia module files of a kernel.
func moduleFiles(k *facts.InstalledKernel) []string {
	var out []string
	if k == nil {
		return nil
	}
	for _, m := range k.NvidiaModules {
		s := m.Path
		if m.Version != "" {
			s += " " + m.Version
		}
		out = append(out, s)
	}
	for _, b := range k.DKMS {
		state := "built"
		if !b.Built {
			state = "not built"
		}
		out = append(out, fmt.Sprintf("/var/lib/dkms/%s/%s/%s/%s: %s", b.Module, b.Version, k.Release, b.Arch, state))
	}
	return out
}

func (d *doctor) kernelModule() {
	c := Check{ID: "kernel.module", Group: GroupKernel}
	if d.skipLive(c, "The nvidia module for the running kernel") || d.skipUnpacked(c, "The nvidia module's files for the running kernel") {
		return
	}
	if d.inWSL() {
		c.Status, c.Summary = Skipped, "WSL needs no nvidia module: the Windows driver serves the GPU"
		d.add(c)
		return
	}
	if !d.hasGPU() {
		d.skip(c, "No GPU, so no driver is needed")
		return
	}
	for _, m := range d.obs.Kernel.Loaded {
		if strings.HasPrefix(m.Name, "nvidia") {
			s := "/proc/modules: " + m.Name
			if m.Taints != "" {
				s += " (" + m.Taints + ")"
			}
			c.Evidence = append(c.Evidence, s)
		}
	}
	dr := d.obs.Driver
	if d.moduleLoaded() {
		c.Status = OK
		c.Summary = "The nvidia kernel module is loaded"
		if dr.ModuleVersion != "" {
			c.Summary = fmt.Sprintf("The nvidia kernel module %s is loaded", dr.ModuleVersion)
			if dr.ModuleFlavor != "" {
				c.Summary += " (" + dr.ModuleFlavor + ")"
			}
			c.Evidence = append(c.Evidence, fmt.Sprintf("%s: %s", dr.ModuleVersionFrom, dr.ModuleVersion))
		}
		d.add(c)
		return
	}
	c.Status = Problem
	c.Summary = "The nvidia kernel module is not loaded"
	c.Evidence = append(c.Evidence, "/proc/modules: no nvidia module")
	files := moduleFiles(d.runningKernel())
	if len(files) > 0 {
		for _, f := range files {
			c.Evidence = append(c.Evidence, "installed for the running kernel: "+f)
		}
		c.Fix = &Fix{Text: "The module is installed for the running kernel; load it. If modprobe fails, the checks below (nouveau, Secure Boot) say why.", Commands: []string{"modprobe nvidia"}}
	} else {
		c.Evidence = append(c.Evidence, fmt.Sprintf("/lib/modules/%s: no nvidia module for the running kernel", d.obs.Kernel.Release))
		fix := &Fix{Text: "Install the NVIDIA driver; with gpuenv:"}
		if b := d.recommendedBranch(); b != 0 {
			fix.Spec = fmt.Sprintf("driver {\n  version           = \"%d.*\"\n  blacklist_nouveau = true\n}", b)
		} else {
			fix.Spec = specBlacklistNouveau
		}
		c.Fix = fix
	}
	d.add(c)
}

// nouveauBlacklists are the configuration entries that keep nouveau from
// loading.
func (d *doctor) nouveauBlacklists() []facts.Blacklist {
	var out []facts.Blacklist
	for _, b := range d.obs.Kernel.Blacklists {
		if b.Module == "nouveau" {
			out = append(out, b)
		}
	}
	return out
}

func blacklistText(b facts.Blacklist) string {
	where := b.File
	if b.Line > 0 {
		where = fmt.Sprintf("%s:%d", b.File, b.Line)
	}
	return fmt.Sprintf("%s: %s nouveau", where, b.Directive)
}

func (d *doctor) nouveauLoaded() bool { return NouveauLoaded(d.obs) }

// hostKernelHidden reports whether the kernel's configuration (modprobe
// files, initramfs, module trees, Secure Boot) belongs to another system
// than the root's files: a container's host, or WSL's.
func (d *doctor) hostKernelHidden() (bool, string) {
	switch {
	case d.inWSL():
		return true, "WSL: the kernel is Microsoft's and the GPU the Windows driver's"
	case d.obs.Context.Container != nil:
		return true, "A container: the kernel and its configuration are the host's, not visible here"
	}
	return false, ""
}

func (d *doctor) kernelNouveau() {
	c := Check{ID: "kernel.nouveau", Group: GroupKernel}
	if d.skipLive(c, "Whether nouveau holds the GPU") {
		return
	}
	if hidden, why := d.hostKernelHidden(); hidden && !d.nouveauLoaded() {
		c.Status, c.Summary = Skipped, why
		d.add(c)
		return
	}
	if !d.hasGPU() {
		d.skip(c, "No GPU for nouveau to take")
		return
	}
	bl := d.nouveauBlacklists()
	loaded := d.nouveauLoaded()
	if slices.ContainsFunc(d.obs.Kernel.Loaded, func(m facts.LoadedModule) bool { return m.Name == "nouveau" }) {
		c.Evidence = append(c.Evidence, "/proc/modules: nouveau loaded")
	} else {
		c.Evidence = append(c.Evidence, "/proc/modules: nouveau not loaded")
	}
	for _, p := range d.obs.PCI {
		if p.Driver == "nouveau" {
			c.Evidence = append(c.Evidence, p.Address+": bound to nouveau")
		}
	}
	for _, b := range bl {
		c.Evidence = append(c.Evidence, blacklistText(b))
	}
	if len(bl) == 0 {
		c.Evidence = append(c.Evidence, "no modprobe configuration or kernel parameter blacklists nouveau")
	}
	fix := &Fix{Text: "Blacklist nouveau and rebuild the initramfs; with gpuenv:", Spec: specBlacklistNouveau, Commands: []string{"reboot"}}
	switch {
	case loaded:
		c.Status = Problem
		c.Summary = "nouveau is loaded: the nvidia driver cannot take the GPU while it is"
		c.Fix = fix
	case len(bl) == 0:
		c.Status = Warning
		c.Summary = "nouveau is not loaded, but nothing blacklists it: it can take the GPU at the next boot"
		fix.Commands = nil
		c.Fix = fix
	default:
		c.Status = OK
		c.Summary = "nouveau is blacklisted and not loaded"
	}
	d.add(c)
}

func (d *doctor) kernelInitramfs() {
	c := Check{ID: "kernel.initramfs", Group: GroupKernel}
	if d.skipUnpacked(c, "The initramfs's nvidia and nouveau modules") {
		return
	}
	if hidden, why := d.hostKernelHidden(); hidden {
		c.Status, c.Summary = Skipped, why
		d.add(c)
		return
	}
	ir := d.obs.Kernel.Initramfs
	var files []facts.Blacklist
	for _, b := range d.nouveauBlacklists() {
		if b.Directive != "modprobe.blacklist" && !b.ModTime.IsZero() {
			files = append(files, b)
		}
	}
	if ir == nil || len(files) == 0 || !d.hasGPU() {
		c.Status = Skipped
		c.Summary = "No nouveau blacklist file and initramfs to compare"
		if len(files) > 0 {
			c.Summary = "The running kernel's initramfs was not found"
		}
		d.add(c)
		return
	}
	c.Evidence = append(c.Evidence, fmt.Sprintf("%s: built %s", ir.Path, ir.ModTime.UTC().Format(time.DateTime)))
	for _, b := range files {
		c.Evidence = append(c.Evidence, fmt.Sprintf("%s: modified %s", blacklistText(b), b.ModTime.UTC().Format(time.DateTime)))
	}
	if StaleNouveauBlacklist(d.obs) == nil {
		c.Status = OK
		c.Summary = "The initramfs was built after the nouveau blacklist"
		for _, b := range d.nouveauBlacklists() {
			if b.Directive == "modprobe.blacklist" {
				c.Evidence = append(c.Evidence, blacklistText(b))
				c.Summary = "nouveau is blacklisted on the kernel command line, which needs no initramfs"
			}
		}
		d.add(c)
		return
	}
	c.Status = Warning
	c.Summary = "The nouveau blacklist is newer than the initramfs: nouveau still loads from the initramfs at boot"
	if d.nouveauLoaded() {
		c.Status = Problem
		c.Summary = "nouveau is loaded although blacklisted: the blacklist is newer than the initramfs it loads from"
	}
	c.Fix = &Fix{Text: "Rebuild the initramfs and reboot (gpuenv does both for driver { blacklist_nouveau = true }):", Spec: specBlacklistNouveau, Commands: []string{d.initramfsCommand(), "reboot"}}
	d.add(c)
}

// mokKey is where the distribution's DKMS keeps the key it signs modules
// with.
func (d *doctor) mokKey() string {
	if d.obs.OS.ID == "ubuntu" {
		return "/var/lib/shim-signed/mok/MOK.der"
	}
	return "/var/lib/dkms/mok.pub"
}

func (d *doctor) kernelSecureBoot() {
	c := Check{ID: "kernel.secure-boot", Group: GroupKernel}
	if hidden, why := d.hostKernelHidden(); hidden {
		c.Status, c.Summary = Skipped, why
		d.add(c)
		return
	}
	sb := d.obs.Kernel.SecureBoot
	c.Evidence = []string{"EFI variable SecureBoot: " + orUnknownState(sb)}
	if sb == "enabled" && d.hasGPU() && d.skipLive(c, "Whether the kernel takes the module the plan loads under Secure Boot (it must be signed by an enrolled key)") {
		// The planner warns of a step that builds the module with DKMS
		// under Secure Boot (secure-boot-dkms).
		return
	}
	switch {
	case sb == "disabled":
		c.Status, c.Summary = OK, "Secure Boot is disabled: any module loads"
	case sb != "enabled":
		c.Status, c.Summary = Skipped, "Secure Boot state unknown (no EFI variables: BIOS boot, a container or an offline root)"
	case !d.hasGPU():
		c.Status, c.Summary = Skipped, "Secure Boot is enabled; no GPU needs a module"
	case d.moduleLoaded():
		c.Status, c.Summary = OK, "Secure Boot is enabled and the nvidia module is loaded: it is signed with a trusted key"
	default:
		files := moduleFiles(d.runningKernel())
		for _, f := range files {
			c.Evidence = append(c.Evidence, "installed for the running kernel: "+f)
		}
		c.Evidence = append(c.Evidence, "/proc/modules: no nvidia module")
		enroll := []string{"mokutil --import " + d.mokKey(), "reboot"}
		if pkg := d.signedModulePackage(); pkg != "" {
			// Canonical signed these with a key the kernel trusts: no
			// enrolment stands between them and the kernel.
			c.Evidence = append(c.Evidence, pkg+" is installed: Ubuntu's signed prebuilt modules")
			c.Status = Warning
			c.Summary = "Secure Boot is enabled and Ubuntu's signed nvidia module is installed but not loaded: it needs no key enrolment"
			c.Fix = &Fix{Text: "Load the module, or reboot:", Commands: []string{"modprobe nvidia"}}
			break
		}
		if len(files) == 0 {
			c.Status = Warning
			c.Summary = "Secure Boot is enabled: a driver built by DKMS loads only after its signing key is enrolled"
			c.Fix = &Fix{Text: "After installing the driver, enroll DKMS's key and confirm it in the MOK manager at the next boot; or install the distribution's signed prebuilt modules.", Commands: enroll}
		} else {
			c.Status = Problem
			c.Summary = "Secure Boot is enabled and the installed nvidia module is not loaded: the kernel rejects a module not signed by an enrolled key"
			c.Fix = &Fix{Text: "Enroll the key DKMS signed the module with and confirm it in the MOK manager at the next boot (\"Key was rejected by service\" until then); or install the distribution's signed prebuilt modules.", Commands: enroll}
		}
	}
	d.add(c)
}

// signedModulePackage is the installed package of Ubuntu's signed
// prebuilt nvidia modules for the running kernel
// (linux-modules-nvidia-550-open-6.8.0-45-generic), "" when none is or a
// DKMS build stands in front of it.
func (d *doctor) signedModulePackage() string {
	rel := d.obs.Kernel.Release
	if rel == "" {
		return ""
	}
	if k := d.runningKernel(); k != nil && slices.ContainsFunc(k.NvidiaModules, func(m facts.ModuleFile) bool { return m.Tree == "dkms" }) {
		// DKMS's build is found before the packaged module (updates/
		// comes first in depmod's search), and DKMS signed it.
		return ""
	}
	for _, p := range d.obs.Packages.Packages {
		if p.State == facts.StateInstalled && strings.HasPrefix(p.Name, "linux-modules-nvidia-") && strings.HasSuffix(p.Name, "-"+rel) {
			return p.Name
		}
	}
	return ""
}

func orUnknownState(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// driverInstalled reports whether any part of the NVIDIA driver is on
// disk: libraries, module files or DKMS records.
func (d *doctor) driverInstalled() bool {
	if len(d.obs.Driver.Libraries) > 0 || d.moduleLoaded() {
		return true
	}
	for _, k := range d.obs.Kernel.Installed {
		if len(k.NvidiaModules) > 0 || len(k.DKMS) > 0 {
			return true
		}
	}
	return false
}

func (d *doctor) kernelDKMS() {
	c := Check{ID: "kernel.dkms", Group: GroupKernel}
	if d.skipUnpacked(c, "DKMS's builds of the nvidia module") {
		return
	}
	if hidden, why := d.hostKernelHidden(); hidden {
		c.Status, c.Summary = Skipped, why
		d.add(c)
		return
	}
	if !d.hasGPU() || !d.driverInstalled() {
		d.skip(c, "No NVIDIA driver installed")
		return
	}
	run := d.runningKernel()
	if run == nil {
		d.skip(c, fmt.Sprintf("The running kernel %s has no /lib/modules directory to look in", d.obs.Kernel.Release))
		return
	}
	hasModule := func(k *facts.InstalledKernel) bool {
		if len(k.NvidiaModules) > 0 {
			return true
		}
		return slices.ContainsFunc(k.DKMS, func(b facts.DKMSBuild) bool { return b.Built })
	}
	var missing []string
	var headerless []string
	for i := range d.obs.Kernel.Installed {
		k := &d.obs.Kernel.Installed[i]
		files := moduleFiles(k)
		state := strings.Join(files, "; ")
		if state == "" {
			state = "no nvidia module"
		}
		if !k.Headers {
			state += "; no headers"
		}
		c.Evidence = append(c.Evidence, fmt.Sprintf("/lib/modules/%s: %s", k.Release, state))
		if !hasModule(k) {
			missing = append(missing, k.Release)
			if !k.Headers {
				headerless = append(headerless, k.Release)
			}
		}
	}
	if len(missing) == 0 {
		c.Status = OK
		c.Summary = fmt.Sprintf("An nvidia module is installed for every kernel (%d)", len(d.obs.Kernel.Installed))
		d.add(c)
		return
	}
	var cmds []string
	for _, r := range headerless {
		if d.obs.OS.Family == "rpm" {
			cmds = append(cmds, "dnf install kernel-devel-"+r)
		} else {
			cmds = append(cmds, "apt-get install linux-headers-"+r)
		}
	}
	text := "Build the module for each kernel (DKMS needs the kernel's headers):"
	switch d.moduleTree() {
	case "akmods":
		// RPM Fusion's akmod builds at boot, or when asked.
		text = "akmods builds the module for each kernel (it needs kernel-devel of the same release):"
		for _, r := range missing {
			cmds = append(cmds, "akmods --force --kernels "+r)
		}
	case "runfile":
		text = "The driver was installed with NVIDIA's .run installer, which built the module for one kernel only: run the installer again for the new kernel, with --dkms so that later kernels get it by themselves:"
		cmds = append(cmds, "sh NVIDIA-Linux-x86_64-<version>.run --dkms")
	default:
		for _, r := range missing {
			cmds = append(cmds, "dkms autoinstall -k "+r)
		}
	}
	c.Fix = &Fix{Text: text, Commands: cmds}
	if !hasModule(run) {
		c.Status = Problem
		c.Summary = fmt.Sprintf("No nvidia module for the running kernel %s", run.Release)
	} else {
		c.Status = Warning
		c.Summary = fmt.Sprintf("No nvidia module for %s: booting it leaves the GPU without a driver", strings.Join(missing, ", "))
	}
	d.add(c)
}

func (d *doctor) nvmlInit() {
	o := d.obs
	n := o.NVML
	c := Check{ID: "nvml.init", Group: GroupNVML}
	if d.skipLive(c, "Whether NVML starts") {
		return
	}
	if n.Error != "" {
		c.Evidence = append(c.Evidence, "NVML: "+n.Error)
	}
	switch n.Status {
	case "ok":
		c.Status = OK
		c.Summary = fmt.Sprintf("NVML answers: driver %s, CUDA %s, %s", n.DriverVersion, n.CUDADriverVersion, plural(len(n.Devices), "GPU"))
		c.Evidence = append(c.Evidence, fmt.Sprintf("NVML %s: driver %s, CUDA driver API %s", n.NVMLVersion, n.DriverVersion, n.CUDADriverVersion))
	case "", "not_attempted":
		c.Status = Skipped
		c.Summary = "NVML not queried: the root is not this machine's, so facts come from its files"
	case "library_not_found", "driver_not_loaded":
		if d.inContainerWithoutGPU() {
			c.Status, c.Summary = Skipped, "NVML cannot start: the container was given no GPU (context.gpu-access)"
			break
		}
		if !d.hasGPU() {
			c.Status, c.Summary = Skipped, "NVML cannot start, and there is no GPU for it to manage"
			break
		}
		if n.Status == "driver_not_loaded" {
			c.Status = Problem
			c.Summary = "NVML cannot start: the nvidia kernel module is not loaded"
			c.Fix = &Fix{Text: "Load the module; the kernel-module checks above say what stops it.", Commands: []string{"modprobe nvidia"}}
			break
		}
		c.Status = Problem
		c.Summary = "NVML cannot start: libnvidia-ml.so.1 is not installed"
		if v := o.Driver.ModuleVersion; v != "" {
			c.Fix = &Fix{Text: "Install the driver's userspace libraries, of the loaded module's version; with gpuenv:", Spec: fmt.Sprintf("driver {\n  version = %q\n}", v)}
		} else if b := d.recommendedBranch(); b != 0 {
			c.Fix = &Fix{Text: "Install the NVIDIA driver; with gpuenv:", Spec: fmt.Sprintf("driver {\n  version = \"%d.*\"\n}", b)}
		} else {
			c.Fix = &Fix{Text: "Install the NVIDIA driver."}
		}
	case "driver_library_mismatch":
		c, _ = mismatchFinding(d.obs, true)
	case "no_permission":
		c.Status = Problem
		c.Summary = "NVML cannot open the GPU: no permission on /dev/nvidia*"
		c.Fix = &Fix{Text: "See the device-node checks below."}
	default:
		c.Status = Problem
		c.Summary = "NVML cannot start: " + n.Status
		c.Fix = &Fix{Text: "Look at the kernel log (dmesg | grep -i nvrm) for the driver's own message."}
	}
	d.add(c)
}

func (d *doctor) driverVersions() {
	dr := d.obs.Driver
	c := Check{ID: "driver.versions", Group: GroupNVML}
	c.Evidence = versionEvidence(d.obs)
	m := DriverLibraryMismatch(d.obs)
	switch {
	case m.NVML:
		c.Status, c.Summary = Skipped, "NVML already reported the mismatch"
	case dr.ModuleVersion == "":
		c.Status, c.Summary = Skipped, "No loaded module to compare the libraries with"
	case dr.LibraryVersion == "" && len(dr.Libraries) == 0:
		c.Status = Problem
		c.Summary = fmt.Sprintf("The nvidia module %s is loaded but no libnvidia-ml is installed: no program can talk to it", dr.ModuleVersion)
		c.Fix = &Fix{Text: "Install the driver's userspace of the same version; with gpuenv:", Spec: fmt.Sprintf("driver {\n  version = %q\n}", dr.ModuleVersion)}
	case m.InFiles():
		c, _ = MismatchFinding(d.obs)
	default:
		c.Status = OK
		c.Summary = fmt.Sprintf("The kernel module and the libraries are both %s", dr.ModuleVersion)
	}
	d.add(c)
}

// gpuNode reports whether p is a GPU's node, /dev/nvidiaN.
func gpuNode(p string) bool {
	n, ok := strings.CutPrefix(p, "/dev/nvidia")
	if !ok || n == "" {
		return false
	}
	for _, c := range n {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// computeNodes are the device nodes a CUDA program opens.
func computeNode(p string) bool {
	return p == "/dev/nvidiactl" || p == "/dev/nvidia-uvm" || gpuNode(p)
}

// nodeText is a node as evidence names it. It is written for every node
// at every judgement, plan's included: one string, not a format's
// several.
func nodeText(n facts.DeviceNode) string {
	group := n.Group
	if group == "" {
		group = strconv.FormatUint(uint64(n.GID), 10)
	}
	b := make([]byte, 0, 96)
	b = append(append(b, n.Path...), ": "...)
	if n.Char {
		b = strconv.AppendUint(append(b, "char "...), uint64(n.Major), 10)
		b = strconv.AppendUint(append(b, ':'), uint64(n.Minor), 10)
	} else {
		b = append(b, "not a character device"...)
	}
	b = append(append(append(b, ", mode "...), n.Mode...), ", uid "...)
	b = strconv.AppendUint(b, uint64(n.UID), 10)
	return string(append(append(b, ", group "...), group...))
}

// nvidiaGPUCount is how many GPUs should have a /dev/nvidiaN node.
func (d *doctor) nvidiaGPUCount() int {
	if len(d.obs.NVML.Devices) > 0 {
		return len(d.obs.NVML.Devices)
	}
	n := 0
	for _, p := range d.obs.PCI {
		if p.Driver == "nvidia" {
			n++
		}
	}
	return n
}

func (d *doctor) deviceNodes() {
	c := Check{ID: "devices.nodes", Group: GroupDevices}
	switch {
	case d.inWSL():
		c.Status, c.Summary = Skipped, "WSL reaches the GPU through /dev/dxg, not /dev/nvidia*"
		d.add(c)
		return
	case d.inContainerWithoutGPU():
		c.Status, c.Summary = Skipped, "The container was given no GPU (context.gpu-access)"
		d.add(c)
		return
	}
	if !d.moduleLoaded() {
		d.skip(c, "The nvidia module is not loaded, so it has made no device nodes")
		return
	}
	if d.skipLive(c, "The device nodes the driver makes as it loads") {
		return
	}
	have := map[string]facts.DeviceNode{}
	for _, n := range d.obs.DeviceNodes {
		if computeNode(n.Path) {
			have[n.Path] = n
			c.Evidence = append(c.Evidence, nodeText(n))
		}
	}
	var missing, notChar []string
	want := []string{"/dev/nvidiactl", "/dev/nvidia-uvm"}
	// A GPU's node is numbered by its minor, not its index: a container
	// given GPU 1 alone has /dev/nvidia1 and NVML's GPU 0. Enough GPU
	// nodes, whatever their numbers, is what counts.
	var gpuNodes []string
	for p := range have {
		if gpuNode(p) {
			gpuNodes = append(gpuNodes, p)
		}
	}
	slices.Sort(gpuNodes)
	want = append(want, gpuNodes...)
	for i := 0; len(gpuNodes) < d.nvidiaGPUCount(); i++ {
		p := fmt.Sprintf("/dev/nvidia%d", i)
		if _, ok := have[p]; !ok {
			want = append(want, p)
			gpuNodes = append(gpuNodes, p)
		}
	}
	for _, p := range want {
		n, ok := have[p]
		switch {
		case !ok:
			missing = append(missing, p)
			c.Evidence = append(c.Evidence, p+": missing")
		case !n.Char:
			notChar = append(notChar, p)
		}
	}
	switch {
	case len(notChar) > 0:
		c.Status = Problem
		c.Summary = fmt.Sprintf("%s exist but are not character devices", strings.Join(notChar, ", "))
		c.Fix = &Fix{Text: "Remove them and let the driver make them again.", Commands: []string{"rm " + strings.Join(notChar, " "), "nvidia-modprobe -u -c=0"}}
	case slices.Contains(missing, "/dev/nvidia-uvm"):
		c.Status = Problem
		c.Summary = "/dev/nvidia-uvm is missing: CUDA programs fail to start (\"no CUDA-capable device is detected\") although nvidia-smi works"
		c.Fix = &Fix{Text: "Load nvidia-uvm and make its device nodes (nvidia-modprobe does both):", Commands: []string{"nvidia-modprobe -u -c=0"}}
	case len(missing) > 0:
		c.Status = Problem
		c.Summary = fmt.Sprintf("%s missing", strings.Join(missing, ", "))
		c.Fix = &Fix{Text: "Make the device nodes (nvidia-modprobe, or nvidia-smi run once as root):", Commands: []string{"nvidia-modprobe -c=0"}}
	default:
		c.Status = OK
		c.Summary = fmt.Sprintf("The device nodes exist, nvidia-uvm included (%d)", len(want))
	}
	d.add(c)
}

// userGroups returns the groups u is in: its primary group and every
// group listing it.
func (d *doctor) userGroups(u *User) map[uint32]string {
	out := map[uint32]string{}
	for _, g := range d.obs.Groups {
		if g.GID == u.GID || slices.Contains(g.Members, u.Name) {
			out[g.GID] = g.Name
		}
	}
	return out
}

// canOpen reports whether u may read and write node n, by its mode bits.
func canOpen(u *User, groups map[uint32]string, n facts.DeviceNode) (bool, string) {
	mode, err := strconv.ParseUint(n.Mode, 8, 32)
	if err != nil {
		return false, "mode " + n.Mode + " unreadable"
	}
	switch {
	case u.UID == 0:
		return true, "root"
	case u.UID == n.UID:
		return mode&0o600 == 0o600, "owner"
	}
	if _, in := groups[n.GID]; in {
		return mode&0o060 == 0o060, "group"
	}
	return mode&0o006 == 0o006, "others"
}

func (d *doctor) deviceAccess() {
	c := Check{ID: "devices.access", Group: GroupDevices}
	u := d.in.User
	var nodes []facts.DeviceNode
	for _, n := range d.obs.DeviceNodes {
		if computeNode(n.Path) {
			nodes = append(nodes, n)
		}
	}
	switch {
	case d.obs.Context.UserNamespace != nil && len(d.obs.Context.UserNamespace.UnmappedNodes) > 0:
		c.Status, c.Summary = Skipped, "The device nodes' owners are not mapped into this user namespace (context.user-namespace)"
		d.add(c)
		return
	case u == nil:
		d.skip(c, "The invoking user is unknown")
		return
	case len(nodes) == 0:
		d.skip(c, "No device nodes to open")
		return
	}
	groups := d.userGroups(u)
	var names []string
	for _, g := range groups {
		names = append(names, g)
	}
	slices.Sort(names)
	c.Evidence = append(c.Evidence, fmt.Sprintf("user %s: uid %d, groups %s", u.Name, u.UID, strings.Join(names, ", ")))
	var denied []facts.DeviceNode
	via := map[string]bool{}
	// Nodes with the same mode and owners are one line of evidence: a
	// DGX has a dozen.
	var kinds []string
	byKind := map[string][]string{}
	for _, n := range nodes {
		ok, how := canOpen(u, groups, n)
		if !ok {
			denied = append(denied, n)
			group := n.Group
			if group == "" {
				group = strconv.FormatUint(uint64(n.GID), 10)
			}
			k := fmt.Sprintf("mode %s, uid %d, group %s", n.Mode, n.UID, group)
			if byKind[k] == nil {
				kinds = append(kinds, k)
			}
			byKind[k] = append(byKind[k], n.Path)
			continue
		}
		via[how] = true
	}
	for _, k := range kinds {
		c.Evidence = append(c.Evidence, fmt.Sprintf("%s: %s: denied", strings.Join(byKind[k], ", "), k))
	}
	if len(denied) == 0 {
		c.Status = OK
		var hows []string
		for h := range via {
			hows = append(hows, h)
		}
		slices.Sort(hows)
		c.Summary = fmt.Sprintf("%s can open the device nodes (as %s)", u.Name, strings.Join(hows, ", "))
		d.add(c)
		return
	}
	var paths []string
	gids := map[uint32]string{}
	for _, n := range denied {
		paths = append(paths, n.Path)
		gids[n.GID] = n.Group
	}
	c.Status = Problem
	c.Summary = fmt.Sprintf("%s cannot open %s", u.Name, strings.Join(paths, ", "))
	if len(denied) == len(nodes) && len(nodes) > 2 {
		c.Summary = fmt.Sprintf("%s cannot open any of the %d GPU device nodes", u.Name, len(nodes))
	}
	var grp string
	for gid, name := range gids {
		if gid != 0 && name != "" {
			grp = name
		}
	}
	if grp != "" && len(gids) == 1 {
		c.Summary += fmt.Sprintf(": they belong to group %s, which %s is not in", grp, u.Name)
		c.Fix = &Fix{
			Text: fmt.Sprintf("Add %s to %s (it takes effect at the next login); with gpuenv:", u.Name, grp),
			Spec: fmt.Sprintf("group %q {\n  members = [%q]\n}", grp, u.Name),
		}
	} else {
		c.Fix = &Fix{
			Text:     "The nodes are open to root only. Let the driver make them readable by everyone, or by a group the user is in (NVreg_DeviceFileGID), then reload the module:",
			Commands: []string{"echo 'options nvidia NVreg_DeviceFileMode=0666' > /etc/modprobe.d/nvidia-device-mode.conf", d.initramfsCommand(), "reboot"},
		}
	}
	d.add(c)
}

// moduleTree is who installed the nvidia modules on disk, from the files
// found for any kernel: "akmods", "runfile", "dkms", "kmod" or "".
func (d *doctor) moduleTree() string {
	for _, k := range d.obs.Kernel.Installed {
		for _, m := range k.NvidiaModules {
			if m.Tree != "" {
				return m.Tree
			}
		}
	}
	return ""
}
