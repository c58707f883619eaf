package pkgdb

import (
	"slices"
	"strings"

	"github.com/gpuenv/gpuenv/spec/version"
)

// Compare orders two versions of a package manager's packages, returning
// -1, 0 or +1: Debian versions for apt and dpkg, as dpkg does;
// [epoch:]version-release for dnf and rpm, as rpm does; Python versions
// for pip, by PEP 440. When either does not parse, the two order as
// text. The orders themselves are spec/version's.
func Compare(manager, a, b string) int {
	switch manager {
	case "dnf", ManagerRPM:
		return version.CompareRPM(a, b)
	case "pip":
		x, errx := version.Parse(a)
		y, erry := version.Parse(b)
		if errx != nil || erry != nil {
			return strings.Compare(a, b)
		}
		return x.Compare(y)
	}
	c, err := version.CompareDebian(a, b)
	if err != nil {
		return strings.Compare(a, b)
	}
	return c
}

// UpstreamVersion is the part of a package version that compares with a
// spec's versions: "535.309.01-0+deb12u1" gives 535.309.01 for apt, and
// "3:550.54.15-1.el9" gives 550.54.15 for dnf: the numeric start of
// Upstream's text.
func UpstreamVersion(manager, v string) (version.Version, error) {
	if manager == "dnf" || manager == ManagerRPM {
		return version.FromRPM(v)
	}
	return version.FromDebian(v)
}

// PickVersion is the rule by which a plan chooses the version of a set of
// packages, and apply the version a plan left to it: the newest of listed
// (the first package's versions, newest first) whose upstream part keep
// admits, at which every other package of the set is listed too. A
// package listed at no version is taken to follow the first: its
// repository may not be configured yet. rejected says of each version
// passed over why: "V" when keep refused it, "V (no NAME V)" when NAME
// lacks it.
func PickVersion(manager string, listed []string, others map[string][]string, keep func(raw string, up version.Version) bool) (picked string, rejected []string) {
	names := make([]string, 0, len(others))
	for n := range others {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, raw := range listed {
		up, err := UpstreamVersion(manager, raw)
		if err != nil || keep != nil && !keep(raw, up) {
			rejected = append(rejected, raw)
			continue
		}
		lacking := slices.IndexFunc(names, func(n string) bool { return len(others[n]) > 0 && !slices.Contains(others[n], raw) })
		if lacking >= 0 {
			rejected = append(rejected, raw+" (no "+names[lacking]+" "+raw+")")
			continue
		}
		return raw, rejected
	}
	return "", rejected
}

// ExactRelations reads Debian relation fields (Depends, Pre-Depends) and
// returns the relations that name one package at one exact version,
// without alternatives, as "name=version": the ones apt cannot meet from
// its candidates when the pins of a transaction are older than them.
func ExactRelations(fields ...string) []string {
	var out []string
	for _, field := range fields {
		for _, rel := range strings.Split(field, ",") {
			rel = strings.TrimSpace(rel)
			if rel == "" || strings.Contains(rel, "|") {
				continue
			}
			name, cond, ok := strings.Cut(rel, "(")
			if !ok {
				continue
			}
			cond = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(cond), ")"))
			v, exact := strings.CutPrefix(cond, "=")
			if !exact {
				continue
			}
			name, _, _ = strings.Cut(strings.TrimSpace(name), ":")
			v = strings.TrimSpace(v)
			if name == "" || v == "" || strings.ContainsAny(name+v, " []\n\t") {
				continue
			}
			out = append(out, name+"="+v)
		}
	}
	return out
}
