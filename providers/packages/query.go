package packages

import (
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
)

// Installed returns the package called name when the database has it
// present (any state but "not-installed" and "config-files": those leave
// no program behind), the first in architecture order when several are.
func Installed(pkgs facts.Packages, name string) (facts.Package, bool) {
	for _, p := range pkgs.Packages {
		if p.Name == name && p.State != "not-installed" && p.State != "config-files" {
			return p, true
		}
	}
	return facts.Package{}, false
}

// Upstream returns the upstream part of a Debian or RPM version: the epoch
// ("1:") and the packaging revision ("-1", "-0ubuntu1", "-1.el9") removed.
// "11.8.89~11.8.0-5~deb12u1" gives "11.8.89~11.8.0".
func Upstream(version string) string {
	if i := strings.IndexByte(version, ':'); i > 0 && allDigits(version[:i]) {
		version = version[i+1:]
	}
	if i := strings.LastIndexByte(version, '-'); i > 0 {
		version = version[:i]
	}
	return version
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
