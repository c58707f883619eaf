package pkgindex

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host/pkgdb"
)

// apt's policy, as apt_preferences(5) states it and apt-pkg/policy.cc
// carries it out:
//
//   - Each index has a priority (pkgPolicy::InitDefaults): 500; 100 for a
//     suite whose Release says "ButAutomaticUpgrades: yes" (with
//     "NotAutomatic: yes", as backports); 1 for "NotAutomatic: yes" alone
//     (experimental); 100 for dpkg's status file, which lists the
//     installed version. The general pins ("Package: *") then set it,
//     the first that matches an index deciding, except that a "never"
//     pin always does. APT::Default-Release is the first of them, at
//     990: "this has precedence over any general priority you set in the
//     /etc/apt/preferences file described later, but not over
//     specifically pinned packages".
//   - A version's priority (pkgPolicy::GetPriority) is that of the first
//     pin naming its package (exactly, by glob or /regex/) that matches
//     it, in the order the preferences are read; otherwise the highest
//     priority of the indexes that list it.
//   - The candidate (pkgPolicy::GetCandidateVer) is the version of the
//     highest priority, the newest on a tie; priority 0 and below never
//     wins, and a version older than the installed one only at 1000 or
//     above ("Never downgrade unless the priority of an available version
//     exceeds 1000").
//
// Phased updates (Phased-Update-Percentage) are left out: apt applies
// them in the policy only under APT::Get::Phase-Policy, off by default.

// Priorities of apt's defaults.
const (
	priorityDefault        = 500
	priorityTarget         = 990
	priorityBackports      = 100
	priorityNotAutomatic   = 1
	priorityInstalled      = 100
	priorityAllowDowngrade = 1000
)

// StatusFile is the origin apt gives the installed version.
const StatusFile = "/var/lib/dpkg/status"

// offer is one stanza of a relevant package in one index.
type offer struct {
	index                                         int
	name, version, arch, source, filename, sha256 string
	size                                          int64
}

// policy holds what priorities are computed from.
type policy struct {
	indexes []facts.PackageIndex
	pins    []pin // every pin, in the order apt reads them
	// status is the priority of dpkg's status file, after the general
	// pins.
	status prio
}

// prio is a priority, what gave it, and the pin when one did (counted
// from 1 in the facts' Pins).
type prio struct {
	value int
	from  string
	pin   int
}

// indexPriorities sets each index's priority, and the status file's.
// defaultRelease must match some index (apt refuses to run otherwise,
// and the caller warns).
func (pol *policy) indexPriorities(defaultRelease string) {
	pol.status = prio{value: priorityInstalled, from: "installed (" + StatusFile + ")"}
	for i := range pol.indexes {
		ix := &pol.indexes[i]
		ix.Priority, ix.PriorityFrom = priorityDefault, "default"
		if r := ix.Release; r != nil {
			switch {
			case r.ButAutomaticUpgrades:
				ix.Priority, ix.PriorityFrom = priorityBackports, "ButAutomaticUpgrades in "+r.Path
			case r.NotAutomatic:
				ix.Priority, ix.PriorityFrom = priorityNotAutomatic, "NotAutomatic in "+r.Path
			}
		}
	}
	type general struct {
		rel  releaseMatch
		kind pinKind
		data string
		p    prio
	}
	var defaults []general
	if defaultRelease != "" {
		defaults = append(defaults, general{rel: parseReleaseMatch(defaultRelease), kind: pinRelease,
			p: prio{value: priorityTarget, from: fmt.Sprintf("target release (APT::Default-Release %q)", defaultRelease)}})
	}
	for i := range pol.pins {
		if pn := &pol.pins[i]; pn.general() {
			defaults = append(defaults, general{rel: pn.rel, kind: pn.kind, data: pn.data, p: prio{value: pn.Priority, from: pinText(pn), pin: i + 1}})
		}
	}
	fixed := make([]bool, len(pol.indexes)+1) // the last is the status file
	for _, d := range defaults {
		for i := range pol.indexes {
			ix := &pol.indexes[i]
			if (!fixed[i] || d.p.value == neverPriority) && ix.Priority != neverPriority && matchesIndex(d.kind, d.rel, d.data, ix) {
				ix.Priority, ix.PriorityFrom, ix.Pin = d.p.value, d.p.from, d.p.pin
				fixed[i] = true
			}
		}
		s := len(pol.indexes)
		if (!fixed[s] || d.p.value == neverPriority) && pol.status.value != neverPriority && d.kind == pinRelease && d.rel.matchStatus() {
			pol.status, fixed[s] = d.p, true
		}
	}
}

// matchesIndex reports whether a release or origin pin matches an index.
func matchesIndex(kind pinKind, rel releaseMatch, data string, ix *facts.PackageIndex) bool {
	switch kind {
	case pinRelease:
		return rel.matchIndex(ix)
	case pinOrigin:
		site := strings.Trim(data, `"`)
		return expressionMatches(site, ix.Site)
	}
	return false
}

// pinText names a pin for a reason.
func pinText(p *pin) string {
	return fmt.Sprintf("pin %s record %d (Package: %s; Pin: %s)", p.File, p.Record, p.Package, p.Pin.Pin)
}

// versions builds one package's versions from its offers and the
// installed version, newest first, with their priorities and origins.
func (pol *policy) versions(name string, offers []offer, installed string) []facts.IndexedVersion {
	var out []facts.IndexedVersion
	at := map[string]int{}
	for _, o := range offers {
		i, seen := at[o.version]
		if !seen {
			i = len(out)
			at[o.version] = i
			src := o.source
			if src == name {
				src = ""
			}
			out = append(out, facts.IndexedVersion{Version: o.version, Architecture: o.arch, Source: src, Filename: o.filename, Size: o.size, SHA256: o.sha256})
		}
		// apt downloads the instance of the first source that lists the
		// version; the offers come in source order.
		p := pol.indexes[o.index].Path
		if !slices.Contains(out[i].Origins, p) {
			out[i].Origins = append(out[i].Origins, p)
		}
	}
	if installed != "" {
		if i, seen := at[installed]; seen {
			out[i].Installed = true
		} else {
			out = append(out, facts.IndexedVersion{Version: installed, Installed: true})
		}
	}
	for i := range out {
		if out[i].Origins == nil {
			out[i].Origins = []string{}
		}
	}
	slices.SortStableFunc(out, func(a, b facts.IndexedVersion) int { return pkgdb.Compare("apt", b.Version, a.Version) })
	for i := range out {
		p := pol.priority(name, &out[i])
		out[i].Priority, out[i].PriorityFrom, out[i].Pin = p.value, p.from, p.pin
	}
	return out
}

// priority is pkgPolicy::GetPriority for one version.
func (pol *policy) priority(name string, v *facts.IndexedVersion) prio {
	files := pol.filePriorities(v)
	src := v.Source
	if src == "" {
		src = name
	}
	srcName, srcVersion := sourceOf(src, v.Version)
	for i := range pol.pins {
		pn := &pol.pins[i]
		if pn.general() || !pn.matchesName(name, srcName, v.Architecture) || !pol.pinMatches(pn, v, srcVersion) {
			continue
		}
		if pn.Priority == neverPriority {
			return prio{value: neverPriority, from: pinText(pn), pin: i + 1}
		}
		for _, f := range files {
			if f.value != neverPriority {
				return prio{value: pn.Priority, from: pinText(pn), pin: i + 1}
			}
		}
		break
	}
	best := prio{value: 0, from: "no index lists it"}
	for i, f := range files {
		if i == 0 || f.value > best.value {
			best = f
		}
	}
	return best
}

// filePriorities are the priorities of the files that list v: its
// indexes, and the status file when it is the installed version.
func (pol *policy) filePriorities(v *facts.IndexedVersion) []prio {
	var out []prio
	for _, path := range v.Origins {
		for i := range pol.indexes {
			if ix := &pol.indexes[i]; ix.Path == path {
				from := "index " + ix.Path
				if ix.PriorityFrom != "default" {
					from = ix.PriorityFrom
				}
				out = append(out, prio{value: ix.Priority, from: from, pin: ix.Pin})
			}
		}
	}
	if v.Installed {
		out = append(out, pol.status)
	}
	return out
}

// pinMatches is pkgVersionMatch::VersionMatches for a pin naming the
// package.
func (pol *policy) pinMatches(pn *pin, v *facts.IndexedVersion, srcVersion string) bool {
	switch pn.kind {
	case pinVersion, pinSourceVersion:
		want := v.Version
		if pn.kind == pinSourceVersion {
			want = srcVersion
		}
		pattern, prefix := strings.CutSuffix(pn.data, "*")
		return matchVersion(want, pattern, prefix) || expressionMatches(pn.data, want)
	}
	for _, path := range v.Origins {
		for i := range pol.indexes {
			if ix := &pol.indexes[i]; ix.Path == path && matchesIndex(pn.kind, pn.rel, pn.data, ix) {
				return true
			}
		}
	}
	return v.Installed && pn.kind == pinRelease && pn.rel.matchStatus()
}

// sourceOf splits a Source field ("nvidia-graphics-drivers (535.261.03-1)")
// into the source package and its version, which is the binary's own
// when the field does not give one.
func sourceOf(field, version string) (string, string) {
	name, rest, ok := strings.Cut(field, " ")
	if !ok {
		return field, version
	}
	rest = strings.TrimSpace(rest)
	if strings.HasPrefix(rest, "(") && strings.HasSuffix(rest, ")") {
		return name, strings.TrimSpace(rest[1 : len(rest)-1])
	}
	return name, version
}

// candidate is pkgPolicy::GetCandidateVer over versions (newest first),
// with the reason it won.
func candidate(versions []facts.IndexedVersion, installed string) (string, string) {
	best := -1
	for i, v := range versions {
		if v.Priority == 0 || best >= 0 && v.Priority <= versions[best].Priority || best < 0 && v.Priority <= -1 {
			continue
		}
		if installed != "" && v.Priority < priorityAllowDowngrade && pkgdb.Compare("apt", v.Version, installed) < 0 {
			continue
		}
		best = i
	}
	if best < 0 {
		return "", ""
	}
	c := versions[best]
	why := fmt.Sprintf("priority %d (%s)", c.Priority, c.PriorityFrom)
	switch {
	case installed != "" && pkgdb.Compare("apt", c.Version, installed) < 0:
		why += fmt.Sprintf(", 1000 or more, allows the downgrade from %s", installed)
	case best > 0:
		// A newer version lost: say to what.
		n := versions[0]
		why += fmt.Sprintf(", over the newer %s at priority %d (%s)", n.Version, n.Priority, n.PriorityFrom)
	default:
		why = "the newest version, " + why
	}
	return c.Version, why
}
