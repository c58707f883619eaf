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
// admits, at which every other package of the set is listed too (Match).
// A package listed at no version is taken to follow the first: its
// repository may not be configured yet. rejected says of each version
// passed over why: "V" when keep refused it, "V (no NAME W)" when NAME
// lacks it (W is what Match looks for).
func PickVersion(manager string, listed []string, others map[string][]string, keep func(raw string, up version.Version) bool) (picked string, rejected []string) {
	picked, _, rejected = PickVersions(manager, listed, others, keep)
	return picked, rejected
}

// PickVersions is PickVersion that also returns the version at which each
// other package of the set goes with the picked one, for the packages
// whose version is not the picked one's raw version (nil when none is):
// for dnf, a driver's packages share only their upstream version
// (NVIDIA's kmod-nvidia-latest-dkms 3:550.90.07-1.el9 goes with
// cuda-drivers 550.90.07-1).
func PickVersions(manager string, listed []string, others map[string][]string, keep func(raw string, up version.Version) bool) (picked string, versions map[string]string, rejected []string) {
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
		versions = nil
		lacking := ""
		for _, n := range names {
			if len(others[n]) == 0 {
				continue
			}
			v, ok := Match(manager, raw, others[n])
			if !ok {
				lacking = n
				break
			}
			if v != raw {
				if versions == nil {
					versions = map[string]string{}
				}
				versions[n] = v
			}
		}
		if lacking != "" {
			rejected = append(rejected, raw+" (no "+lacking+" "+matchKey(manager, raw)+")")
			continue
		}
		return raw, versions, rejected
	}
	return "", nil, rejected
}

// Match returns the version of vs that goes with raw, the version of
// another package of the same set: raw itself for apt, whose packages of
// one driver or toolkit share one version; for dnf the newest of vs with
// raw's version part (the EVR without epoch and release), since NVIDIA's
// RPM repositories give one driver's packages different epochs and
// releases (nvidia-driver 3:550.90.07-1.el9, cuda-drivers 550.90.07-1).
func Match(manager, raw string, vs []string) (string, bool) {
	if manager != "dnf" && manager != ManagerRPM {
		return raw, slices.Contains(vs, raw)
	}
	key := matchKey(manager, raw)
	best := ""
	for _, v := range vs {
		if matchKey(manager, v) == key && (best == "" || Compare(manager, v, best) > 0) {
			best = v
		}
	}
	return best, best != ""
}

// matchKey is what Match compares: the raw version for apt, the version
// part of the EVR for dnf.
func matchKey(manager, raw string) string {
	if manager != "dnf" && manager != ManagerRPM {
		return raw
	}
	_, ver, _ := version.SplitEVR(raw)
	return ver
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
