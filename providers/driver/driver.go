package driver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/gpuenv/gpuenv/planner/compat"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
)

// Files and directories this package reads, inside the root.
const (
	PCIDevices     = "/sys/bus/pci/devices"
	ProcModules    = "/proc/modules"
	ProcVersion    = "/proc/driver/nvidia/version"
	SysVersion     = "/sys/module/nvidia/version"
	Cmdline        = "/proc/cmdline"
	ModulesDir     = "/lib/modules"
	DKMSDir        = "/var/lib/dkms"
	DevDir         = "/dev"
	NVIDIAVendorID = 0x10de
)

// ModprobeDirs are searched in kmod's order: a file name in an earlier
// directory hides the same name in a later one.
var ModprobeDirs = []string{"/etc/modprobe.d", "/run/modprobe.d", "/usr/local/lib/modprobe.d", "/usr/lib/modprobe.d", "/lib/modprobe.d"}

// LibraryDirs are where distributions and NVIDIA's installers put
// libnvidia-ml, in the order the loader's default configuration searches
// them (Debian's alternatives tree last: it is reached through links).
var LibraryDirs = []string{
	"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
	"/usr/local/nvidia/lib64",
	"/usr/lib/x86_64-linux-gnu/nvidia/current", "/usr/lib/aarch64-linux-gnu/nvidia/current",
}

// Observe fills, in obs, the kernel's modules, blacklists, initramfs and
// installed kernels (obs.Kernel, all but Release and SecureBoot, which it
// reads), the PCI GPUs, NVML (nil n: not attempted), the driver files and
// the device nodes, and appends the problems these show and a warning for
// each file it could not use. It reads obs.OS and obs.Kernel.Release, so
// system.Observe runs first.
func Observe(ctx context.Context, h *host.Host, n host.NVML, obs *facts.Observation) {
	o := &observer{h: h, obs: obs}
	o.pci()
	o.modules()
	o.holders()
	o.signingKey()
	o.moduleVersion()
	o.blacklists()
	o.kernels()
	o.libraries()
	o.deviceNodes()
	o.nvml(n)
}

// ObserveNVML asks n for the GPUs, as Observe does last, in an obs that
// Observe has already filled from the files without it (its NVML facts
// are replaced): for those who need NVML's answer only after the files.
func ObserveNVML(h *host.Host, n host.NVML, obs *facts.Observation) {
	obs.NVML = facts.NVML{}
	(&observer{h: h, obs: obs}).nvml(n)
}

type observer struct {
	h   *host.Host
	obs *facts.Observation
}

func (o *observer) warn(p string, err error) {
	o.obs.Warnings = append(o.obs.Warnings, facts.Warning{Path: p, Message: err.Error()})
}

// read reads a file that may be missing: missing is no warning, any other
// failure is.
func (o *observer) read(p string) ([]byte, bool) {
	data, err := o.h.ReadFile(p)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			o.warn(p, err)
		}
		return nil, false
	}
	return data, true
}

// pci lists NVIDIA display and 3D controllers, bound to a driver or not.
// Each device's uevent says in one read what the vendor, device, class and
// subsystem files and the driver link say in six; those are the fallback
// where a root has no uevent.
func (o *observer) pci() {
	entries, err := o.h.ReadDir(PCIDevices)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			o.warn(PCIDevices, err)
		}
		return
	}
	for _, e := range entries {
		dir := path.Join(PCIDevices, e.Name())
		d, ok := o.uevent(dir)
		if !ok {
			d, ok = o.attributes(dir)
		}
		if ok && d.VendorID == NVIDIAVendorID && d.Class == compat.NVSwitchClass {
			o.nvswitch(e.Name(), d)
			continue
		}
		// 0x03xxxx is a display controller (VGA 0x0300, 3D 0x0302): the
		// GPU itself, not its HDMI audio, USB-C controller or an NVSwitch.
		if !ok || d.VendorID != NVIDIAVendorID || d.Class>>16 != 0x03 {
			continue
		}
		d.Address = e.Name()
		d.PCIID = fmt.Sprintf("%04x:%04x", d.VendorID, d.DeviceID)
		if d.SubsystemVendor != 0 || d.SubsystemDevice != 0 {
			d.SubsystemID = fmt.Sprintf("%04x:%04x", d.SubsystemVendor, d.SubsystemDevice)
		}
		if g, ok := compat.GPUByPCIID(d.DeviceID); ok {
			d.Model = g.Model
			d.Architecture = g.Arch
			if a, ok := compat.Arch(g.Arch); ok {
				d.Architecture = a.Title
			}
			d.ComputeCapability = g.CC.String()
		}
		o.obs.PCI = append(o.obs.PCI, d)
	}
}

// uevent reads a PCI device's uevent:
//
//	DRIVER=nvidia
//	PCI_CLASS=30200
//	PCI_ID=10DE:2330
//	PCI_SUBSYS_ID=10DE:16C1
//
// DRIVER is absent when no driver is bound. ok is false when the file is
// missing or lacks PCI_ID or PCI_CLASS (then it is a warning).
func (o *observer) uevent(dir string) (facts.PCIDevice, bool) {
	p := dir + "/uevent"
	data, err := o.h.ReadFile(p)
	if err != nil {
		return facts.PCIDevice{}, false
	}
	d, err := ParsePCIUevent(data)
	if err != nil {
		o.warn(p, err)
		return facts.PCIDevice{}, false
	}
	return d, true
}

// attributes reads a PCI device from its single-value sysfs files.
func (o *observer) attributes(dir string) (facts.PCIDevice, bool) {
	vendor, ok := o.hexFile(dir+"/vendor", 16)
	if !ok || vendor != NVIDIAVendorID {
		return facts.PCIDevice{}, false
	}
	class, ok := o.hexFile(dir+"/class", 32)
	if !ok || class>>16 != 0x03 && class != compat.NVSwitchClass {
		return facts.PCIDevice{}, false
	}
	dev, _ := o.hexFile(dir+"/device", 16)
	sv, _ := o.hexFile(dir+"/subsystem_vendor", 16)
	sd, _ := o.hexFile(dir+"/subsystem_device", 16)
	d := facts.PCIDevice{VendorID: uint16(vendor), DeviceID: uint16(dev), SubsystemVendor: uint16(sv), SubsystemDevice: uint16(sd), Class: uint32(class)}
	if target, err := o.h.Readlink(dir + "/driver"); err == nil {
		d.Driver = path.Base(target)
	}
	return d, true
}

// hexFile reads a sysfs attribute such as "0x10de\n".
func (o *observer) hexFile(p string, bits int) (uint64, bool) {
	data, ok := o.read(p)
	if !ok {
		return 0, false
	}
	s := strings.TrimSpace(string(data))
	v, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, bits)
	if err != nil || !strings.HasPrefix(s, "0x") {
		o.warn(p, fmt.Errorf("not a hexadecimal %d-bit value: %q", bits, clip(s)))
		return 0, false
	}
	return v, true
}

func (o *observer) modules() {
	data, ok := o.read(ProcModules)
	if !ok {
		// No /proc/modules: a kernel without loadable modules, or a root
		// that is an image rather than a running system.
		return
	}
	mods, errs := ParseModules(data, Relevant)
	for _, err := range errs {
		o.warn(ProcModules, err)
	}
	o.obs.Kernel.Loaded = mods
}

func (o *observer) loaded(name string) bool {
	return slices.ContainsFunc(o.obs.Kernel.Loaded, func(m facts.LoadedModule) bool { return m.Name == name })
}

// moduleVersion reads the loaded nvidia module's version: from procfs,
// which also names the flavour, else from sysfs.
func (o *observer) moduleVersion() {
	d := &o.obs.Driver
	if data, ok := o.read(ProcVersion); ok {
		v, flavor, err := ParseProcVersion(data)
		if err == nil {
			d.ModuleVersion, d.ModuleFlavor, d.ModuleVersionFrom = v, flavor, ProcVersion
			return
		}
		o.warn(ProcVersion, err)
	}
	if data, ok := o.read(SysVersion); ok {
		v := strings.TrimSpace(string(data))
		if !IsDriverVersion(v) {
			o.warn(SysVersion, fmt.Errorf("not a driver version: %q", clip(v)))
			return
		}
		d.ModuleVersion, d.ModuleVersionFrom = v, SysVersion
		// The taint letters still tell the flavour: the closed module's
		// licence taints the kernel with "P".
		for _, m := range o.obs.Kernel.Loaded {
			if m.Name == "nvidia" && m.Taints != "" {
				d.ModuleFlavor = "open"
				if strings.Contains(m.Taints, "P") {
					d.ModuleFlavor = "proprietary"
				}
			}
		}
	}
}

// blacklists reads modprobe configuration in kmod's precedence, and the
// kernel command line.
func (o *observer) blacklists() {
	seen := map[string]bool{} // file names already taken from an earlier dir
	dirs := map[string]bool{} // resolved dirs, since /lib is /usr/lib on merged-/usr systems
	for _, dir := range ModprobeDirs {
		real, err := o.h.EvalSymlinks(dir)
		if err != nil || dirs[real] {
			continue
		}
		dirs[real] = true
		entries, err := o.h.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			name := e.Name()
			if !strings.HasSuffix(name, ".conf") || seen[name] || e.IsDir() {
				continue
			}
			seen[name] = true
			o.modprobeFile(path.Join(dir, name))
		}
	}
	if data, ok := o.read(Cmdline); ok {
		for _, b := range ParseCmdline(data) {
			if Relevant(b.Module) {
				o.obs.Kernel.Blacklists = append(o.obs.Kernel.Blacklists, b)
			}
		}
	}
}

func (o *observer) modprobeFile(p string) {
	f, err := o.h.Open(p)
	if err != nil {
		o.warn(p, err)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		o.warn(p, err)
		return
	}
	data, err := io.ReadAll(f)
	if err != nil {
		o.warn(p, err)
		return
	}
	dirs, errs := ParseModprobe(data)
	for _, err := range errs {
		o.warn(p, err)
	}
	for _, d := range dirs {
		if Relevant(d.Module) {
			o.obs.Kernel.Blacklists = append(o.obs.Kernel.Blacklists, facts.Blacklist{
				Module: d.Module, Directive: d.Directive, File: p, Line: d.Line, ModTime: fi.ModTime().UTC(),
			})
		}
	}
}

// kernels lists the kernels with modules on disk, their headers, the
// nvidia modules built for them, and the DKMS records.
func (o *observer) kernels() {
	entries, err := o.h.ReadDir(ModulesDir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			o.warn(ModulesDir, err)
		}
	}
	dkms := o.dkms()
	running := o.obs.Kernel.Release
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		rel := e.Name()
		k := facts.InstalledKernel{Release: rel, Running: rel == running}
		if fi, err := o.h.Stat(path.Join(ModulesDir, rel, "build")); err == nil && fi.IsDir() {
			k.Headers = true
		}
		k.DKMS = dkms[rel]
		k.NvidiaModules = o.moduleFiles(rel, k.DKMS)
		o.obs.Kernel.Installed = append(o.obs.Kernel.Installed, k)
	}
	if running != "" {
		for _, p := range []string{"/boot/initrd.img-" + running, "/boot/initramfs-" + running + ".img"} {
			if fi, err := o.h.Stat(p); err == nil {
				o.obs.Kernel.Initramfs = &facts.FileTime{Path: p, ModTime: fi.ModTime().UTC()}
				break
			}
		}
	}
}

// moduleDirs are where nvidia modules live below /lib/modules/<release>:
// DKMS builds (Debian, Ubuntu), DKMS and precompiled kmods (RHEL), and
// Ubuntu's signed prebuilt linux-modules-nvidia packages.
var moduleDirs = []string{"updates/dkms", "updates", "extra", "extra/nvidia", "extra/drivers/video/nvidia", "kernel/nvidia-*", "kernel/drivers/video"}

// moduleTree says who installs modules into a directory below
// /lib/modules/<release>: DKMS (updates/dkms, and extra on RHEL when a
// DKMS record names the module), RPM Fusion's akmods (extra/nvidia),
// NVIDIA's .run installer (kernel/drivers/video), or a prebuilt package.
func moduleTree(dir string, dkms bool) string {
	switch {
	case dir == "updates/dkms" || dir == "extra" && dkms:
		return "dkms"
	case dir == "extra/nvidia":
		return "akmods"
	case dir == "kernel/drivers/video":
		return "runfile"
	}
	return "kmod"
}

func (o *observer) moduleFiles(rel string, dkms []facts.DKMSBuild) []facts.ModuleFile {
	var out []facts.ModuleFile
	for _, d := range moduleDirs {
		matches, _ := o.h.Glob(path.Join(ModulesDir, rel, d, "nvidia*.ko*"))
		for _, m := range matches {
			if !coreModule(path.Base(m)) {
				continue
			}
			mf := facts.ModuleFile{Path: m, Tree: moduleTree(d, len(dkms) > 0)}
			if d == "updates/dkms" || d == "extra" {
				// DKMS installs there (Debian's and RHEL's destinations)
				// the build of the version it records for this kernel;
				// with one nvidia record, that is the file's.
				var vs []string
				for _, b := range dkms {
					if b.Built && !slices.Contains(vs, b.Version) {
						vs = append(vs, b.Version)
					}
				}
				if len(vs) == 1 {
					mf.Version = vs[0]
				}
			}
			out = append(out, mf)
		}
	}
	return out
}

// coreModule reports whether a module file is the driver's core module
// (nvidia.ko, Debian's nvidia-current.ko), not one of its companions.
func coreModule(name string) bool {
	stem, _, _ := strings.Cut(name, ".ko")
	for _, c := range []string{"uvm", "modeset", "drm", "peermem", "fs"} {
		if strings.HasSuffix(stem, "-"+c) || strings.HasSuffix(stem, "_"+c) {
			return false
		}
	}
	return strings.HasPrefix(stem, "nvidia")
}

// dkms reads /var/lib/dkms/<module>/<version>/<kernel>/<arch>/ for the
// nvidia modules, by kernel release.
func (o *observer) dkms() map[string][]facts.DKMSBuild {
	mods, err := o.h.ReadDir(DKMSDir)
	if err != nil {
		return nil
	}
	out := map[string][]facts.DKMSBuild{}
	for _, m := range mods {
		if !m.IsDir() || !strings.HasPrefix(m.Name(), "nvidia") {
			continue
		}
		vers, _ := o.h.ReadDir(path.Join(DKMSDir, m.Name()))
		for _, v := range vers {
			// Besides version directories DKMS keeps kernel-<rel>-<arch>
			// symlinks to the installed build; the directories say it all.
			if !v.IsDir() || !IsDriverVersion(v.Name()) {
				continue
			}
			vdir := path.Join(DKMSDir, m.Name(), v.Name())
			kernels, _ := o.h.ReadDir(vdir)
			for _, k := range kernels {
				if !k.IsDir() || k.Name() == "source" || k.Name() == "build" {
					continue
				}
				archs, _ := o.h.ReadDir(path.Join(vdir, k.Name()))
				for _, a := range archs {
					if !a.IsDir() {
						continue
					}
					mods, _ := o.h.Glob(path.Join(vdir, k.Name(), a.Name(), "module", "*.ko*"))
					out[k.Name()] = append(out[k.Name()], facts.DKMSBuild{
						Module: m.Name(), Version: v.Name(), Arch: a.Name(), Built: len(mods) > 0,
					})
				}
			}
		}
	}
	return out
}

// libraries lists libnvidia-ml.so.<version> files and the version that
// libnvidia-ml.so.1 leads to.
func (o *observer) libraries() {
	const prefix = "libnvidia-ml.so."
	d := &o.obs.Driver
	seen := map[string]bool{}
	for _, dir := range LibraryDirs {
		real, err := o.h.EvalSymlinks(dir)
		if err != nil || seen[real] {
			continue
		}
		seen[real] = true
		matches, _ := o.h.Glob(path.Join(dir, prefix+"*"))
		for _, m := range matches {
			if v := LibraryVersion(path.Base(m), prefix); v != "" {
				d.Libraries = append(d.Libraries, facts.Library{Path: m, Version: v})
			} else if path.Base(m) == prefix+"1" && d.LibraryVersion == "" {
				if target, err := o.h.EvalSymlinks(m); err == nil {
					d.LibraryVersion = LibraryVersion(path.Base(target), prefix)
				}
			}
		}
	}
}

// deviceNodes lists /dev/nvidia*, /dev/nvidia-caps/* and the IMEX
// channels, /dev/nvidia-caps-imex-channels/* (which the CDI management
// spec gives containers). The group name is filled in from /etc/group by
// whoever reads it.
func (o *observer) deviceNodes() {
	nodes, _ := o.h.Glob(path.Join(DevDir, "nvidia*"))
	caps, _ := o.h.Glob(path.Join(DevDir, "nvidia-caps", "*"))
	imex, _ := o.h.Glob(path.Join(DevDir, "nvidia-caps-imex-channels", "*"))
	for _, p := range slices.Concat(nodes, caps, imex) {
		fi, err := o.h.Lstat(p)
		if err != nil {
			o.warn(p, err)
			continue
		}
		if fi.IsDir() {
			continue
		}
		n := facts.DeviceNode{Path: p, Mode: fmt.Sprintf("%04o", fi.Mode().Perm())}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			n.UID, n.GID = st.Uid, st.Gid
			if fi.Mode()&fs.ModeCharDevice != 0 {
				n.Char = true
				n.Major, n.Minor = major(st.Rdev), minor(st.Rdev)
			}
		}
		o.obs.DeviceNodes = append(o.obs.DeviceNodes, n)
	}
}

// major and minor decode a Linux dev_t as glibc's gnu_dev_major/minor do.
func major(dev uint64) uint32 { return uint32((dev>>8)&0xfff) | uint32((dev>>32)&^0xfff) }
func minor(dev uint64) uint32 { return uint32(dev&0xff) | uint32((dev>>12)&^0xff) }

// nvml asks NVML, or records why it was not asked or could not answer.
// After a failed Init nothing else is called.
func (o *observer) nvml(n host.NVML) {
	r := &o.obs.NVML
	if n == nil {
		r.Status = "not_attempted"
		r.Error = "the root is not this machine's /: NVML is not loaded and the facts come from the root's files"
		return
	}
	// Looking must change nothing. Started as root while no nvidia
	// module is loaded, NVML creates the device files it would talk to
	// (/dev/nvidiactl, and in a root whose /dev is the machine's, on the
	// machine); and the files already say what it would answer. So NVML
	// is started only when a module is loaded, and otherwise the status
	// is told from the files, in NVML's own words.
	if d := &o.obs.Driver; d.ModuleVersion == "" && !o.loaded("nvidia") {
		r.From = "files"
		if d.LibraryVersion == "" && len(d.Libraries) == 0 {
			r.Status = string(host.NVMLLibraryNotFound)
			r.Error = "NVML was not started: no libnvidia-ml.so.1 is installed, and no nvidia kernel module is loaded"
		} else {
			r.Status = string(host.NVMLDriverNotLoaded)
			r.Error = "NVML was not started: no nvidia kernel module is loaded (" + ProcVersion + " is absent); started as root, NVML would create /dev/nvidiactl"
		}
		return
	}
	if err := n.Init(); err != nil {
		var ne *host.NVMLError
		if errors.As(err, &ne) {
			r.Status = string(ne.Class)
		} else {
			r.Status = string(host.NVMLOther)
		}
		r.Error = err.Error()
		return
	}
	defer func() {
		if err := n.Shutdown(); err != nil {
			o.warn("", err)
		}
	}()
	r.Status = "ok"
	sys, err := n.System()
	if err != nil {
		o.warn("", err)
	}
	r.DriverVersion, r.NVMLVersion = sys.DriverVersion, sys.NVMLVersion
	r.CUDADriverVersion = CUDAVersion(sys.CUDADriverVersion)
	for _, e := range sys.Errors {
		o.warn("", errors.New("NVML "+e))
	}
	devs, err := n.Devices()
	if err != nil {
		o.warn("", err)
	}
	for _, d := range devs {
		g := facts.GPUDevice{
			Index: d.Index, Name: d.Name, UUID: d.UUID, PCIBusID: d.PCIBusID,
			MemoryTotal: d.MemoryTotal, MemoryUsed: d.MemoryUsed, ComputeCapability: d.ComputeCapability,
			PersistenceMode: d.PersistenceMode, ComputeMode: d.ComputeMode, MIGMode: d.MIGMode, MIGDevices: d.MIGDevices,
		}
		for _, p := range d.Processes {
			g.Processes = append(g.Processes, facts.GPUProcess{PID: p.PID, UsedMemory: p.UsedMemory, Name: p.Name})
		}
		g.MIGModePending = d.MIGPending
		g.GPUInstances = gpuInstances(d)
		for _, e := range d.Errors {
			o.warn("", fmt.Errorf("NVML device %d: %s", d.Index, e))
		}
		r.Devices = append(r.Devices, g)
	}
	// The health counters are read in the same NVML session: starting
	// NVML is most of what reading them costs.
	if hr, ok := n.(host.NVMLHealthReader); ok {
		hs, err := hr.Health()
		if err != nil {
			o.warn("", err)
		}
		for _, d := range hs {
			idx := d.Index
			o.obs.Health.GPUs = append(o.obs.Health.GPUs, facts.GPUHealth{
				PCIAddress: d.PCIBusID, Index: &idx, UUID: d.UUID, Name: d.Name, NVML: &d.NVMLHealth,
			})
		}
	}
}

// gpuInstances turns NVML's MIG instances into facts, named from the
// compatibility table's profiles of the GPU's model.
func gpuInstances(d host.NVMLDevice) []facts.GPUInstance {
	model, known := compat.MIGModelOf(d.Name, d.MemoryTotal)
	var out []facts.GPUInstance
	for _, gi := range d.GPUInstances {
		g := facts.GPUInstance{ID: gi.ID, ProfileID: gi.ProfileID, Start: gi.Start, Size: gi.Size}
		prof, named := compat.MIGProfile{}, false
		if known {
			prof, named = model.ProfileByID(gi.ProfileID)
			g.Profile = prof.Name
		}
		for _, ci := range gi.Compute {
			c := facts.ComputeInstance{ID: ci.ID, ProfileID: ci.ProfileID, Slices: ci.Slices, UUID: ci.UUID, MIGIndex: ci.Index}
			if named {
				c.Profile = compat.ComputeProfileName(prof, ci.Slices)
			}
			for _, p := range ci.Processes {
				c.Processes = append(c.Processes, facts.GPUProcess{PID: p.PID, UsedMemory: p.UsedMemory, Name: p.Name})
			}
			g.Compute = append(g.Compute, c)
		}
		out = append(out, g)
	}
	return out
}
