package driver

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/finding"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/spec"
)

// CheckKernelWithoutModule names the warning that an installed kernel
// will have no nvidia module after the plan.
const CheckKernelWithoutModule = "kernel-without-module"

// signedWhy says, for a driver step's reason, which of Ubuntu's signed
// module packages it installs and what that spares.
func signedWhy(d *planner.DesiredDriver) string {
	s := d.Signed
	var kernels []string
	for _, k := range s.Kernels {
		var names []string
		for _, p := range k.Packages {
			names = append(names, p.Name)
		}
		kernels = append(kernels, fmt.Sprintf("%s %s", strings.Join(names, ", "), k.Packages[0].Version))
	}
	why := fmt.Sprintf("%s: installs %s in the same transaction instead of %s, as ubuntu-drivers does, so no compiler and no kernel headers are needed, and under Secure Boot the kernel loads them without a Machine Owner Key enrolment, since Canonical signed them",
		d.ModulesWhy, strings.Join(kernels, "; "), planner.DKMSPackage(s.Series))
	switch {
	case s.Meta.Name != "" && s.KernelMeta != "":
		why += fmt.Sprintf("; %s brings the modules of each new kernel that %s installs", s.Meta.Name, s.KernelMeta)
	case s.Meta.Name != "":
		why += fmt.Sprintf("; %s brings the modules of each new kernel of the flavour", s.Meta.Name)
	default:
		why += fmt.Sprintf("; the archive has no meta package of the modules at this kernel's version (linux-modules-nvidia-%s-<flavour> %s), so a new kernel needs its own linux-modules-nvidia-%s-<release>", s.Series, s.Kernels[0].Packages[0].Version, s.Series)
	}
	return why
}

// kernelsWithoutModule warns of each kernel on the root that the driver
// step leaves without an nvidia module, naming what gives it one: with
// Ubuntu's signed modules, a kernel the archive has none for; with DKMS,
// a kernel whose headers are not installed (the running kernel's are
// the kernel provider's to install).
func kernelsWithoutModule(req *planner.Request, install *plan.Step) []finding.Finding {
	d := req.Desired.Driver
	obs := req.Facts
	if d.KernelModules == spec.KernelModulesNone || req.Desired.NoKernel != "" {
		return nil
	}
	headers := map[string]bool{}
	for _, k := range obs.Kernel.Installed {
		headers[k.Release] = k.Headers
	}
	var out []finding.Finding
	for _, rel := range planner.InstalledKernels(obs) {
		if rel == obs.Kernel.Release && d.Signed == nil {
			continue
		}
		var detail string
		var evidence []string
		switch {
		case d.Signed != nil:
			if slices.ContainsFunc(d.Signed.Kernels, func(k planner.SignedKernel) bool { return k.Release == rel }) {
				continue
			}
			want := planner.ModulesPackage(d.Signed.Series, rel)
			detail = fmt.Sprintf("Step %s installs Ubuntu's signed nvidia modules, and %s has no %s: booted, kernel %s finds no nvidia module and no GPU is usable. "+
				"Boot a kernel the archive has modules for and remove this one, or have DKMS build the module for it: install %s with linux-headers-%s (under Secure Boot, DKMS's key must then be enrolled).",
				install.Address, req.Desired.Archive.Describe(spec.SourceDistro), want, rel, planner.DKMSPackage(d.Signed.Series), rel)
			evidence = []string{fmt.Sprintf("%s: not in the package indexes", want)}
		case install.Flags.BuildsKernelModule:
			if headers[rel] {
				continue
			}
			hp := "linux-headers-" + rel
			if obs.OS.Family == "rpm" {
				hp = "kernel-devel-" + rel
			}
			detail = fmt.Sprintf("Step %s has DKMS build the nvidia module for each kernel whose headers are installed, and kernel %s has none: booted, it finds no nvidia module. Install %s (DKMS then builds the module for it), or remove that kernel.",
				install.Address, rel, hp)
			evidence = []string{fmt.Sprintf("/lib/modules/%s/build does not lead to a directory", rel)}
		default:
			continue
		}
		out = append(out, finding.Finding{
			ID:       CheckKernelWithoutModule,
			Summary:  fmt.Sprintf("Kernel %s will have no nvidia module", rel),
			Detail:   detail,
			Evidence: evidence,
		})
	}
	return out
}
