package planner

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/gpuenv/gpuenv/planner/compat"
	"github.com/gpuenv/gpuenv/planner/compat/nvidiarepo"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/spec"
	"github.com/gpuenv/gpuenv/spec/lazyregexp"
	"github.com/gpuenv/gpuenv/spec/version"
)

// Archive is what the package indexes on disk offer, told apart by the
// source a spec names: the distribution's own archive, or NVIDIA's
// repositories (with the spec's repository blocks, which serve the same
// packages from a mirror). Resolve builds it from the observation, so that
// sources are inferred and versions chosen from the same facts a saved
// plan's fingerprint covers, without a process.
//
// An index that belongs to neither (a PPA, another vendor's repository)
// offers nothing to either source.
type Archive struct {
	manager plan.Manager
	ix      *facts.PackageIndexes
	osTitle string
	// source is each index's source, by path.
	source map[string]spec.Source
	// listed counts each source's indexes.
	listed map[spec.Source]int
	// unfetched are configured sources whose lists are not on disk, and
	// the spec's repositories that no index comes from yet, by source:
	// what they offer is known only after an update.
	unfetched map[spec.Source][]string
	byName    map[string]*facts.IndexedPackage
	// host names, by source, a sources file of the host's own (not one
	// gpuenv wrote for the NVIDIA repository it adds) that configures it.
	host map[spec.Source]string
}

// Offer is one version of a package that a source's indexes list.
type Offer struct {
	Version string
	// Priority is the package manager's priority for the version, and
	// PriorityFrom what gave it (facts.IndexedVersion).
	Priority     int
	PriorityFrom string
	// Pinned is set when a pin of apt's preferences gave the priority.
	Pinned bool
	// Index is the first of the source's indexes that lists it.
	Index string
}

// NewArchive reads the observation's package indexes for the host's
// package manager; nil when the host has none of that manager's on disk
// (its lists were never fetched, or it has no package manager gpuenv
// knows), so that callers fall back to gpuenv's tables.
func NewArchive(obs *facts.Observation, s *spec.Spec) *Archive {
	ix := &obs.PackageIndexes
	os := osOf(obs.OS)
	if os.Manager == "" || ix.Manager != string(os.Manager) || len(ix.Indexes) == 0 {
		return nil
	}
	a := &Archive{
		manager: os.Manager, ix: ix, osTitle: os.Title,
		source:    make(map[string]spec.Source, len(ix.Indexes)),
		listed:    map[spec.Source]int{},
		unfetched: map[spec.Source][]string{},
		byName:    make(map[string]*facts.IndexedPackage, len(ix.Packages)),
		host:      map[spec.Source]string{},
	}
	var repoURLs []string
	if s != nil {
		for _, r := range s.Repositories {
			if !r.IsAbsent() && r.URL.Set {
				repoURLs = append(repoURLs, strings.TrimSuffix(r.URL.Value, "/"))
			}
		}
	}
	// The repository gpuenv's table names for the host is NVIDIA's
	// wherever it is (a test's copy of it too), configured or not.
	var tableURL string
	if repo, err := nvidiarepo.CUDA(nvidiaHost(obs)); err == nil {
		tableURL = strings.TrimSuffix(repo.URL, "/")
	}
	mirrors := nvidiaMirrors(ix)
	fetched := map[string]bool{}
	for i := range ix.Indexes {
		x := &ix.Indexes[i]
		site := x.Site
		if site == "" {
			site = siteOf(x.Source.URI)
		}
		src := classify(obs.OS, x.Source, site, x.Release, repoURLs)
		// An index the distribution's own Release signs stays the
		// distribution's, whatever it lists.
		own := x.Release != nil && x.Release.Origin != "" && strings.EqualFold(x.Release.Origin, obs.OS.ID)
		if tableURL != "" && strings.TrimSuffix(x.Source.URI, "/") == tableURL || mirrors[x.Path] && !own {
			src = spec.SourceNVIDIA
		}
		a.source[x.Path] = src
		a.listed[src]++
		a.noteHost(src, x.Source.File)
		fetched[strings.TrimSuffix(x.Source.URI, "/")] = true
	}
	for _, m := range ix.Missing {
		src := classify(obs.OS, m, siteOf(m.URI), nil, repoURLs)
		if tableURL != "" && strings.TrimSuffix(m.URI, "/") == tableURL {
			src = spec.SourceNVIDIA
		}
		a.unfetched[src] = append(a.unfetched[src], m.URI)
		a.noteHost(src, m.File)
	}
	if obs.OS.ID == "debian" {
		// Debian's GPU packages live in contrib and non-free, which a
		// default installation does not enable and the plan enables
		// first: until apt has fetched those components' lists, what the
		// distribution offers is known only after apply.
		have := map[string]bool{}
		for i := range ix.Indexes {
			if a.source[ix.Indexes[i].Path] == spec.SourceDistro {
				have[ix.Indexes[i].Source.Component] = true
			}
		}
		for _, c := range compat.DistroComponents(obs.OS.ID, obs.OS.VersionID) {
			if !have[c] {
				a.unfetched[spec.SourceDistro] = append(a.unfetched[spec.SourceDistro], c)
			}
		}
	}
	for _, u := range repoURLs {
		if !fetched[u] {
			a.unfetched[spec.SourceNVIDIA] = append(a.unfetched[spec.SourceNVIDIA], u)
		}
	}
	for i := range ix.Packages {
		a.byName[ix.Packages[i].Name] = &ix.Packages[i]
	}
	return a
}

// nvidiaOnly are package names only NVIDIA's CUDA repository publishes
// (compat-facts.md §6 and §7: the toolkit's per-release packages, the
// driver's meta packages and pins, RHEL's DKMS kmods, cuDNN 9's per-CUDA
// packages); no distribution's archive ships them.
var nvidiaOnly = lazyregexp.New(`^(cuda-toolkit-[0-9]+-[0-9]+|cuda-drivers(-[0-9]+)?|nvidia-driver-pinning-[0-9]+|kmod-nvidia-(latest|open)-dkms|libcudnn[0-9]+-cuda-[0-9]+)$`)

// nvidiaMirrors names the indexes that list packages only NVIDIA's
// repository publishes: a mirror of it under another name (an
// air-gapped site's, a file:// tree, a dnf repository of another id),
// which is NVIDIA's repository for planning, so that the plan does not
// add the one on the internet beside it.
func nvidiaMirrors(ix *facts.PackageIndexes) map[string]bool {
	out := map[string]bool{}
	for i := range ix.Packages {
		p := &ix.Packages[i]
		if !nvidiaOnly.MatchString(p.Name) {
			continue
		}
		for _, v := range p.Versions {
			for _, o := range v.Origins {
				out[o] = true
			}
		}
	}
	return out
}

// noteHost records that a sources file of the host's configures src.
func (a *Archive) noteHost(src spec.Source, file string) {
	if _, ok := a.host[src]; !ok && file != "" && !nvidiarepo.OwnFile(file) {
		a.host[src] = file
	}
}

// ConfiguredByHost names a sources file of the host's own that configures
// src, fetched or not, by its URL or by what its Release file says (a
// mirror of NVIDIA's repository under another name); "" when none does.
// The files gpuenv writes for the NVIDIA repository it adds do not count.
func (a *Archive) ConfiguredByHost(src spec.Source) string {
	if a == nil {
		return ""
	}
	return a.host[src]
}

// classify tells which source an index belongs to: NVIDIA's by its site,
// its Release's Origin or Label, or a repository block of the spec; the
// distribution's by its Release's Origin, or where there is none, its
// suite's codename (dnf's repositories other than NVIDIA's are the
// distribution's); else neither (a PPA, another vendor's repository).
func classify(o facts.OS, src facts.IndexSource, site string, rel *facts.ReleaseData, repoURLs []string) spec.Source {
	nvidia := site == "nvidia.com" || strings.HasSuffix(site, ".nvidia.com") ||
		slices.Contains(repoURLs, strings.TrimSuffix(src.URI, "/"))
	if rel != nil {
		nvidia = nvidia || strings.Contains(strings.ToUpper(rel.Origin+" "+rel.Label), "NVIDIA")
	}
	switch {
	case nvidia:
		return spec.SourceNVIDIA
	case src.Repo != "":
		return spec.SourceDistro
	case rel != nil && rel.Origin != "":
		// A PPA names the same codename under an origin of its own.
		if strings.EqualFold(rel.Origin, o.ID) {
			return spec.SourceDistro
		}
	case o.Codename != "":
		suite, _, _ := strings.Cut(src.Suite, "-")
		if rel != nil && rel.Codename != "" {
			suite = rel.Codename
		}
		if suite == o.Codename {
			return spec.SourceDistro
		}
	}
	return ""
}

func siteOf(uri string) string {
	u, err := url.Parse(uri)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

// Knows reports whether the archive can say what src offers: some index
// of src is on disk and none of its configured sources awaits an update.
// Where it cannot, what src offers is known only after apply.
func (a *Archive) Knows(src spec.Source) bool {
	return a != nil && a.listed[src] > 0 && len(a.unfetched[src]) == 0
}

// Configured reports whether src has a configured source, fetched or not.
func (a *Archive) Configured(src spec.Source) bool {
	return a != nil && (a.listed[src] > 0 || len(a.unfetched[src]) > 0)
}

// Offers lists the versions of package name that src's indexes list, in
// the order the package manager prefers them: apt's highest priority
// first (dnf's lowest), the newest first on a tie; the first is what the
// manager would install from src. Versions apt may never install
// (priority below 0) are left out.
func (a *Archive) Offers(name string, src spec.Source) []Offer {
	if a == nil {
		return nil
	}
	p := a.byName[name]
	if p == nil {
		return nil
	}
	var out []Offer
	for _, v := range p.Versions {
		if a.manager == plan.ManagerApt && v.Priority < 0 {
			continue
		}
		for _, o := range v.Origins {
			if a.source[o] == src {
				out = append(out, Offer{Version: v.Version, Priority: v.Priority, PriorityFrom: v.PriorityFrom, Pinned: v.Pin != 0, Index: o})
				break
			}
		}
	}
	// The facts list versions newest first; a stable sort keeps that
	// order within a priority.
	slices.SortStableFunc(out, func(x, y Offer) int {
		if a.manager == plan.ManagerDnf {
			return x.Priority - y.Priority
		}
		return y.Priority - x.Priority
	})
	return out
}

// Origin returns the source and the index that list the installed
// version of package name; ok is false when no index lists it (the lists
// were never fetched, or no longer carry that version), so that its
// origin is unknown.
func (a *Archive) Origin(name, installed string) (src spec.Source, index string, ok bool) {
	if a == nil || installed == "" {
		return "", "", false
	}
	p := a.byName[name]
	if p == nil {
		return "", "", false
	}
	for _, v := range p.Versions {
		if v.Version == installed && len(v.Origins) > 0 {
			return a.source[v.Origins[0]], v.Origins[0], true
		}
	}
	return "", "", false
}

// Upstream is the part of a package version that compares with a spec's
// versions ("550.54.15" of "550.54.15-0ubuntu1", of "3:550.54.15-1.el9").
func (a *Archive) Upstream(raw string) (version.Version, error) {
	return upstreamOf(a.manager, raw)
}

func upstreamOf(m plan.Manager, raw string) (version.Version, error) {
	if m == plan.ManagerDnf {
		return version.FromRPM(raw)
	}
	return version.FromDebian(raw)
}

// Describe names a source's indexes for messages: "NVIDIA's repository
// (https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/)",
// "Ubuntu 22.04's archive (jammy, jammy-updates)".
func (a *Archive) Describe(src spec.Source) string {
	var where []string
	add := func(w string) {
		if w != "" && !slices.Contains(where, w) {
			where = append(where, w)
		}
	}
	if a != nil {
		for i := range a.ix.Indexes {
			x := &a.ix.Indexes[i]
			if a.source[x.Path] != src {
				continue
			}
			switch {
			case src == spec.SourceNVIDIA:
				add(x.Source.URI)
			case x.Source.Repo != "":
				add(x.Source.Repo)
			default:
				add(x.Source.Suite)
			}
		}
	}
	name := "NVIDIA's repository"
	if src == spec.SourceDistro {
		name = "the distribution's archive"
		if a != nil {
			name = a.osTitle + "'s archive"
		}
	}
	if len(where) == 0 {
		return name
	}
	return fmt.Sprintf("%s (%s)", name, strings.Join(where, ", "))
}

// DescribeIndex names one index for an inferred value's origin: its path
// and what its Release says of it.
func (a *Archive) DescribeIndex(path string) string {
	for i := range a.ix.Indexes {
		x := &a.ix.Indexes[i]
		if x.Path != path {
			continue
		}
		var what []string
		if r := x.Release; r != nil {
			for _, f := range []string{r.Label, r.Suite} {
				if f != "" && !slices.Contains(what, f) {
					what = append(what, f)
				}
			}
		}
		if len(what) == 0 {
			return path
		}
		return fmt.Sprintf("%s (%s)", path, strings.Join(what, ", "))
	}
	return path
}

// compare orders two package versions as the package manager does.
func (a *Archive) compare(x, y string) int {
	if a.manager == plan.ManagerDnf {
		return version.CompareRPM(x, y)
	}
	c, err := version.CompareDebian(x, y)
	if err != nil {
		return strings.Compare(x, y)
	}
	return c
}

// PreferenceNote says why the first of offers wins when a newer one is
// among them: the priorities that put it first, as the package manager
// would choose ("apt prefers 550.90.07-0ubuntu1 at priority 600 (pin …)
// over the newer 550.120-0ubuntu0.22.04.1 at priority 500 (default)"). offers are one
// package's versions that a source offers and the spec admits, in
// Offers' order; "" when the first is also the newest.
func (a *Archive) PreferenceNote(offers []Offer) string {
	if a == nil || len(offers) < 2 {
		return ""
	}
	first := offers[0]
	for _, o := range offers[1:] {
		if o.Priority != first.Priority && a.compare(o.Version, first.Version) > 0 {
			return fmt.Sprintf("%s prefers %s at priority %d (%s) over the newer %s at priority %d (%s)",
				a.manager, first.Version, first.Priority, first.PriorityFrom, o.Version, o.Priority, o.PriorityFrom)
		}
	}
	return ""
}

// Listing says what src's indexes offer of the packages match accepts:
// "cuda-toolkit-12-4 12.4.1-1, 12.4.0-1; cuda-toolkit-12-6 12.6.3-1",
// "" when none.
func (a *Archive) Listing(src spec.Source, match func(name string) bool) string {
	if a == nil {
		return ""
	}
	const most = 8
	var parts []string
	more := 0
	for i := range a.ix.Packages {
		p := &a.ix.Packages[i]
		if !match(p.Name) {
			continue
		}
		var vs []string
		for _, v := range p.Versions {
			if a.manager == plan.ManagerApt && v.Priority < 0 {
				continue
			}
			if slices.ContainsFunc(v.Origins, func(o string) bool { return a.source[o] == src }) {
				vs = append(vs, v.Version)
			}
		}
		if len(vs) == 0 {
			continue
		}
		if len(parts) == most {
			more++
			continue
		}
		parts = append(parts, p.Name+" "+strings.Join(vs, ", "))
	}
	if more > 0 {
		parts = append(parts, fmt.Sprintf("and %d more packages", more))
	}
	return strings.Join(parts, "; ")
}
