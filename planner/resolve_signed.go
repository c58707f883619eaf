package planner

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/spec"
	"github.com/gpuenv/gpuenv/spec/lazyregexp"
	"github.com/gpuenv/gpuenv/spec/version"
)

// Ubuntu builds the NVIDIA kernel modules of each driver series it ships
// for each of its kernels (the linux-restricted-modules source) and signs
// them with the kernel's own key, so that they load under Secure Boot
// without a Machine Owner Key. The package names below are those
// ubuntu-drivers installs and NVIDIA's GPU Operator installs on Ubuntu
// for Secure Boot nodes:
//
//   - linux-modules-nvidia-<series>-<release>: the modules for one kernel
//     ABI (series "550", "550-open", "550-server", "550-server-open";
//     release as uname -r prints it, "6.8.0-45-generic"), linked and
//     checked against linux-signatures-nvidia-<release> when installed;
//   - linux-objects-nvidia-<series>-<release>: the module objects it is
//     linked from;
//   - linux-signatures-nvidia-<release>: Canonical's signatures of every
//     series' modules for that kernel;
//   - linux-modules-nvidia-<series>-<meta>: the meta package that follows
//     the kernel's meta package (linux-image-<meta>: "generic",
//     "generic-hwe-22.04", "aws") to each new kernel ABI.
//
// Sources: canonical/ubuntu-drivers-common, UbuntuDrivers/detect.py
// (get_linux_modules_metapackage: the series is the driver package's
// flavour, "linux-modules-nvidia-%s-%s" % (series, release) must exist
// for the running kernel's ABI, the meta is named after the linux-image
// meta package, and nvidia-dkms-<series> is the fallback when no module
// package exists); `ubuntu-drivers list` prints "nvidia-driver-460,
// (kernel modules provided by linux-modules-nvidia-460-generic-hwe-20.04)";
// NVIDIA/gpu-driver-container, ubuntu22.04/precompiled/nvidia-driver
// (_install_driver: linux-objects-nvidia-${DRIVER_BRANCH}-server-${KERNEL_VERSION},
// linux-signatures-nvidia-${KERNEL_VERSION},
// linux-modules-nvidia-${DRIVER_BRANCH}-server[-open]-${KERNEL_VERSION});
// the Ubuntu kernel team's list, 2020-06 and 2021-03 (the meta and ABI
// packages depend on nvidia-kernel-common-<series>, so the modules and the
// driver's user space move together, and the meta depends on the ABI
// package at its own version).

// SignedModules is the choice between Ubuntu's signed prebuilt kernel
// modules and a DKMS build, for a driver from Ubuntu's archive.
type SignedModules struct {
	// Series is the driver series in the module packages' names
	// ("550-open").
	Series string
	// Kernels are the kernels that get signed modules, the running one
	// first.
	Kernels []SignedKernel
	// Meta is the meta package that follows the kernel's meta package to
	// new kernels, with its version; empty Name when the archive has none
	// for the host's kernel.
	Meta SignedPackage
	// KernelMeta is the installed kernel meta package Meta follows
	// ("linux-image-generic-hwe-22.04"); empty when none is installed.
	KernelMeta string
}

// SignedKernel is one kernel's signed module packages.
type SignedKernel struct {
	Release  string
	Packages []SignedPackage
}

// SignedPackage is a package at the version the archive offers it.
type SignedPackage struct {
	Name    string
	Version string
}

// Pins are every package to install, in order: each kernel's, then the
// meta package.
func (s *SignedModules) Pins() []SignedPackage {
	if s == nil {
		return nil
	}
	var out []SignedPackage
	for _, k := range s.Kernels {
		out = append(out, k.Packages...)
	}
	if s.Meta.Name != "" {
		out = append(out, s.Meta)
	}
	return out
}

// ModulesPackage names Ubuntu's signed module package of a series for a
// kernel release.
func ModulesPackage(series, release string) string {
	return "linux-modules-nvidia-" + series + "-" + release
}

// DKMSPackage names the Ubuntu package that builds a series' modules with
// DKMS.
func DKMSPackage(series string) string { return "nvidia-dkms-" + series }

// ubuntuSeries matches Ubuntu's driver packages and captures the series
// their module packages are named by.
var ubuntuSeries = lazyregexp.New(`^nvidia-driver-([0-9]+(?:-server)?(?:-open)?)$`)

// kernelABI splits an Ubuntu kernel release into its ABI and its flavour:
// "6.8.0-45-generic" is ABI 6.8.0-45 of the generic flavour,
// "6.8.0-1015-aws" of aws, "5.15.0-1063-nvidia-lowlatency" of
// nvidia-lowlatency.
var kernelABI = lazyregexp.New(`^([0-9]+\.[0-9]+\.[0-9]+-[0-9]+)-([a-z][a-z0-9]*(?:-[a-z0-9]+)*)$`)

// kernelFlavour is the flavour of an Ubuntu kernel release ("generic" of
// "6.8.0-45-generic"), and false for a release not of Ubuntu's form.
func kernelFlavour(release string) (string, bool) {
	m := kernelABI.FindStringSubmatch(release)
	if m == nil {
		return "", false
	}
	return m[2], true
}

// metaSuffix is what an Ubuntu kernel meta package adds to its flavour:
// a hardware-enablement or long-term series ("generic-hwe-22.04",
// "generic-hwe-24.04-edge", "oem-22.04", "aws-lts-22.04").
var metaSuffix = lazyregexp.New(`^(?:(?:hwe|lts)-)?[0-9]{2}\.[0-9]{2}(?:-edge)?$`)

// signedModules decides, for a driver from Ubuntu's archive with kernel
// modules, whether the modules are Ubuntu's signed prebuilt packages or a
// DKMS build, as ubuntu-drivers does: signed when the archive has the
// series' module package for the running kernel's ABI, DKMS otherwise.
// Either way dd.ModulesWhy says which and why.
func (r *resolver) signedModules(dd *DesiredDriver) {
	if r.os.ID != "ubuntu" || dd.Source != spec.SourceDistro || dd.KernelModules == spec.KernelModulesNone || r.d.NoKernel != "" {
		return
	}
	series := ""
	for _, p := range dd.Packages {
		if m := ubuntuSeries.FindStringSubmatch(p.Name); m != nil {
			series = m[1]
			break
		}
	}
	running := r.obs.Kernel.Release
	if running == "" {
		// A disk image: no kernel runs it, and the newest installed is
		// the one it boots.
		running = newestKernel(InstalledKernels(r.obs))
	}
	if series == "" || running == "" {
		return
	}
	dd.ModulesSeries = series
	if _, ok := kernelFlavour(running); !ok {
		dd.ModulesWhy = fmt.Sprintf("kernel %s is not one of Ubuntu's, for which the archive builds signed modules: DKMS builds the module", running)
		return
	}
	want := ModulesPackage(series, running)
	if !r.archive.Knows(spec.SourceDistro) {
		dd.ModulesWhy = fmt.Sprintf("whether %s's archive has %s is known only once apt-get update has fetched its lists: DKMS builds the module", r.os.Title, want)
		return
	}
	first, ok := r.signedKernel(series, running)
	if !ok {
		dd.ModulesWhy = fmt.Sprintf("no %s in %s: DKMS builds the module", want, r.archive.Describe(spec.SourceDistro))
		return
	}
	s := &SignedModules{Series: series, Kernels: []SignedKernel{first}}
	for _, rel := range InstalledKernels(r.obs) {
		if rel == running {
			continue
		}
		if k, ok := r.signedKernel(series, rel); ok {
			s.Kernels = append(s.Kernels, k)
		}
	}
	s.Meta, s.KernelMeta = r.signedMeta(series, running, first.Packages[0].Version)
	dd.Signed = s
	dd.ModulesWhy = fmt.Sprintf("Ubuntu's signed modules for %s: no build, no MOK", running)
}

// signedKernel finds the archive's signed module packages of a series for
// one kernel: the module package, with the objects and signatures
// packages where the archive has them, at one version, the first the
// package manager prefers at which every one of them is offered.
func (r *resolver) signedKernel(series, release string) (SignedKernel, bool) {
	if _, ok := kernelFlavour(release); !ok {
		return SignedKernel{}, false
	}
	mod := ModulesPackage(series, release)
	var companions []string
	for _, n := range []string{"linux-objects-nvidia-" + series + "-" + release, "linux-signatures-nvidia-" + release} {
		if len(r.archive.Offers(n, spec.SourceDistro)) > 0 {
			companions = append(companions, n)
		}
	}
	for _, o := range r.archive.Offers(mod, spec.SourceDistro) {
		k := SignedKernel{Release: release, Packages: []SignedPackage{{Name: mod, Version: o.Version}}}
		for _, c := range companions {
			if !slices.ContainsFunc(r.archive.Offers(c, spec.SourceDistro), func(x Offer) bool { return x.Version == o.Version }) {
				k.Packages = nil
				break
			}
			k.Packages = append(k.Packages, SignedPackage{Name: c, Version: o.Version})
		}
		if k.Packages != nil {
			return k, true
		}
	}
	return SignedKernel{}, false
}

// signedMeta finds the series' meta package that follows the installed
// kernel meta package of the running kernel's flavour
// (linux-image-generic-hwe-22.04 → linux-modules-nvidia-550-open-generic-hwe-22.04),
// or where none is installed, the flavour's own; offered at version, the
// running kernel's module package's, as the meta depends on that package
// at its own version.
func (r *resolver) signedMeta(series, running, version string) (SignedPackage, string) {
	flavour, _ := kernelFlavour(running)
	type cand struct{ meta, kernelMeta string }
	var cands []cand
	for _, p := range r.obs.Packages.Packages {
		m, ok := strings.CutPrefix(p.Name, "linux-image-")
		if !ok || p.State != facts.StateInstalled {
			continue
		}
		if rest, ok := strings.CutPrefix(m, flavour); ok && (rest == "" || strings.HasPrefix(rest, "-") && metaSuffix.MatchString(rest[1:])) {
			cands = append(cands, cand{m, p.Name})
		}
	}
	cands = append(cands, cand{meta: flavour})
	for _, c := range cands {
		name := "linux-modules-nvidia-" + series + "-" + c.meta
		if slices.ContainsFunc(r.archive.Offers(name, spec.SourceDistro), func(x Offer) bool { return x.Version == version }) {
			return SignedPackage{Name: name, Version: version}, c.kernelMeta
		}
	}
	return SignedPackage{}, ""
}

// newestKernel is the newest of Ubuntu kernel releases, by ABI; "" when
// none is one.
func newestKernel(rels []string) string {
	newest, abi := "", ""
	for _, rel := range rels {
		m := kernelABI.FindStringSubmatch(rel)
		if m == nil {
			continue
		}
		if c, err := version.CompareDebian(m[1], abi); abi == "" || err == nil && c > 0 {
			newest, abi = rel, m[1]
		}
	}
	return newest
}

// InstalledKernels lists the kernel releases on the root: those with
// modules on disk (/lib/modules), and those whose linux-image package
// is installed; the running one first, then in the observation's order.
func InstalledKernels(obs *facts.Observation) []string {
	var out []string
	add := func(rel string) {
		if rel != "" && !slices.Contains(out, rel) {
			out = append(out, rel)
		}
	}
	add(obs.Kernel.Release)
	for _, k := range obs.Kernel.Installed {
		add(k.Release)
	}
	for _, p := range obs.Packages.Packages {
		rel, ok := strings.CutPrefix(p.Name, "linux-image-")
		if !ok || p.State != facts.StateInstalled {
			continue
		}
		rel = strings.TrimPrefix(rel, "unsigned-")
		if _, ok := kernelFlavour(rel); ok {
			add(rel)
		}
	}
	return out
}

// ShownPins writes packages as AfterSignedModules shows them.
func ShownPins(pkgs []SignedPackage) string {
	parts := make([]string, len(pkgs))
	for i, p := range pkgs {
		parts[i] = p.Name + "=" + p.Version
	}
	return strings.Join(parts, ", ")
}
