package planner

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpuenv/gpuenv/planner/compat"
	"github.com/gpuenv/gpuenv/planner/compat/nvidiarepo"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/spec"
	"github.com/gpuenv/gpuenv/spec/lazyregexp"
	"github.com/gpuenv/gpuenv/spec/version"
)

// sourceOrder is the order in which sources are tried when a block leaves
// its source out and nothing installed satisfies it: the distribution
// first, as its own packages follow its kernels and libraries, then a
// vendor repository that is configured.
var sourceOrder = []spec.Source{spec.SourceDistro, spec.SourceNVIDIA}

// sourceCase is one block's question: which source its packages come
// from.
type sourceCase struct {
	block string // "driver", "cuda", "cudnn"
	attr  spec.Attr[spec.Source]
	def   hcl.Range
	// what names what the spec asks for, for messages: "CUDA \"12.4\"";
	// noun names the component's packages: "CUDA toolkit package".
	what, noun string
	// installed is what the host has that satisfies the spec.
	installed installedPart
	// offers lists what src's indexes offer that satisfies the spec,
	// what the package manager would pick from it first.
	offers func(src spec.Source) []listed
	// component tells the packages of the component apart, to list what
	// each source offers when none satisfies the spec.
	component func(name string) bool
	// tables says, for a host whose lists are not on disk, whether
	// gpuenv's tables have the distribution's archive offer what the spec
	// asks for, with the row that says so or why not.
	tables func() (ok bool, from compat.Source, why string)
}

// installedPart is what the host has of a component that satisfies the
// spec: a package at a version, or files no package installed.
type installedPart struct {
	ok bool
	// what describes it: "cuda-toolkit-12-4 12.4.1-1", "the toolkit at
	// /usr/local/cuda-12.4".
	what         string
	pkg, version string
	// named is the source its package name or file layout belongs to,
	// which is kept when no index says where it came from.
	named spec.Source
}

// listed is one package version a source offers.
type listed struct {
	name  string
	offer Offer
}

// chooseSource sets *dst to the block's source: the spec's, or the one
// inferred (recorded in Desired.Inferred with where it came from). keep
// is set when what is installed satisfies the spec, so that no check of
// the archive applies to it. ok is false after an error.
func (r *resolver) chooseSource(c sourceCase, dst *spec.Source) (keep, ok bool) {
	src, keep, ok := r.inferSource(c)
	if ok {
		*dst = src
	}
	if ok && src == spec.SourceNVIDIA && !keep {
		ok = r.ensureNVIDIA(c)
	}
	return keep, ok
}

// ensureNVIDIA makes sure that NVIDIA's repository, which the block's
// packages come from, is configured: by the host, by a repository block of
// the spec, or by the plan, which adds the one gpuenv's table names for the
// host. A plan never installs from NVIDIA's repository without one: where
// the table cannot give it, that is an error that says why.
func (r *resolver) ensureNVIDIA(c sourceCase) bool {
	if r.specOnly || r.os.Manager == "" {
		return true
	}
	if _, configured := r.configured(spec.SourceNVIDIA); configured {
		return true
	}
	if r.awaitsThirdParty() {
		// A source of the host's that is neither the distribution's nor
		// NVIDIA's by name has no lists on disk yet: it may be a mirror
		// of NVIDIA's repository (an air-gapped site's, a file:// tree),
		// which its lists, fetched first at apply, will tell. What it
		// offers is known after apply; adding NVIDIA's repository from
		// the internet beside it is not the plan's to decide.
		return true
	}
	repo, err := r.nvidiaTable()
	if err != nil {
		r.errorf(c.def, "NVIDIA's repository cannot be added",
			"The %s block's packages come from NVIDIA's repository, which no package source of this host and no repository block of the spec configures, and gpuenv does not add it: %s. Add a repository block for it (a mirror's URL and its keyring), or configure it on the host.", c.block, err)
		return false
	}
	if r.d.NVIDIARepository == nil {
		r.d.NVIDIARepository = &NVIDIARepository{Repository: repo}
	}
	if !slices.Contains(r.d.NVIDIARepository.For, c.block) {
		r.d.NVIDIARepository.For = append(r.d.NVIDIARepository.For, c.block)
	}
	return true
}

// awaitsThirdParty reports whether a configured source that is neither
// the distribution's nor NVIDIA's awaits its lists.
func (r *resolver) awaitsThirdParty() bool {
	for _, m := range r.obs.PackageIndexes.Missing {
		if nvidiarepo.OwnFile(m.File) {
			continue
		}
		if classify(r.obs.OS, m, siteOf(m.URI), nil, nil) == "" {
			return true
		}
	}
	return false
}

// nvidiaTable is NVIDIA's CUDA repository for the host from gpuenv's
// table, or why gpuenv may not add it.
func (r *resolver) nvidiaTable() (nvidiarepo.Repository, error) {
	repo, err := nvidiarepo.CUDA(nvidiaHost(r.obs))
	if err != nil {
		return repo, err
	}
	if err := repo.Usable(); err != nil {
		return repo, fmt.Errorf("NVIDIA's repository for %s is %s, but %w", r.os.Title, repo.URL, err)
	}
	if repo.OS == "sles" {
		return repo, fmt.Errorf("NVIDIA's repository for %s is %s, which is for zypper, and gpuenv installs packages with apt and dnf only", r.os.Title, repo.URL)
	}
	if want := map[string]plan.Manager{"deb": plan.ManagerApt, "rpm": plan.ManagerDnf}[repo.Family]; want != r.os.Manager {
		return repo, fmt.Errorf("NVIDIA's repository for %s is %s, a %s repository, and the host's package manager is %s", r.os.Title, repo.URL, want, r.os.Manager)
	}
	return repo, nil
}

// nvidiaHost is the host as the repository table looks it up.
func nvidiaHost(obs *facts.Observation) nvidiarepo.Host {
	return nvidiarepo.Host{ID: obs.OS.ID, IDLike: obs.OS.IDLike, VersionID: obs.OS.VersionID, Arch: obs.OS.Arch, WSL: obs.Context.WSL != nil}
}

func (r *resolver) inferSource(c sourceCase) (src spec.Source, keep, ok bool) {
	keep = c.installed.ok
	if c.attr.Set {
		return c.attr.Value, keep, true
	}
	if r.os.Manager == "" {
		// Nothing can be installed on this host (resolvePackages says
		// so); the source does not matter.
		return spec.SourceDistro, keep, true
	}
	a := r.archive
	if in := c.installed; in.ok {
		origin, index, found := a.Origin(in.pkg, in.version)
		switch {
		case found && origin != "":
			r.inferText(c.block, "source", string(origin), fmt.Sprintf("the installed %s, which satisfies the spec and which %s lists", in.what, a.DescribeIndex(index)))
			return origin, true, true
		case found:
			r.inferText(c.block, "source", string(in.named), fmt.Sprintf("the installed %s, which satisfies the spec and is kept as it is: %s lists it, which is neither the distribution's archive nor NVIDIA's repository", in.what, a.DescribeIndex(index)))
		case a == nil:
			r.inferText(c.block, "source", string(in.named), fmt.Sprintf("the installed %s, which satisfies the spec and is kept as it is; no package index is on disk, so its origin is unknown", in.what))
		default:
			r.inferText(c.block, "source", string(in.named), fmt.Sprintf("the installed %s, which satisfies the spec and is kept as it is; no package index lists that version, so its origin is unknown", in.what))
		}
		return in.named, true, true
	}
	var passed []string
	for _, s := range sourceOrder {
		if a.Knows(s) {
			if got := c.offers(s); len(got) > 0 {
				r.inferText(c.block, "source", string(s), r.offerText(s, got)+strings.Join(passed, ""))
				return s, false, true
			}
			passed = append(passed, fmt.Sprintf("; %s offers none that the spec admits", a.Describe(s)))
			continue
		}
		if s == spec.SourceDistro {
			if fits, from, _ := c.tables(); fits {
				r.d.Inferred = append(r.d.Inferred, plan.Inference{Address: c.block, Attr: "source", Value: string(s),
					From: from.Cited() + "; the distribution's package lists are not on disk, so gpuenv's tables say what its archive offers", Unverified: from.UnverifiedText()})
				return s, false, true
			}
			continue
		}
		if where, configured := r.configured(s); configured {
			r.inferText(c.block, "source", string(s), fmt.Sprintf("%s is configured (%s) and its lists are not on disk, so what it offers is known after apply", a.Describe(s), where))
			return s, false, true
		}
		if repo, err := r.nvidiaTable(); err == nil && s == spec.SourceNVIDIA {
			r.inferText(c.block, "source", string(s), fmt.Sprintf("NVIDIA's repository for %s (%s), which the plan adds as gpuenv's table of NVIDIA's repositories gives it (%s), as nothing installed or configured offers %s; what it offers is known after apply%s",
				r.os.Title, repo.URL, repo.Source, c.what, strings.Join(passed, "")))
			return s, false, true
		}
	}
	r.errorf(c.def, "No package source offers "+c.what, "The %s block leaves source out, and no package source offers %s. %s", c.block, c.what, r.sourcesText(c))
	return "", false, false
}

// offerText says what a source offers first and, when a pin or an
// index's lower priority put it ahead of a newer version, why.
func (r *resolver) offerText(s spec.Source, got []listed) string {
	first := got[0]
	var same []Offer
	for _, l := range got {
		if l.name == first.name {
			same = append(same, l.offer)
		}
	}
	text := fmt.Sprintf("%s, which offers %s %s (%s)", r.archive.Describe(s), first.name, first.offer.Version, r.archive.DescribeIndex(first.offer.Index))
	if note := r.archive.PreferenceNote(same); note != "" {
		text += "; " + note
	}
	return text
}

// sourcesText says what each source offers of a component, for the error
// that none offers what the spec asks for.
func (r *resolver) sourcesText(c sourceCase) string {
	a := r.archive
	var parts []string
	for _, s := range sourceOrder {
		switch {
		case a.Knows(s):
			if l := a.Listing(s, c.component); l != "" {
				parts = append(parts, fmt.Sprintf("%s offers %s.", a.Describe(s), l))
			} else {
				parts = append(parts, fmt.Sprintf("%s offers no %s.", a.Describe(s), c.noun))
			}
		case s == spec.SourceDistro:
			_, _, why := c.tables()
			parts = append(parts, why)
		default:
			// Where the table gives the repository, inferSource chose
			// it and this error is not reached.
			if _, err := r.nvidiaTable(); err != nil {
				parts = append(parts, fmt.Sprintf("NVIDIA's repository is not configured, and gpuenv does not add it: %s. Add a repository block for it, and source = \"nvidia\" to the block.", err))
			}
		}
	}
	return strings.Join(parts, " ")
}

// configured reports whether a source other than the distribution's has
// a configured package source, fetched or not, and names where.
func (r *resolver) configured(s spec.Source) (string, bool) {
	if s != spec.SourceNVIDIA {
		return "", false
	}
	for _, rp := range r.spec.Repositories {
		if !rp.IsAbsent() {
			return fmt.Sprintf("the repository block %q at %s", rp.Name, at(rp.DefRange)), true
		}
	}
	if f := r.archive.ConfiguredByHost(s); f != "" {
		return f, true
	}
	for _, rp := range r.obs.Repositories {
		if nvidiarepo.OwnFile(rp.File) {
			// The repository gpuenv added itself is planned again
			// (ensureNVIDIA), so that its files are checked.
			continue
		}
		for _, u := range rp.URIs {
			if site := siteOf(u); site == "nvidia.com" || strings.HasSuffix(site, ".nvidia.com") {
				return rp.File, true
			}
		}
	}
	return "", false
}

// inferText records a value inferred from the host rather than a table.
func (r *resolver) inferText(address, attr, value, from string) {
	r.d.Inferred = append(r.d.Inferred, plan.Inference{Address: address, Attr: attr, Value: value, From: from})
}

// installedPart is a component installed by package pkg ("pkg version"
// and where), or by files no package owns (files), whose package name or
// layout belongs to named.
func (r *resolver) installedPart(pkg string, named spec.Source, files, where string) installedPart {
	if pkg == "" {
		return installedPart{ok: true, what: files, named: named}
	}
	v := installedVersion(r.obs, pkg)
	return installedPart{ok: true, what: pkg + " " + v + where, pkg: pkg, version: v, named: named}
}

// sourceNamed is the distribution's source where the names or layout of
// what is installed are the distribution's, else NVIDIA's.
func sourceNamed(distro bool) spec.Source {
	if distro {
		return spec.SourceDistro
	}
	return spec.SourceNVIDIA
}

// installedVersion is the installed version of a package, "" when none.
func installedVersion(obs *facts.Observation, name string) string {
	for _, p := range obs.Packages.Packages {
		if p.Name == name && p.State == facts.StateInstalled {
			return p.Version
		}
	}
	return ""
}

// offersWhere lists the versions of the named packages that src offers
// and that fit, in the package manager's order for each package.
func (r *resolver) offersWhere(src spec.Source, names []string, fits func(up version.Version) bool) []listed {
	var out []listed
	for _, n := range names {
		for _, o := range r.archive.Offers(n, src) {
			if up, err := r.archive.Upstream(o.Version); err == nil && fits(up) {
				out = append(out, listed{name: n, offer: o})
			}
		}
	}
	return out
}

// driverSource chooses the driver's source: probe is the versions the
// spec and what needs the driver allow.
func (r *resolver) driverSource(dd *DesiredDriver, probe version.Constraint) (keep, ok bool) {
	b := dd.Block
	c := sourceCase{
		block: "driver", attr: b.Source, def: b.Version.RangeOr(b.DefRange),
		what:      "the driver (" + probe.Quoted() + ")",
		noun:      "driver package",
		component: DriverPackage,
		offers: func(s spec.Source) []listed {
			if got := r.offeredBranches(dd, s, probe); len(got) > 0 {
				return got[0].offers
			}
			return nil
		},
		tables: func() (bool, compat.Source, string) {
			rows := r.os.rowsFor(compat.RepoDistro, "driver")
			if len(rows) == 0 {
				return false, compat.Source{}, fmt.Sprintf("gpuenv's package tables name no driver package in %s's own archive.", r.os.Title)
			}
			for _, p := range rows {
				if p.Applies.IsZero() {
					return true, p.Source, ""
				}
				if _, fits := narrow(probe, p.Applies.String()); fits {
					return true, p.Source, ""
				}
			}
			return false, rows[0].Source, fmt.Sprintf("%s's archive has the %s driver branch only (%s, %s).", r.os.Title, strings.TrimSuffix(rows[0].Applies.String(), ".*"), rows[0].Name, rows[0].Source)
		},
	}
	for _, p := range r.obs.Packages.Packages {
		// The package that names the whole driver says more than its
		// kernel module's (nvidia-driver-550 rather than nvidia-dkms-550).
		if c.installed.ok && !strings.Contains(c.installed.pkg, "dkms") {
			break
		}
		if p.State != facts.StateInstalled || !DriverPackage(p.Name) {
			continue
		}
		up, err := upstreamOf(r.os.Manager, p.Version)
		if err != nil || !probe.Check(up) {
			continue
		}
		if km := b.KernelModules; km.Set && km.Value != spec.KernelModulesNone && InstalledDriverFlavor(r.obs, p.Name) != km.Value {
			continue
		}
		if c.installed.ok && strings.Contains(p.Name, "dkms") {
			continue
		}
		c.installed = installedPart{ok: true, what: p.Name + " " + p.Version, pkg: p.Name, version: p.Version, named: r.driverNamed(p.Name)}
	}
	return r.chooseSource(c, &dd.Source)
}

// driverNamed is the source whose package tables name an installed driver
// package: NVIDIA's for its own names (cuda-drivers, nvidia-open) and
// where the distribution has no driver of its own.
func (r *resolver) driverNamed(name string) spec.Source {
	nvidiaOnly := strings.HasPrefix(name, "cuda-drivers") || name == "nvidia-open" || strings.HasPrefix(name, "nvidia-open-") && name != "nvidia-open-kernel-dkms"
	if nvidiaOnly || len(r.os.rowsFor(compat.RepoDistro, "driver")) == 0 {
		return spec.SourceNVIDIA
	}
	return spec.SourceDistro
}

// driverProbe is the versions the spec allows, narrowed to what the
// toolkit and frameworks need at the least (minor-version compatibility
// where it applies), for judging what is installed and what sources offer
// before the driver is resolved.
func (r *resolver) driverProbe(c version.Constraint) version.Constraint {
	for _, n := range r.needs {
		floor := n.MinorCompat
		if floor.IsZero() {
			floor = n.Exact
		}
		if !floor.IsZero() {
			if narrowed, ok := narrow(c, ">= "+floor.String()); ok {
				c = narrowed
			}
		}
	}
	return c
}

// cudaSource chooses the toolkit's source among the releases rows.
func (r *resolver) cudaSource(dc *DesiredCUDA, rows []compat.CUDARelease) (keep, ok bool) {
	b := dc.Block
	c := sourceCase{
		block: "cuda", attr: b.Source, def: b.Version.RangeOr(b.DefRange),
		what:      "CUDA " + dc.Versions.Quoted(),
		noun:      "CUDA toolkit package",
		component: toolkitPackage,
		offers: func(s spec.Source) []listed {
			return r.cudaOffers(s, dc.Versions, rows)
		},
		tables: func() (bool, compat.Source, string) {
			pkgs := r.os.rowsFor(compat.RepoDistro, "toolkit")
			if len(pkgs) == 0 {
				return false, compat.Source{}, fmt.Sprintf("gpuenv's package tables name no CUDA toolkit package in %s's own archive.", r.os.Title)
			}
			for _, p := range pkgs {
				for _, rel := range rows {
					if p.Applies.IsZero() || p.Applies.Check(rel.Version) {
						return true, p.Source, ""
					}
				}
			}
			return false, pkgs[0].Source, fmt.Sprintf("%s's archive has CUDA %s only (%s, %s).", r.os.Title, strings.TrimSuffix(pkgs[0].Applies.String(), ".*"), pkgs[0].Name, pkgs[0].Source)
		},
	}
	for _, t := range r.obs.CUDA.Toolkits {
		v, err := version.Parse(t.Version)
		if err != nil || !dc.Versions.Check(v) {
			continue
		}
		c.installed = r.installedPart(t.Package, sourceNamed(t.Layout == string(spec.SourceDistro)), "toolkit at "+t.Path, " at "+t.Path)
		break
	}
	return r.chooseSource(c, &dc.Source)
}

// toolkitPackage tells the CUDA toolkit's packages: NVIDIA's
// cuda-toolkit-X-Y and the distributions' nvidia-cuda-toolkit.
var toolkitPackage = lazyregexp.New(`^(nvidia-cuda-toolkit|cuda-toolkit-[0-9]+-[0-9]+)$`).MatchString

// cudaOffers lists the toolkit versions src offers of the releases rows
// within the spec's versions, newest release line first.
func (r *resolver) cudaOffers(src spec.Source, versions version.Constraint, rows []compat.CUDARelease) []listed {
	var out []listed
	seen := map[string]bool{}
	for _, rel := range slices.Backward(rows) {
		names, err := r.os.names(compat.PackageQuery{Repo: repoOf(src), Component: "toolkit", CUDA: rel.Version})
		if err != nil {
			continue
		}
		for _, n := range names {
			if seen[n.Name] {
				continue
			}
			seen[n.Name] = true
			line := mm(rel.Version)
			for _, o := range r.archive.Offers(n.Name, src) {
				if up, err := r.archive.Upstream(o.Version); err == nil && mm(up).Equal(line) && versions.Check(toolkitRelease(o.Version, up)) {
					out = append(out, listed{name: n.Name, offer: o})
				}
			}
		}
	}
	return out
}

// toolkitRelease is the CUDA release a toolkit package of version raw
// (upstream part up) carries, which a spec's version names: Debian
// writes it after a tilde in the upstream part (nvidia-cuda-toolkit
// 11.8.89~11.8.0-5~deb12u1 is CUDA 11.8.0, its nvcc 11.8.89); NVIDIA's
// packages have it as their upstream version.
func toolkitRelease(raw string, up version.Version) version.Version {
	if _, rest, ok := strings.Cut(raw, ":"); ok {
		raw = rest
	}
	if i := strings.LastIndexByte(raw, '-'); i > 0 {
		raw = raw[:i]
	}
	if _, rel, ok := strings.Cut(raw, "~"); ok {
		if v, err := version.Parse(rel); err == nil {
			return v
		}
	}
	return up
}

// cudnnSource chooses cuDNN's source.
func (r *resolver) cudnnSource(dn *DesiredCuDNN) (keep, ok bool) {
	b := dn.Block
	c := sourceCase{
		block: "cudnn", attr: b.Source, def: b.Version.RangeOr(b.DefRange),
		what:      "cuDNN " + dn.Versions.Quoted(),
		noun:      "cuDNN package",
		component: cudnnPackage,
		offers: func(s spec.Source) []listed {
			names, err := r.cudnnNames(dn, s)
			if err != nil || len(names) == 0 {
				return nil
			}
			return r.offersWhere(s, []string{names[0].Name}, dn.Versions.Check)
		},
		tables: func() (bool, compat.Source, string) {
			names, err := r.cudnnNames(dn, spec.SourceDistro)
			if err != nil || len(names) == 0 {
				return false, compat.Source{}, fmt.Sprintf("gpuenv's package tables name no cuDNN package for CUDA %d in %s's own archive.", dn.CUDAMajor, r.os.Title)
			}
			// Where the tables know the archive's versions of the
			// package, one of them must be the cuDNN the spec asks for.
			known := compat.DistroPackages(r.obs.OS.ID, r.obs.OS.VersionID, names[0].Name)
			var have []string
			for _, p := range known {
				if v, err := version.FromDebian(p.Version); err == nil && dn.Versions.Check(v) {
					return true, names[0].row, ""
				}
				have = append(have, p.Version)
			}
			if len(known) > 0 {
				return false, names[0].row, fmt.Sprintf("%s's archive has %s %s only (%s).", r.os.Title, names[0].Name, strings.Join(have, ", "), known[0].Source.Cited())
			}
			return true, names[0].row, ""
		},
	}
	for _, in := range r.obs.CuDNN.Installs {
		v, err := version.Parse(in.Version)
		if in.PackageVersion != "" {
			if pv, perr := version.FromDebian(in.PackageVersion); perr == nil {
				v, err = pv, nil
			}
		}
		sameCUDA := in.CUDAMajor == "" || in.CUDAMajor == fmt.Sprint(dn.CUDAMajor)
		if err != nil || !dn.Versions.Check(v) || !sameCUDA {
			continue
		}
		c.installed = r.installedPart(in.Package, sourceNamed(strings.HasPrefix(in.Package, "nvidia-cudnn")), "cuDNN "+in.Version+" ("+in.Header+")", "")
		break
	}
	return r.chooseSource(c, &dn.Source)
}

// cudnnPackage tells cuDNN's packages: NVIDIA's libcudnnN(-cuda-M) and
// Debian's nvidia-cudnn.
var cudnnPackage = lazyregexp.New(`^(nvidia-cudnn|libcudnn[0-9]+(-cuda-[0-9]+)?)$`).MatchString
