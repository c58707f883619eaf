package repository

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/compat"
	"github.com/gpuenv/gpuenv/providers/host/pkgdb"
	"github.com/gpuenv/gpuenv/spec"
	"github.com/gpuenv/gpuenv/spec/version"
)

// PickQuery asks for one version at which a set of packages can be
// installed together.
type PickQuery struct {
	Manager  planner.Manager
	Packages []planner.PackageName
	// Versions constrains the upstream version; the zero value admits all.
	Versions version.Constraint
	// Accept, when set, must also hold for a version (the raw package
	// version and its upstream part).
	Accept func(raw string, upstream version.Version) bool
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
}

// Picked is the version chosen.
type Picked struct {
	// Version is empty when it is known only after apply (PickQuery.Pending);
	// Constraint then says which versions apply may pick.
	Version    string
	Constraint string
	// Note is set when the package manager listed no version of the
	// packages (their repository is not configured yet) and the version
	// came from gpuenv's tables; it says so, for the step's reason.
	Note string
}

// Pick chooses the newest version that satisfies q and at which every
// package of the set is available. It asks the package manager first;
// when that lists nothing for the first package, it falls back to the
// versions gpuenv's tables know for the archive, then to the version the
// package tables derive.
func Pick(ctx context.Context, cands planner.Candidates, q PickQuery) (Picked, error) {
	if len(q.Packages) == 0 {
		return Picked{}, fmt.Errorf("no packages to pick a version for")
	}
	if q.Archive.Knows(q.Source) {
		return pickOffered(q)
	}
	first := q.Packages[0].Name
	listed, err := cands.Versions(ctx, q.Manager, first)
	if err != nil {
		return Picked{}, err
	}
	note := ""
	table := map[string]compat.DistroPackage{}
	if len(listed) == 0 {
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
	var rejected []string
	for _, raw := range listed {
		up, err := pkgdb.UpstreamVersion(string(q.Manager), raw)
		if err != nil || !q.Versions.Check(up) || q.Accept != nil && !q.Accept(raw, up) {
			rejected = append(rejected, raw)
			continue
		}
		ok := true
		for name, vs := range others {
			// A package the manager does not list yet (its repository
			// is being added) is taken to follow the first one.
			if len(vs) > 0 && !slices.Contains(vs, raw) {
				ok = false
				rejected = append(rejected, raw+" (no "+name+" "+raw+")")
				break
			}
		}
		if ok {
			if row, fromTable := table[raw]; fromTable {
				note = fmt.Sprintf("%s does not list %s yet, so the version comes from gpuenv's table of the archive (%s, %s)", managerTool(q.Manager), first, row.Suite, row.Source)
			}
			return Picked{Version: raw, Note: note}, nil
		}
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
	var rejected []string
	for _, o := range offers {
		up, err := pkgdb.UpstreamVersion(string(q.Manager), o.Version)
		if err != nil || !q.Versions.Check(up) || q.Accept != nil && !q.Accept(o.Version, up) {
			rejected = append(rejected, o.Version)
			continue
		}
		missing := ""
		for _, p := range q.Packages[1:] {
			if !slices.Contains(others[p.Name], o.Version) {
				missing = p.Name
				break
			}
		}
		if missing != "" {
			rejected = append(rejected, o.Version+" (no "+missing+" "+o.Version+")")
			continue
		}
		fit = append(fit, o)
	}
	if len(fit) == 0 {
		return Picked{}, fmt.Errorf("no version of %s fits %s: %s offers %s", first, q.Versions.Quoted(), where, strings.Join(rejected, ", "))
	}
	return Picked{Version: fit[0].Version, Note: q.Archive.PreferenceNote(fit)}, nil
}

// KnownAfterApply is what a step shows for a version only apply learns.
const KnownAfterApply = "(known after apply)"

// Pending reports whether a plan configures package repositories: the
// spec's repository blocks, or archive components it enables.
func Pending(req *planner.Request) bool {
	if req.Desired != nil && len(req.Desired.Components) > 0 {
		return true
	}
	for _, r := range req.Spec.Repositories {
		if !r.IsAbsent() {
			return true
		}
	}
	return false
}

// ShownVersion is a picked version as a step shows it.
func ShownVersion(v string) string {
	if v == "" {
		return KnownAfterApply
	}
	return v
}

func managerTool(m planner.Manager) string {
	switch m {
	case planner.ManagerApt:
		return "apt-cache"
	case planner.ManagerDnf:
		return "dnf"
	}
	return string(m)
}
