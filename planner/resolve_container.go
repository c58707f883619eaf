package planner

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpuenv/gpuenv/planner/doctor"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/spec"
)

// noKernel says why a root's kernel is not the plan's to change, from the
// runtime context observed: a container's root runs on the host's kernel,
// with the host's driver, and an image built in a container is one too.
// Empty for a root whose kernel is its own.
func noKernel(obs *facts.Observation) string {
	ct := obs.Context.Container
	if ct == nil {
		if obs.Init.Chroot == "yes" {
			// An image being built in a chroot (debootstrap, mkosi, an
			// image builder's script): the running kernel is the building
			// machine's, and the image's own boots elsewhere, later.
			return chrootReason
		}
		if obs.Init.Chroot == "image" {
			// An image built from outside it (gpuenv --root on a disk
			// image's tree): it boots elsewhere, later.
			return imageReason
		}
		return ""
	}
	what := "the root is a container's"
	if name, ok := engineNames[ct.Engine]; ok {
		what = fmt.Sprintf("the root is a %s container's", name)
	}
	for _, e := range obs.Context.Evidence {
		// The first fact that told the container is the one to name.
		return fmt.Sprintf("%s (%s: %s)", what, e.File, e.Fact)
	}
	return what
}

// engineNames are the container engines as their projects write them.
var engineNames = map[string]string{
	"docker": "Docker", "podman": "Podman", "kubernetes": "Kubernetes",
	"containerd": "containerd", "lxc": "LXC", "systemd-nspawn": "systemd-nspawn",
}

// chrootReason is NoKernel for a root that is a chroot's.
const chrootReason = "the root is a chroot's, as an image being built is (/proc/1/root: process 1 runs in another root, or no /proc is mounted), and the kernel running is the building machine's"

// imageReason is NoKernel for a root no system runs from.
const imageReason = "the root is an image no system runs from, as an image being built is (its /proc is an empty directory), and the kernel that will boot it is not running here"

// inChroot reports whether NoKernel is set for an image being built (in a
// chroot, or from outside it), not a container.
func inChroot(d *Desired) bool { return d.NoKernel == chrootReason || d.NoKernel == imageReason }

// containerDriver resolves the driver block on a root whose kernel is the
// host's. A setting that asks for work on the kernel or the host's
// daemons is refused, as nothing planned inside the root can do it. Left
// without kernel_modules, the driver is the host's: the NVIDIA Container
// Toolkit mounts its user-space libraries (libcuda.so.1,
// libnvidia-ml.so.1, nvidia-smi) in when the container starts, and they
// must be the host module's own version, so none is installed; the
// host's driver, where the root shows it, is only checked against the
// spec. kernel_modules = "none" installs the user-space packages as on
// any host. It reports whether resolution goes on as on a host.
func (r *resolver) containerDriver(dd *DesiredDriver) (asOnHost bool) {
	b := dd.Block
	refused := false
	refuse := func(rng hcl.Range, asks string) {
		refused = true
		if inChroot(r.d) {
			title := "Kernel-side setting in a chroot"
			if r.d.NoKernel == imageReason {
				title = "Kernel-side setting in an image being built"
			}
			r.errorf(rng, title,
				"%s, and %s: nothing planned here can load a module or change how a machine boots. Plan with --root-boots if this root is a machine's that will boot (a disk image), which gets its kernel-side steps; leave the setting out for an image that runs as a container.",
				asks, r.d.NoKernel)
			return
		}
		r.errorf(rng, "Kernel-side setting on a container's root",
			"%s, and %s: its kernel and driver are the host's, and nothing planned here can load a module or change how the host boots. Set it on the host and leave it out of this spec (the NVIDIA Container Toolkit mounts the host driver's libraries into the container), or plan with --root-boots if this root is a machine's that will boot.",
			asks, r.d.NoKernel)
	}
	if km := b.KernelModules; km.Set && km.Value != spec.KernelModulesNone {
		refuse(km.Range, fmt.Sprintf("kernel_modules = %q asks for the %s kernel module", km.Value, km.Value))
	}
	if bn := b.BlacklistNouveau; bn.Set && bn.Value {
		refuse(bn.Range, "blacklist_nouveau = true asks for a modprobe blacklist and a rebuilt initramfs")
	}
	if pm := b.PersistenceMode; pm.Set {
		refuse(pm.Range, "persistence_mode asks for the host's nvidia-persistenced")
	}
	if refused {
		return false
	}
	if b.KernelModules.Set {
		return true
	}
	dd.FromHost = true
	have, from := doctor.DriverVersion(r.obs)
	if !have.IsZero() && !dd.Versions.IsZero() && !dd.Versions.Check(have) {
		r.warnf(b.Version.RangeOr(b.DefRange), "The host's driver does not satisfy the spec",
			"The driver block asks for %s, and the host's driver, which this container uses, is %s (%s). A container cannot change it: upgrade the driver on the host.",
			dd.Versions.Quoted(), have, from)
	}
	return false
}

// noKernelWarning is the plan's one word on why it has no kernel-side
// step, for a spec that manages the driver on a root whose kernel is not
// its own.
func noKernelWarning(d *Desired) *plan.Warning {
	if d == nil || d.NoKernel == "" || d.Driver == nil || d.Driver.Absent {
		return nil
	}
	if inChroot(d) {
		return &plan.Warning{
			Check:   "no-kernel",
			Summary: "No kernel-side step is planned: " + d.NoKernel,
			Detail: "The kernel running is not the image's: no kernel module, DKMS build, kernel headers, initramfs, nouveau blacklist or module reload is planned here, only the user space. " +
				"An image that will boot as a machine of its own, such as a disk image, is planned with --root-boots and gets them; for an image that runs as a container, the driver's libraries come from the host through the NVIDIA Container Toolkit (kernel_modules = \"none\" installs the driver's user-space packages instead).",
		}
	}
	return &plan.Warning{
		Check:   "no-kernel",
		Summary: "No kernel-side step is planned: " + d.NoKernel,
		Detail: "The kernel and the driver are the host's: no kernel module, DKMS build, kernel headers, initramfs, nouveau blacklist or module reload is planned here, only the user space. " +
			"The driver's libraries come from the host through the NVIDIA Container Toolkit (kernel_modules = \"none\" installs the driver's user-space packages instead). " +
			"A root that will boot as a machine of its own, such as a disk image prepared for a host, is planned with --root-boots.",
	}
}
