package planner

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpuenv/gpuenv/planner/compat"
	"github.com/gpuenv/gpuenv/spec"
	"github.com/gpuenv/gpuenv/spec/version"
)

// rowsFor returns the package rows of the host's operating system for a
// repository and component, whatever their flavour or branch. The slice
// is shared between plans (osRowsMemo): a caller must not change it.
func (h hostOS) rowsFor(repo, component string) []compat.PackageRow {
	return osRowsMemo.get(osRowsKey{h.ID, h.Version, repo, component}, func() []compat.PackageRow {
		return compat.RowsFor(h.ID, h.Version, repo, component)
	})
}

// names asks the package tables for a component on the host's system.
// A component no row provides gives no names and no error.
func (h hostOS) names(q compat.PackageQuery) ([]PackageName, error) {
	q.OS, q.OSVersion = h.ID, h.Version
	a := namesMemo.get(queryKeyOf(q), func() namesAnswer {
		pkgs, err := compat.Packages(q)
		if errors.Is(err, compat.ErrUnknown) {
			return namesAnswer{}
		}
		if err != nil {
			return namesAnswer{err: err}
		}
		out := make([]PackageName, len(pkgs))
		for i, p := range pkgs {
			out[i] = PackageName{Name: p.Name, Version: p.Version, From: p.Row.Source.String(), Notes: p.Row.Notes, row: p.Row.Source}
		}
		return namesAnswer{names: out}
	})
	// The kept answer is shared; the caller's copy is its own.
	return slices.Clone(a.names), a.err
}

// repoOf maps a spec source to the package tables' repository.
func repoOf(s spec.Source) string {
	if s == spec.SourceNVIDIA {
		return compat.RepoNVIDIA
	}
	return compat.RepoDistro
}

// resolvePackages names the packages of the driver, the toolkit, cuDNN
// and distribution frameworks, and the archive components they need.
func (r *resolver) resolvePackages() {
	r.d.Manager = r.os.Manager
	needs := false
	if dd := r.d.Driver; dd != nil && !dd.Absent && !dd.FromHost && !r.diags.HasErrors() {
		r.driverPackages(dd)
		needs = true
	}
	if dc := r.d.CUDA; dc != nil && !dc.Absent && !dc.Minor.IsZero() {
		r.cudaPackages(dc)
		needs = true
	}
	if dn := r.d.CuDNN; dn != nil && !dn.Absent && dn.CUDAMajor != 0 {
		r.cudnnPackages(dn)
		needs = true
	}
	for _, f := range r.d.Frameworks {
		if f.Source == spec.SourceDistro && f.Package != "" {
			needs = true
		}
	}
	if needs && r.os.Manager == "" {
		r.errorf(hcl.Range{}, "Unknown package manager",
			"gpuenv does not know how to install packages on this host (os-release ID %q): it manages Debian, Ubuntu and RHEL-family systems.", r.obs.OS.ID)
	}
	r.components()
}

// driverComponents are the table components that make up a driver
// install, in install order.
func driverComponents(km spec.KernelModules) []string {
	if km == spec.KernelModulesNone {
		// The userspace alone: nvidia-smi, NVML and the CUDA driver
		// library, for containers and hosts whose module comes from
		// elsewhere.
		return []string{"utils", "nvml", "compute"}
	}
	if km == spec.KernelModulesOpen {
		// The open modules run on the GPU's GSP, whose firmware some
		// distributions package separately.
		return []string{"driver-pin", "driver", "kernel", "kmod", "firmware"}
	}
	return []string{"driver-pin", "driver", "kernel", "kmod"}
}

// driverNames names the packages of a driver from src in flavour km: a
// branch's (0: the repository's latest names), falling back in NVIDIA's
// repositories to the distribution-style names they also carry, of
// branch fallback where no branch is given (nvidia-driver-550-open). It
// returns the branch the names are of.
func (r *resolver) driverNames(src spec.Source, km spec.KernelModules, branch, fallback uint64) ([]PackageName, uint64, error) {
	repo := repoOf(src)
	q := compat.PackageQuery{Repo: repo, Branch: branch}
	if km != spec.KernelModulesNone {
		q.Flavor = compat.Flavor(km)
	}
	used := branch
	var out []PackageName
	for _, comp := range driverComponents(km) {
		q.Component = comp
		names, err := r.os.names(q)
		if err != nil {
			return nil, 0, err
		}
		if len(names) == 0 && repo == compat.RepoNVIDIA && comp != "driver-pin" {
			// NVIDIA's repositories for Debian and Ubuntu also carry the
			// distribution-style names where the tables list none of
			// their own (nvidia-driver-550-open, nvidia-utils-550).
			dq := q
			dq.Repo = compat.RepoDistro
			if dq.Branch == 0 && fallback != 0 {
				dq.Branch = fallback
				used = fallback
			}
			names, err = r.os.names(dq)
			if err != nil {
				names = nil
			}
		}
		out = append(out, names...)
	}
	return out, used, nil
}

func (r *resolver) driverPackages(dd *DesiredDriver) {
	var branch, newest uint64
	if n := len(dd.Branches); n > 0 {
		newest = dd.Branches[n-1]
	}
	switch {
	case dd.latestNames:
	case len(dd.Branches) == 1:
		branch = dd.Branches[0]
	case dd.Source != spec.SourceNVIDIA && len(dd.Branches) > 0:
		// Distribution archives name packages by branch; the newest
		// branch allowed is what an upgrade would reach.
		branch = newest
	}
	out, used, err := r.driverNames(dd.Source, dd.KernelModules, branch, newest)
	dd.Branch = used
	if err != nil {
		r.packagesUnknown(dd.Block.Source, dd.Block.DefRange, "Driver", err.Error()+".")
		return
	}
	if !slices.ContainsFunc(out, func(p PackageName) bool { return !strings.Contains(p.Name, "pinning") }) {
		what := string(dd.KernelModules) + " kernel modules"
		if dd.KernelModules == spec.KernelModulesNone {
			what = "the driver's userspace"
		}
		if dd.Branch != 0 {
			what += fmt.Sprintf(", branch %d", dd.Branch)
		}
		hint := ""
		if dd.Source == spec.SourceDistro {
			hint = " Use source = \"nvidia\" with a repository block for NVIDIA's repository."
		}
		r.packagesUnknown(dd.Block.Source, dd.Block.DefRange, "Driver",
			fmt.Sprintf("gpuenv's package tables name no driver package for %s from the %s source (%s).%s", r.os.Title, dd.Source, what, hint))
		return
	}
	dd.Packages = out
	r.signedModules(dd)
	if r.os.ID == "rhel" && dd.Source == spec.SourceNVIDIA && dd.KernelModules != spec.KernelModulesNone {
		q := compat.PackageQuery{Repo: compat.RepoNVIDIA, Component: "module-stream", Flavor: compat.Flavor(dd.KernelModules), Branch: dd.Branch}
		if streams, err := r.os.names(q); err == nil && len(streams) > 0 {
			// RHEL 8 and 9 hide modular packages until their stream is
			// enabled, and enabling one is not among gpuenv's operations.
			r.warnf(dd.Block.Source.RangeOr(dd.Block.DefRange), "Enable the driver's module stream first",
				"On %s, NVIDIA's driver packages are in the module stream %s, which dnf hides until it is enabled: run dnf module enable %s before applying (%s).",
				r.os.Title, streams[0].Name, streams[0].Name, streams[0].From)
		}
	}
}

func (r *resolver) cudaPackages(dc *DesiredCUDA) {
	names, err := r.os.names(compat.PackageQuery{Repo: repoOf(dc.Source), Component: "toolkit", CUDA: dc.Release.Version})
	if err == nil && len(names) == 0 {
		err = fmt.Errorf("gpuenv's package tables name no CUDA %s toolkit package for %s from the %s source", dc.Minor, r.os.Title, dc.Source)
	}
	if err != nil {
		r.packagesUnknown(dc.Block.Source, dc.Block.DefRange, "CUDA", err.Error()+".")
		return
	}
	dc.Packages = names
}

// cudnnNames names cuDNN's packages from src: the library, and from
// NVIDIA's repositories its -dev package too.
func (r *resolver) cudnnNames(dn *DesiredCuDNN, src spec.Source) ([]PackageName, error) {
	repo := repoOf(src)
	q := compat.PackageQuery{Repo: repo, CUDA: dn.CUDA}
	if q.CUDA.IsZero() {
		q.CUDA = version.MustParse(strconv.FormatUint(dn.CUDAMajor, 10))
	}
	if e, ok := dn.Versions.Exact(); ok {
		q.CuDNN = e
	} else if dn.Major != 0 && repo == compat.RepoNVIDIA {
		q.CuDNN = version.MustParse(strconv.FormatUint(dn.Major, 10))
	}
	comps := []string{"cudnn"}
	if repo == compat.RepoNVIDIA {
		// The headers come with the -dev package: what builds against
		// cuDNN needs them, and they say which release is installed.
		comps = append(comps, "cudnn-dev")
	}
	var out []PackageName
	for _, c := range comps {
		q.Component = c
		names, err := r.os.names(q)
		if err != nil {
			return nil, err
		}
		out = append(out, names...)
	}
	return out, nil
}

func (r *resolver) cudnnPackages(dn *DesiredCuDNN) {
	out, err := r.cudnnNames(dn, dn.Source)
	if err != nil {
		r.packagesUnknown(dn.Block.Source, dn.Block.DefRange, "cuDNN", err.Error()+".")
		return
	}
	if len(out) == 0 {
		r.packagesUnknown(dn.Block.Source, dn.Block.DefRange, "cuDNN",
			fmt.Sprintf("gpuenv's package tables name no cuDNN package for %s from the %s source.", r.os.Title, dn.Source))
		return
	}
	if !r.kept["cudnn"] && r.archive.Knows(dn.Source) && len(r.offersWhere(dn.Source, []string{out[0].Name}, dn.Versions.Check)) == 0 {
		list := r.archive.Listing(dn.Source, cudnnPackage)
		if list == "" {
			list = "no cuDNN package"
		}
		subject := dn.Block.Version.RangeOr(dn.Block.DefRange)
		r.errorf(subject, "cuDNN version not in the archive",
			"The spec asks for cuDNN %s for CUDA %d (%s) from %s, which offers %s.", dn.Versions.Quoted(), dn.CUDAMajor, at(subject), r.archive.Describe(dn.Source), list)
		return
	}
	for _, p := range out {
		if strings.Contains(p.Notes, "installer") {
			r.warnf(dn.Block.Source.RangeOr(dn.Block.DefRange), p.Name+" downloads cuDNN when installed",
				"%s (%s): %s.", p.Name, p.From, p.Notes)
		}
	}
	dn.Packages = out
}

// components collects the archive components (Debian's contrib and
// non-free) that the chosen distribution packages live in.
func (r *resolver) components() {
	if r.os.ID != "debian" {
		return
	}
	var names []string
	if dd := r.d.Driver; dd != nil && dd.Source == spec.SourceDistro {
		for _, p := range dd.Packages {
			names = append(names, p.Name)
		}
	}
	if dc := r.d.CUDA; dc != nil && dc.Source == spec.SourceDistro {
		for _, p := range dc.Packages {
			names = append(names, p.Name)
		}
	}
	if dn := r.d.CuDNN; dn != nil && dn.Source == spec.SourceDistro {
		for _, p := range dn.Packages {
			names = append(names, p.Name)
		}
	}
	for _, f := range r.d.Frameworks {
		if f.Source == spec.SourceDistro && !f.Absent {
			names = append(names, f.Package)
		}
	}
	set := map[string]bool{}
	for _, n := range names {
		for _, p := range compat.DistroPackages(r.os.ID, r.os.Version, n) {
			_, comp, ok := strings.Cut(p.Suite, "/")
			if ok && comp != "main" {
				set[comp] = true
			}
		}
	}
	if set["non-free"] && r.os.ID == "debian" {
		// Debian's non-free NVIDIA packages depend on packages in contrib
		// (nvidia-modprobe, glx-alternative-nvidia, the *-installer-cleanup
		// helpers), so apt cannot resolve them with non-free alone.
		set["contrib"] = true
	}
	for c := range set {
		r.d.Components = append(r.d.Components, c)
	}
	slices.Sort(r.d.Components)
}
