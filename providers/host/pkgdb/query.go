package pkgdb

import (
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
)

// StateFilter says which package states a lookup accepts. The zero value
// is the strict one.
type StateFilter int

const (
	// Configured accepts a package dpkg or rpm has fully installed and
	// configured (facts.StateInstalled), held or not.
	Configured StateFilter = iota
	// FilesPresent accepts a package whose files are on the system,
	// configured or not: every state but facts.StateNotInstalled and
	// facts.StateConfigFiles, which leave no program behind.
	FilesPresent
)

func (f StateFilter) accepts(state facts.PackageState) bool {
	if f == FilesPresent {
		return state != facts.StateNotInstalled && state != facts.StateConfigFiles
	}
	return state == facts.StateInstalled
}

// Installed returns the package called name in a state the filter
// accepts, the first in architecture order when several are.
func Installed(pkgs facts.Packages, name string, which StateFilter) (facts.Package, bool) {
	for _, p := range pkgs.Packages {
		if p.Name == name && which.accepts(p.State) {
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
