package version

import (
	"fmt"
	"strings"

	debversion "pault.ag/go/debian/version"

	"github.com/gpuenv/gpuenv/spec/lazyregexp"
)

// CompareDebian orders two Debian package versions (epoch:upstream-revision)
// as dpkg does, returning -1, 0 or +1. Debian versions are not Versions:
// "~" sorts before everything and "-0+deb12u1" is a revision, not a
// pre-release.
func CompareDebian(a, b string) (int, error) {
	x, err := debversion.Parse(a)
	if err != nil {
		return 0, fmt.Errorf("invalid debian version %q: %w", a, err)
	}
	y, err := debversion.Parse(b)
	if err != nil {
		return 0, fmt.Errorf("invalid debian version %q: %w", b, err)
	}
	return max(-1, min(1, debversion.Compare(x, y))), nil
}

// FromDebian returns the numeric start of the upstream part of a Debian
// version, so that package versions compare with spec versions: without the
// epoch, the revision and what follows the numbers ("~", "+dfsg").
// "535.309.01-0+deb12u1" gives 535.309.01, "11.8.89~11.8.0-5~deb12u1"
// gives 11.8.89 and "1:2.0-1" gives 2.0.
func FromDebian(s string) (Version, error) {
	d, err := debversion.Parse(s)
	if err != nil {
		return Version{}, fmt.Errorf("invalid debian version %q: %w", s, err)
	}
	// dpkg guarantees a leading digit, so end > 0.
	up := d.Version
	end := 0
	for end < len(up) && (isDigit(up[end]) || up[end] == '.' && end+1 < len(up) && isDigit(up[end+1])) {
		end++
	}
	v, err := Parse(up[:end])
	if err != nil {
		return Version{}, fmt.Errorf("debian version %q: %w", s, err)
	}
	return v, nil
}

// debianText is what Debian Policy 5.6.12 allows in a version: an
// optional numeric epoch, an upstream version starting with a digit, and
// an optional revision after the last hyphen, all in ASCII letters, digits
// and . + ~ (and - or : where the revision and epoch make them unambiguous).
var debianText = lazyregexp.New(`^(?:[0-9]+:)?[0-9][A-Za-z0-9.+~:-]*$`)

// CheckDebian reports whether s is a Debian package version as apt
// accepts in a name=version pin: nothing else may follow the "=".
func CheckDebian(s string) error {
	if !debianText.MatchString(s) || strings.HasSuffix(s, "-") {
		return fmt.Errorf("invalid debian version %q: a version starts with a digit (after an optional epoch) and holds only letters, digits and . + ~ - :", s)
	}
	if _, err := debversion.Parse(s); err != nil {
		return fmt.Errorf("invalid debian version %q: %w", s, err)
	}
	return nil
}
