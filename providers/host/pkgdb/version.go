package pkgdb

import (
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
