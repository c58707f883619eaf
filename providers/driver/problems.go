package driver

import (
	"fmt"
	"strings"
	"time"

	"github.com/gpuenv/gpuenv/planner/doctor"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/finding"
)

// problems records what the facts just observed show to be wrong. Each
// rule looks only at this package's facts.
func (o *observer) problems() {
	obs := o.obs
	mismatch := o.mismatch()
	o.nouveau()
	o.unbound()
	o.runningKernelModule()
	o.staleInitramfs()
	o.missingFromNVML()
	if len(obs.PCI) > 0 {
		switch obs.NVML.Status {
		case "ok", "not_attempted", "":
		case "driver_library_mismatch":
			if !mismatch {
				o.problem("nvml.init", "nvml", obs.NVML.Error, "")
			}
		default:
			o.problem("nvml.init", "nvml", obs.NVML.Error, "")
		}
	}
}

// mismatch records the driver/library version mismatch, as doctor words
// it, and reports whether it did. NVML's own refusal is the nvml layer's;
// the files' mismatch the driver's.
func (o *observer) mismatch() bool {
	f, ok := doctor.MismatchFinding(o.obs)
	if !ok {
		return false
	}
	f.Stage, f.Layer = finding.Observe, "driver"
	if f.ID == "nvml.init" {
		f.Layer = "nvml"
	}
	o.obs.Problems = append(o.obs.Problems, f)
	return true
}

func (o *observer) blacklisted(module string) []facts.Blacklist {
	var out []facts.Blacklist
	for _, b := range o.obs.Kernel.Blacklists {
		if b.Module == module {
			out = append(out, b)
		}
	}
	return out
}

func (o *observer) nouveau() {
	var bound []string
	for _, d := range o.obs.PCI {
		if d.Driver == "nouveau" {
			bound = append(bound, d.Address)
		}
	}
	if !doctor.NouveauLoaded(o.obs) || !doctor.HasGPU(o.obs) {
		return
	}
	where := "nouveau is loaded"
	if len(bound) > 0 {
		where = "GPU " + strings.Join(bound, ", ") + " is driven by nouveau"
	}
	if bl := o.blacklisted("nouveau"); len(bl) > 0 {
		o.problem("kernel.nouveau", "kernel", fmt.Sprintf("%s although %s blacklists it: the running system or its initramfs predates the blacklist", where, bl[0].File), "rebuild the initramfs and reboot")
		return
	}
	o.problem("kernel.nouveau", "kernel", where+" and nothing blacklists it: the nvidia driver cannot take the GPU", "blacklist nouveau, rebuild the initramfs and reboot")
}

func (o *observer) unbound() {
	var free []string
	for _, d := range o.obs.PCI {
		if d.Driver == "" {
			free = append(free, d.Address)
		}
	}
	if len(free) == 0 || o.loaded("nvidia") {
		return
	}
	if k := o.running(); k != nil && len(k.NvidiaModules) > 0 {
		o.problem("pci.driver", "pci", fmt.Sprintf("no driver is bound to GPU %s: the nvidia module is built for kernel %s but not loaded", strings.Join(free, ", "), k.Release), "reboot or load it (modprobe nvidia)")
		return
	}
	o.problem("pci.driver", "pci", fmt.Sprintf("no driver is bound to GPU %s: no NVIDIA kernel module is installed for the running kernel", strings.Join(free, ", ")), "")
}

func (o *observer) running() *facts.InstalledKernel {
	for i := range o.obs.Kernel.Installed {
		if o.obs.Kernel.Installed[i].Running {
			return &o.obs.Kernel.Installed[i]
		}
	}
	return nil
}

// runningKernelModule: modules built for other kernels but not the running
// one is what a kernel update without headers leaves behind; the next boot
// (or this one) has no GPU driver.
func (o *observer) runningKernelModule() {
	k := o.running()
	if k == nil || len(k.NvidiaModules) > 0 || o.loaded("nvidia") {
		return
	}
	var others []string
	for _, ik := range o.obs.Kernel.Installed {
		if !ik.Running && (len(ik.NvidiaModules) > 0 || len(ik.DKMS) > 0) {
			others = append(others, ik.Release)
		}
	}
	if len(others) == 0 {
		return
	}
	fix := "rebuild it with DKMS (dkms autoinstall)"
	if !k.Headers {
		fix = "install the kernel headers for " + k.Release + ", then rebuild it with DKMS"
	}
	o.problem("kernel.module", "kernel", fmt.Sprintf("no nvidia module is built for the running kernel %s (only for %s): %s", k.Release, strings.Join(others, ", "), fix), "")
}

// staleInitramfs: a nouveau blacklist written after the initramfs was
// built is not in it, so nouveau still loads from the initramfs at boot
// (the doctor's rule, doctor.StaleNouveauBlacklist). Without an NVIDIA
// GPU nouveau has nothing to load for, as the doctor's check says too.
func (o *observer) staleInitramfs() {
	b := doctor.StaleNouveauBlacklist(o.obs)
	if b == nil || !doctor.HasGPU(o.obs) {
		return
	}
	ir := o.obs.Kernel.Initramfs
	cmd := "update-initramfs -u"
	if o.obs.OS.Family == "rpm" {
		cmd = "dracut -f"
	}
	o.problem("kernel.initramfs", "kernel", fmt.Sprintf("the initramfs %s (%s) predates the nouveau blacklist in %s (%s): nouveau can still load at boot",
		ir.Path, ir.ModTime.Format(time.DateTime), b.File, b.ModTime.Format(time.DateTime)), "run "+cmd)
}

// missingFromNVML: a GPU the nvidia driver is bound to but NVML does not
// list has usually fallen off the bus (Xid 79) or failed to initialise;
// CUDA cannot use it either.
func (o *observer) missingFromNVML() {
	if o.obs.NVML.Status != "ok" {
		return
	}
	seen := map[string]bool{}
	for _, d := range o.obs.NVML.Devices {
		seen[d.PCIBusID] = true
	}
	var missing []string
	for _, d := range o.obs.PCI {
		if d.Driver == "nvidia" && !seen[d.Address] {
			missing = append(missing, d.Address)
		}
	}
	if len(missing) > 0 {
		o.problem("gpu.bus", "nvml", fmt.Sprintf("GPU %s is bound to nvidia but NVML does not list it: it may have fallen off the bus or failed to initialise", strings.Join(missing, ", ")), "see the kernel log (dmesg) for Xid errors")
	}
}
