package planner

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpuenv/gpuenv/planner/compat"
	"github.com/gpuenv/gpuenv/planner/doctor"
	"github.com/gpuenv/gpuenv/spec"
	"github.com/gpuenv/gpuenv/spec/version"
)

// resolveDriver narrows the driver's versions to what the archive has,
// what the toolkit and frameworks need and what the GPUs allow, and picks
// the kernel-module flavour. It runs after the toolkit and frameworks have
// said what they need.
func (r *resolver) resolveDriver() {
	b := r.spec.Driver
	if b == nil {
		r.checkObservedDriver()
		return
	}
	dd := &DesiredDriver{
		Block:            b,
		Absent:           b.IsAbsent(),
		Source:           b.Source.Or(spec.DefaultDriverSource),
		Versions:         b.Version.Value,
		Hold:             b.Hold.Value,
		PersistenceMode:  b.PersistenceMode,
		BlacklistNouveau: b.BlacklistNouveau.Value,
	}
	r.d.Driver = dd
	if dd.Absent {
		for _, n := range r.needs {
			r.warnf(n.Range, "The spec removes the driver that this needs",
				"%s needs an NVIDIA driver, and the driver block at %s has absent = true: nothing will run on the GPU.", n.Who, at(b.DefRange))
		}
		return
	}
	vsub := b.Version.RangeOr(b.DefRange)
	if r.d.NoKernel != "" && !r.specOnly && !r.containerDriver(dd) {
		return
	}
	if r.specOnly {
		if r.driverFloors(dd, vsub) && r.driverGPUs(dd, vsub) {
			dd.Branches = branchesOf(dd.Versions)
			r.kernelModules(dd)
		}
		return
	}
	keep, ok := r.driverSource(dd, r.driverProbe(dd.Versions))
	if !ok {
		return
	}
	r.kept["driver"] = keep
	if !r.distroDriver(dd, vsub) {
		return
	}
	if !r.driverFloors(dd, vsub) {
		return
	}
	if !r.driverGPUs(dd, vsub) {
		return
	}
	dd.Branches = branchesOf(dd.Versions)
	if !keep && r.archive.Knows(dd.Source) && !r.archiveBranch(dd, vsub) {
		return
	}
	r.kernelModules(dd)
}

// distroDriver narrows the versions to the branches the distribution's
// archive has, where the tables say.
func (r *resolver) distroDriver(dd *DesiredDriver, vsub hcl.Range) bool {
	if dd.Source != spec.SourceDistro {
		return true
	}
	var applies []compat.PackageRow
	for _, p := range r.os.rowsFor(compat.RepoDistro, "driver") {
		if !p.Applies.IsZero() {
			applies = append(applies, p)
		}
	}
	if len(applies) == 0 {
		return true
	}
	for _, p := range applies {
		if n, ok := narrow(dd.Versions, p.Applies.String()); ok {
			if !dd.Block.Version.Set {
				r.infer("driver", "version", p.Applies.String(), p.Source)
			}
			dd.Versions = n
			return true
		}
	}
	p := applies[0]
	r.errorf(vsub, "Driver version not in the distribution's archive",
		"%s's archive has the %s driver branch only (%s, %s); the spec asks for %s with source = \"distro\" (%s). Use source = \"nvidia\" with NVIDIA's repository for other branches.",
		r.os.Title, strings.TrimSuffix(p.Applies.String(), ".*"), p.Name, p.Source, dd.Versions.Quoted(), at(dd.Block.Source.RangeOr(dd.Block.DefRange)))
	return false
}

// driverFloors raises the versions to what the toolkit and frameworks
// need.
func (r *resolver) driverFloors(dd *DesiredDriver, vsub hcl.Range) bool {
	ok := true
	for _, n := range r.needs {
		spelled := dd.Versions.Quoted()
		floor := n.Exact
		if floor.IsZero() || !admitsFrom(dd.Versions, floor) {
			floor = version.Version{}
			if !n.MinorCompat.IsZero() && admitsFrom(dd.Versions, n.MinorCompat) {
				floor = n.MinorCompat
				if !n.Exact.IsZero() {
					r.warnf(vsub, "Driver older than "+n.Who+" was released with",
						"The driver block allows %s, below %s, the driver %s shipped with (%s), which %s asks for. The driver runs it through CUDA's minor-version compatibility only: programs that JIT-compile PTX from the newer toolkit fail with \"unsupported toolchain\". Allow %s or newer to avoid this.",
						spelled, n.Exact, n.Who, n.From, at(n.Range), n.Exact)
				}
			}
		}
		if floor.IsZero() {
			ok = false
			needs := fmt.Sprintf("driver %s or newer", n.Exact)
			switch {
			case n.Exact.IsZero():
				needs = fmt.Sprintf("driver %s or newer, the oldest that runs every %s release through minor-version compatibility", n.MinorCompat, n.Who)
			case !n.MinorCompat.IsZero() && !n.MinorCompat.Equal(n.Exact):
				needs += fmt.Sprintf(", or %s or newer through minor-version compatibility", n.MinorCompat)
			}
			r.errorf(vsub, "Driver too old for "+n.Who,
				"The driver block allows %s, but %s, asked for at %s, needs %s (%s).",
				spelled, n.Who, at(n.Range), needs, n.From)
			continue
		}
		narrowed, _ := narrow(dd.Versions, ">= "+floor.String())
		if floor.Compare(dd.Floor) > 0 {
			dd.Floor, dd.FloorFor = floor, n.Who
			if !dd.Block.Version.Set {
				r.infer("driver", "version", ">= "+floor.String(), compat.Source{Table: n.From.Table, Key: n.From.Key + ", for " + n.Who, Refs: n.From.Refs, Unverified: n.From.Unverified})
			}
		}
		dd.Versions = narrowed
	}
	return ok
}

// driverGPUs keeps the versions within the branches that support every
// GPU of the host.
func (r *resolver) driverGPUs(dd *DesiredDriver, vsub hcl.Range) bool {
	ok := true
	for _, g := range r.d.GPUs {
		a, known := compat.Arch(g.Arch)
		if !known {
			continue
		}
		var terms []string
		if a.FirstBranch != 0 {
			terms = append(terms, fmt.Sprintf(">= %d", a.FirstBranch))
		}
		if a.LastBranch != 0 {
			terms = append(terms, fmt.Sprintf("< %d", a.LastBranch+1))
		}
		if g.Row != nil && !g.Row.MinDriver.IsZero() {
			terms = append(terms, ">= "+g.Row.MinDriver.String())
		}
		if len(terms) == 0 {
			continue
		}
		n, fits := narrow(dd.Versions, strings.Join(terms, ", "))
		if fits {
			dd.Versions = n
			continue
		}
		ok = false
		why := ""
		bs := branchesOf(dd.Versions)
		if len(bs) > 0 {
			probe := bs[0]
			if a.FirstBranch != 0 && bs[len(bs)-1] < a.FirstBranch {
				probe = bs[len(bs)-1]
			}
			if fine, w := compat.BranchSupportsArch(version.MustParse(strconv.FormatUint(probe, 10)), a.Name); !fine {
				why = w
			}
		}
		if why == "" && g.Row != nil {
			why = fmt.Sprintf("%s needs driver %s or newer (%s)", g.Model, g.Row.MinDriver, g.Row.Source)
		}
		if why == "" {
			why = fmt.Sprintf("%s GPUs need a driver within %s (%s)", a.Title, strings.Join(terms, ", "), a.Source)
		}
		r.errorf(vsub, "Driver does not support the GPU",
			"The driver block allows %s, but the host has %s: %s.", dd.Versions.Quoted(), g.Describe(), why)
	}
	return ok
}

// branchesOf lists the known driver branches c admits, oldest first.
func branchesOf(c version.Constraint) []uint64 {
	// Each branch costs a constraint built as text and parsed again, and
	// a plan asks about the same few constraints several times over; the
	// answer depends only on the constraint's text and the embedded
	// branch table, so it is remembered for the life of the process.
	key := branchesKey{zero: c.IsZero(), text: c.String()}
	if out, ok := branchesCache.Load(key); ok {
		return slices.Clone(out.([]uint64))
	}
	var out []uint64
	for _, b := range compat.DriverBranches() {
		if _, ok := narrow(c, fmt.Sprintf(">= %d, < %d", b.Branch, b.Branch+1)); ok {
			out = append(out, b.Branch)
		}
	}
	branchesCache.Store(key, out)
	return slices.Clone(out)
}

type branchesKey struct {
	zero bool
	text string
}

// branchesCache maps a branchesKey to branchesOf's answer.
var branchesCache sync.Map

// compatGPUs are the host's GPUs as compat's flavour rules take them.
func (r *resolver) compatGPUs() []compat.GPU {
	var out []compat.GPU
	for _, g := range r.d.GPUs {
		if g.Arch == "" {
			continue
		}
		out = append(out, compat.GPU{Model: g.Model, Arch: g.Arch, CC: g.CC, OpenRequired: g.OpenRequired})
	}
	return out
}

// flavorsFor returns the flavours a branch offers the host's GPUs, and why
// none when none.
func (r *resolver) flavorsFor(branch uint64) ([]compat.Flavor, string) {
	bv := version.MustParse(strconv.FormatUint(branch, 10))
	gpus := r.compatGPUs()
	if len(gpus) > 0 {
		allowed, _, why := compat.GPUKernelFlavors(gpus, bv)
		return allowed, why
	}
	row, ok := compat.BranchOf(bv)
	if ok && row.OpenModules {
		return []compat.Flavor{compat.FlavorOpen, compat.FlavorProprietary}, ""
	}
	return []compat.Flavor{compat.FlavorProprietary}, ""
}

// kernelModules checks the spec's flavour against the GPUs and branches,
// or picks the default one.
func (r *resolver) kernelModules(dd *DesiredDriver) {
	b := dd.Block
	km := b.KernelModules
	if km.Set {
		dd.KernelModules = km.Value
		if km.Value == spec.KernelModulesNone {
			return
		}
		want := compat.Flavor(km.Value)
		var fit []uint64
		why := ""
		for _, br := range dd.Branches {
			allowed, w := r.flavorsFor(br)
			if slices.Contains(allowed, want) {
				fit = append(fit, br)
			} else if why == "" || br == dd.Branches[len(dd.Branches)-1] {
				why = r.flavorWhy(br, want, w)
			}
		}
		if len(dd.Branches) > 0 && len(fit) == 0 {
			r.errorf(km.Range, "Kernel modules not available for this host",
				"kernel_modules = %q cannot work with the driver versions the spec allows (%s, %s): %s.",
				km.Value, dd.Versions.Quoted(), at(b.Version.RangeOr(b.DefRange)), why)
			return
		}
		if len(fit) > 0 && len(fit) < len(dd.Branches) {
			dd.Versions, _ = narrow(dd.Versions, fmt.Sprintf(">= %d", fit[0]))
			dd.Branches = fit
		}
		return
	}
	var newest uint64
	if len(dd.Branches) > 0 {
		newest = dd.Branches[len(dd.Branches)-1]
	} else {
		all := compat.DriverBranches()
		newest = all[len(all)-1].Branch
	}
	host, decidedBy := r.moduleHost(newest)
	if host.OpenOnly && host.PreTuring {
		_, why := r.flavorsFor(newest)
		r.errorf(b.DefRange, "No kernel-module flavour serves every GPU",
			"This host mixes GPUs that need different kernel modules: %s. Run them on separate hosts, or pass one to a virtual machine.", why)
		return
	}
	dd.KernelModules = spec.DefaultKernelModules(host)
	from := compat.Source{Table: "driver_branches", Key: strconv.FormatUint(newest, 10)}
	if row, ok := compat.BranchOf(version.MustParse(strconv.FormatUint(newest, 10))); ok {
		from = row.Source
	}
	if decidedBy != nil {
		from = decidedBy.Source
	}
	r.infer("driver", "kernel_modules", string(dd.KernelModules), from)
}

// moduleHost is what the default kernel-module flavour depends on for a
// branch on this host, and the architecture that decides it, if one does.
func (r *resolver) moduleHost(branch uint64) (spec.KernelModuleHost, *compat.Architecture) {
	host := spec.KernelModuleHost{Branch: branch}
	var decidedBy *compat.Architecture
	for _, g := range r.d.GPUs {
		a, ok := compat.Arch(g.Arch)
		if !ok {
			continue
		}
		switch {
		case g.OpenRequired || a.Open == compat.OpenRequired:
			host.OpenOnly = true
			decidedBy = &a
		case a.Open == compat.OpenUnsupported:
			host.PreTuring = true
			if decidedBy == nil {
				decidedBy = &a
			}
		}
	}
	return host, decidedBy
}

// flavorFor is the flavour a branch would install: the spec's, or the
// default for the host's GPUs.
func (r *resolver) flavorFor(b *spec.Driver, branch uint64) spec.KernelModules {
	if b.KernelModules.Set {
		return b.KernelModules.Value
	}
	host, _ := r.moduleHost(branch)
	return spec.DefaultKernelModules(host)
}

// branchOffer is a driver branch a source offers.
type branchOffer struct {
	branch uint64
	// latest is set when the source offers the branch only under the
	// repository's latest names (nvidia-open), not the branch's own.
	latest bool
	// offers are the versions of the branch's main package the spec
	// admits, in the package manager's order.
	offers []listed
}

// offeredBranches lists the branches within versions that src's indexes
// offer in the flavour each would install, newest first.
func (r *resolver) offeredBranches(dd *DesiredDriver, src spec.Source, versions version.Constraint) []branchOffer {
	var out []branchOffer
	for _, b := range slices.Backward(branchesOf(versions)) {
		km := r.flavorFor(dd.Block, b)
		fits := func(up version.Version) bool { return up.Major() == b && versions.Check(up) }
		for _, latest := range []bool{false, true} {
			branch := b
			if latest {
				branch = 0
			}
			names, _, err := r.driverNames(src, km, branch, b)
			main := mainPackage(names)
			if err != nil || main == "" {
				continue
			}
			if got := r.offersWhere(src, []string{main}, fits); len(got) > 0 {
				out = append(out, branchOffer{branch: b, latest: latest, offers: got})
				break
			}
		}
	}
	return out
}

// mainPackage is the first of a driver's packages that installs
// something (not NVIDIA's pinning package); "" when none.
func mainPackage(names []PackageName) string {
	for _, n := range names {
		if !strings.Contains(n.Name, "pinning") {
			return n.Name
		}
	}
	return ""
}

// archiveBranch keeps the driver's versions to what its source's indexes
// offer and, where the spec leaves the branch open, chooses the newest
// branch offered, as ubuntu-drivers does; within it, the version is what
// the package manager would install.
func (r *resolver) archiveBranch(dd *DesiredDriver, vsub hcl.Range) bool {
	offered := r.offeredBranches(dd, dd.Source, dd.Versions)
	if len(offered) == 0 {
		list := r.archive.Listing(dd.Source, DriverPackage)
		if list == "" {
			list = "no driver package"
		}
		r.errorf(vsub, "Driver version not in the archive",
			"The driver block allows %s (%s) from %s, which offers %s.", dd.Versions.Quoted(), at(vsub), r.archive.Describe(dd.Source), list)
		return false
	}
	bo := offered[0]
	dd.latestNames = bo.latest
	if len(dd.Branches) > 1 {
		dd.Versions, _ = narrow(dd.Versions, fmt.Sprintf(">= %d, < %d", bo.branch, bo.branch+1))
		dd.Branches = []uint64{bo.branch}
		r.inferText("driver", "version", fmt.Sprintf("%d.*", bo.branch), r.branchWhy(dd, bo))
	}
	return true
}

// branchWhy says why a branch was chosen: the newest its source offers
// that runs the GPUs and what needs the driver.
func (r *resolver) branchWhy(dd *DesiredDriver, bo branchOffer) string {
	var runs []string
	var models []string
	for _, g := range r.d.GPUs {
		if !slices.Contains(models, g.Model) {
			models = append(models, g.Model)
		}
	}
	if len(models) > 0 {
		runs = append(runs, "supports the host's "+joinAnd(models))
	}
	if dd.FloorFor != "" {
		runs = append(runs, fmt.Sprintf("runs %s (%s or newer)", dd.FloorFor, dd.Floor))
	}
	why := "the newest branch"
	if len(runs) > 0 {
		why += " that " + strings.Join(runs, " and ")
	}
	return why + ": " + r.offerText(dd.Source, bo.offers)
}

// flavorWhy says why a branch does not offer a flavour to the host.
func (r *resolver) flavorWhy(branch uint64, want compat.Flavor, gpuWhy string) string {
	if gpuWhy != "" {
		return gpuWhy
	}
	row, ok := compat.BranchOf(version.MustParse(strconv.FormatUint(branch, 10)))
	if want == compat.FlavorOpen && ok && !row.OpenModules {
		return fmt.Sprintf("R%d does not ship the open kernel modules, which start with R515 (%s)", branch, row.Source)
	}
	for _, g := range r.d.GPUs {
		a, known := compat.Arch(g.Arch)
		if !known {
			continue
		}
		if want == compat.FlavorProprietary && (g.OpenRequired || a.Open == compat.OpenRequired) {
			return fmt.Sprintf("%s is driven only by the open kernel modules (%s)", g.Describe(), a.Source)
		}
		if want == compat.FlavorOpen && a.Open == compat.OpenUnsupported {
			return fmt.Sprintf("%s is not supported by the open kernel modules, which need Turing or newer (%s)", g.Describe(), a.Source)
		}
	}
	return fmt.Sprintf("R%d offers no %s modules for this host", branch, want)
}

// checkObservedDriver warns when the spec leaves the driver alone and the
// installed one cannot run what the spec installs.
func (r *resolver) checkObservedDriver() {
	have, from := doctor.DriverVersion(r.obs)
	if have.IsZero() {
		return
	}
	for _, n := range r.needs {
		floor := n.MinorCompat
		if floor.IsZero() {
			floor = n.Exact
		}
		if floor.IsZero() || have.Compare(floor) >= 0 {
			continue
		}
		r.warnf(n.Range, "The installed driver is too old for "+n.Who,
			"The host's driver is %s (%s), and %s needs %s or newer (%s). The spec has no driver block, so gpuenv leaves the driver alone; add one to upgrade it.",
			have, from, n.Who, floor, n.From)
	}
}
