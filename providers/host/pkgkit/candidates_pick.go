package pkgkit

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/compat"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/host/pkgdb"
	"github.com/gpuenv/gpuenv/spec"
	"github.com/gpuenv/gpuenv/spec/version"
)

// fits tells whether a version (raw, and its upstream part) is one the
// query admits.
func (q PickQuery) fits(raw string, up version.Version) bool {
	v := up
	if q.Release != nil {
		v = q.Release(raw, up)
	}
	return q.Versions.Check(v) && (q.Accept == nil || q.Accept(raw, up))
}

// PickQuery asks for one version at which a set of packages can be
// installed together.
type PickQuery struct {
	Manager  plan.Manager
	Packages []planner.PackageName
	// Versions constrains the upstream version; the zero value admits all.
	Versions version.Constraint
	// Accept, when set, must also hold for a version (the raw package
	// version and its upstream part).
	Accept func(raw string, upstream version.Version) bool
	// Release, when set, is the version Versions constrains where that is
	// not the upstream part: Debian's nvidia-cuda-toolkit
	// 11.8.89~11.8.0-5~deb12u1 is CUDA 11.8.0, the release after the tilde.
	Release func(raw string, upstream version.Version) version.Version
	// OS and OSVersion name the table of distribution archives used when
	// the package manager lists nothing yet.
	OS, OSVersion string
	// Pending is set when the same plan configures the repositories the
	// packages come from: a package the manager does not list yet then
	// has its version known only after apply, instead of being an error.
	Pending bool
	// Archive and Source: where the archive knows what Source offers
	// (planner.Archive.Knows), the versions are those of Source's
	// indexes alone, in the package manager's order of preference, and
	// what they do not list is an error that says what they do.
	Archive *planner.Archive
	Source  spec.Source
	// Adds is set when the plan adds Source's repository itself
	// (Desired.NVIDIARepository): until apply has fetched its index,
	// the version is known after apply.
	Adds bool
}

// Picked is the version chosen.
type Picked struct {
	// Version is empty when it is known only after apply (PickQuery.Pending);
	// Constraint then says which versions apply may pick.
	Version    string
	Constraint string
	// Versions holds, for a package of the set whose version is not
	// Version (a dnf set shares only its upstream version:
	// pkgdb.PickVersions), the version it is installed at.
	Versions map[string]string
	// Note is set when the package manager listed no version of the
	// packages (their repository is not configured yet) and the version
	// came from gpuenv's tables; it says so, for the step's reason.
	Note string
}

// Pick chooses the newest version that satisfies q and at which every
// package of the set is available (pkgdb.PickVersions, the rule apply
// follows for a version left to it). Where the archive knows what the
// source offers, it picks from that (pickOffered). Otherwise it asks the
// package manager first;
// when that lists nothing for the first package, it falls back to the
// versions gpuenv's tables know for the archive, then to the version the
// package tables derive. Where configured sources of the manager have no
// index on disk (the Candidates says so: Unfetched), nothing the indexes
// lack is guessed: the version is known after apply, which refreshes the
// indexes first.
func Pick(ctx context.Context, cands planner.Candidates, q PickQuery) (Picked, error) {
	if len(q.Packages) == 0 {
		return Picked{}, fmt.Errorf("no packages to pick a version for")
	}
	if q.Archive.Knows(q.Source) {
		return pickOffered(q)
	}
	first := q.Packages[0].Name
	if q.Adds {
		note := fmt.Sprintf("NVIDIA's repository, which the plan adds, has no index on disk yet, so the version of %s is known after apply: the newest its index lists", first)
		if !q.Versions.IsZero() {
			note += " that satisfies " + q.Versions.Quoted()
		}
		return Picked{Constraint: q.Versions.String(), Note: note}, nil
	}
	var missing []facts.IndexSource
	if u, ok := cands.(unfetched); ok {
		missing = u.Unfetched(q.Manager)
	}
	if len(missing) > 0 && q.Archive.Configured(q.Source) {
		// The source's own indexes await an update: what another
		// source's indexes list is not what it offers.
		return deferred(q, missing, nil), nil
	}
	listed, err := cands.Versions(ctx, q.Manager, first)
	if err != nil {
		return Picked{}, err
	}
	note := ""
	table := map[string]compat.DistroPackage{}
	if len(listed) == 0 && len(missing) == 0 {
		for _, p := range slices.Backward(compat.DistroPackages(q.OS, q.OSVersion, first)) {
			listed = append(listed, p.Version)
			table[p.Version] = p
		}
		if len(listed) == 0 && q.Packages[0].Version != "" {
			listed = []string{q.Packages[0].Version}
			note = fmt.Sprintf("%s does not list %s yet, so the version is the one gpuenv's package tables derive (%s)", managerTool(q.Manager), first, q.Packages[0].From)
		}
	}
	others := map[string][]string{}
	for _, p := range q.Packages[1:] {
		vs, err := cands.Versions(ctx, q.Manager, p.Name)
		if err != nil {
			return Picked{}, err
		}
		others[p.Name] = vs
	}
	picked, versions, rejected := pkgdb.PickVersions(string(q.Manager), listed, others, func(raw string, up version.Version) bool {
		return q.fits(raw, up)
	})
	if picked != "" {
		if row, fromTable := table[picked]; fromTable {
			note = fmt.Sprintf("%s does not list %s yet, so the version comes from gpuenv's table of the archive (%s, %s)", managerTool(q.Manager), first, row.Suite, row.Source)
		}
		return Picked{Version: picked, Versions: versions, Note: note}, nil
	}
	if len(missing) > 0 {
		return deferred(q, missing, rejected), nil
	}
	if len(listed) == 0 {
		if q.Pending {
			return Picked{Constraint: q.Versions.String(), Note: fmt.Sprintf("%s does not list %s until the repositories this plan configures are in place, so its exact version is known after apply: the newest that satisfies %s", managerTool(q.Manager), first, q.Versions.Quoted())}, nil
		}
		return Picked{}, fmt.Errorf("%s lists no version of %s, and gpuenv's tables know none either (is its repository configured?)", managerTool(q.Manager), first)
	}
	return Picked{}, fmt.Errorf("no version of %s fits %s: %s lists %s", first, q.Versions.Quoted(), managerTool(q.Manager), strings.Join(rejected, ", "))
}

// pickOffered picks from what q.Source's indexes offer: the first
// version, in the package manager's order of preference, that satisfies
// q and at which the source offers every package of the set. The note
// says when a priority put it ahead of a newer one.
func pickOffered(q PickQuery) (Picked, error) {
	first := q.Packages[0].Name
	where := q.Archive.Describe(q.Source)
	offers := q.Archive.Offers(first, q.Source)
	if len(offers) == 0 {
		return Picked{}, fmt.Errorf("%s offers no %s", where, first)
	}
	others := map[string][]string{}
	for _, p := range q.Packages[1:] {
		for _, o := range q.Archive.Offers(p.Name, q.Source) {
			others[p.Name] = append(others[p.Name], o.Version)
		}
		if len(others[p.Name]) == 0 {
			return Picked{}, fmt.Errorf("%s offers no %s", where, p.Name)
		}
	}
	var fit []planner.Offer
	var fitVersions []map[string]string
	var rejected []string
	for _, o := range offers {
		up, err := pkgdb.UpstreamVersion(string(q.Manager), o.Version)
		if err != nil || !q.fits(o.Version, up) {
			rejected = append(rejected, o.Version)
			continue
		}
		missing := ""
		var versions map[string]string
		for _, p := range q.Packages[1:] {
			v, ok := pkgdb.Match(string(q.Manager), o.Version, others[p.Name])
			if !ok {
				missing = p.Name
				break
			}
			if v != o.Version {
				if versions == nil {
					versions = map[string]string{}
				}
				versions[p.Name] = v
			}
		}
		if missing != "" {
			rejected = append(rejected, o.Version+" (no "+missing+" "+matchShown(q.Manager, o.Version)+")")
			continue
		}
		fit = append(fit, o)
		fitVersions = append(fitVersions, versions)
	}
	if len(fit) == 0 {
		return Picked{}, fmt.Errorf("no version of %s fits %s: %s offers %s", first, q.Versions.Quoted(), where, strings.Join(rejected, ", "))
	}
	return Picked{Version: fit[0].Version, Versions: fitVersions[0], Note: q.Archive.PreferenceNote(fit)}, nil
}

// matchShown is the version another package of a set must have to go
// with v, as a message names it: v itself, or for dnf v's version part
// (pkgdb.Match).
func matchShown(m plan.Manager, v string) string {
	if m == plan.ManagerDnf {
		_, ver, _ := version.SplitEVR(v)
		return ver
	}
	return v
}

// unfetched is the capability of a Candidates to name the configured
// sources whose indexes are not on disk (Candidates.Unfetched).
type unfetched interface {
	Unfetched(manager plan.Manager) []facts.IndexSource
}

// deferred is the pick of a version known after apply, which fetches
// the indexes of the missing sources first; rejected are the versions the
// indexes on disk list, none of which fits.
func deferred(q PickQuery, missing []facts.IndexSource, rejected []string) Picked {
	sources := fmt.Sprintf("%d configured sources", len(missing))
	if len(missing) == 1 {
		sources = "a configured source"
	}
	note := fmt.Sprintf("%s has not fetched the index of %s, so the version of %s is known after apply: the newest the fetched indexes list", refreshTool(q.Manager), sources, q.Packages[0].Name)
	if !q.Versions.IsZero() {
		note += " that satisfies " + q.Versions.Quoted()
	}
	if len(rejected) > 0 {
		note += " (the indexes on disk list " + strings.Join(rejected, ", ") + ")"
	}
	return Picked{Constraint: q.Versions.String(), Note: note}
}

// refreshTool is the command that fetches m's indexes, as messages name it.
func refreshTool(m plan.Manager) string {
	if c := plan.RefreshCommand(m); c != nil {
		return strings.Join(c, " ")
	}
	return string(m)
}

// KnownAfterApply is what a step shows for a version only apply learns.
const KnownAfterApply = plan.KnownAfterApply

// Pending reports whether a plan configures package repositories: the
// spec's repository blocks, or archive components it enables.
func Pending(req *planner.Request) bool {
	if req.Desired != nil && (len(req.Desired.Components) > 0 || req.Desired.NVIDIARepository != nil) {
		return true
	}
	for _, r := range req.Spec.Repositories {
		if !r.IsAbsent() {
			return true
		}
	}
	return false
}

// Adds reports whether the plan adds the repository that src's packages
// come from (Desired.NVIDIARepository).
func Adds(req *planner.Request, src spec.Source) bool {
	return req.Desired != nil && req.Desired.NVIDIARepository != nil && src == spec.SourceNVIDIA
}

// ShownVersion is a picked version as a step shows it.
func ShownVersion(v string) string {
	if v == "" {
		return KnownAfterApply
	}
	return v
}

func managerTool(m plan.Manager) string {
	switch m {
	case plan.ManagerApt:
		return "apt-cache"
	case plan.ManagerDnf:
		return "dnf"
	}
	return string(m)
}
