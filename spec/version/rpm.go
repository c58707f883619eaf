package version

import (
	"fmt"
	"strings"

	"github.com/gpuenv/gpuenv/spec/lazyregexp"
)

// rpmEVR is an RPM package's [epoch:]version[-release]: rpm allows
// letters, digits and . _ + ~ ^ in the version and the release, which a
// hyphen separates.
var rpmEVR = lazyregexp.New(`^(?:[0-9]+:)?[A-Za-z0-9][A-Za-z0-9._+~^]*(?:-[A-Za-z0-9._+~^]+)?$`)

// CheckRPM reports whether s is an RPM version as dnf pins it, in
// "name-[epoch:]version-release".
func CheckRPM(s string) error {
	if !rpmEVR.MatchString(s) {
		return fmt.Errorf("invalid rpm version %q: it is [epoch:]version-release, in letters, digits and . _ + ~ ^", s)
	}
	return nil
}

// CompareRPM orders [epoch:]version-release strings as rpm does
// (rpmvercmp on each part), returning -1, 0 or +1.
func CompareRPM(a, b string) int {
	ea, va, ra := SplitEVR(a)
	eb, vb, rb := SplitEVR(b)
	if c := rpmvercmp(ea, eb); c != 0 {
		return c
	}
	if c := rpmvercmp(va, vb); c != 0 {
		return c
	}
	return rpmvercmp(ra, rb)
}

// FromRPM returns the numeric start of an RPM version's version part, so
// that package versions compare with spec versions: "3:550.54.15-1.el9"
// gives 550.54.15.
func FromRPM(s string) (Version, error) {
	_, ver, _ := SplitEVR(s)
	end := 0
	for end < len(ver) && (isDigit(ver[end]) || ver[end] == '.' && end+1 < len(ver) && isDigit(ver[end+1])) {
		end++
	}
	return Parse(ver[:end])
}

// SplitEVR splits an RPM [epoch:]version-release into its parts, the
// epoch "0" when it is left out and the release "" when there is none.
func SplitEVR(s string) (epoch, ver, rel string) {
	epoch = "0"
	if e, rest, ok := strings.Cut(s, ":"); ok {
		epoch, s = e, rest
	}
	if i := strings.LastIndex(s, "-"); i >= 0 {
		return epoch, s[:i], s[i+1:]
	}
	return epoch, s, ""
}

// rpmvercmp compares alternating runs of digits and letters, skipping
// other characters; "~" sorts before everything, as in rpm.
func rpmvercmp(a, b string) int {
	isAlnum := func(c byte) bool {
		return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
	}
	for len(a) > 0 || len(b) > 0 {
		for len(a) > 0 && !isAlnum(a[0]) && a[0] != '~' {
			a = a[1:]
		}
		for len(b) > 0 && !isAlnum(b[0]) && b[0] != '~' {
			b = b[1:]
		}
		if len(a) > 0 && a[0] == '~' || len(b) > 0 && b[0] == '~' {
			switch {
			case len(a) == 0 || a[0] != '~':
				return 1
			case len(b) == 0 || b[0] != '~':
				return -1
			}
			a, b = a[1:], b[1:]
			continue
		}
		if len(a) == 0 || len(b) == 0 {
			break
		}
		digit := a[0] >= '0' && a[0] <= '9'
		run := func(s string) (string, string) {
			i := 0
			for i < len(s) && isAlnum(s[i]) && (s[i] >= '0' && s[i] <= '9') == digit {
				i++
			}
			return s[:i], s[i:]
		}
		var x, y string
		x, a = run(a)
		y, b = run(b)
		if y == "" {
			// A number is newer than letters.
			if digit {
				return 1
			}
			return -1
		}
		if digit {
			x, y = strings.TrimLeft(x, "0"), strings.TrimLeft(y, "0")
			if len(x) != len(y) {
				return cmpInt(len(x), len(y))
			}
		}
		if c := strings.Compare(x, y); c != 0 {
			return c
		}
	}
	switch {
	case len(a) == 0 && len(b) == 0:
		return 0
	case len(a) == 0:
		return -1
	}
	return 1
}
