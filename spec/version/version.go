package version

import (
	"fmt"
	"strconv"
	"strings"
)

// Version is a version number with any number of numeric release parts,
// optionally followed by the PEP 440 pre-release (a, b, rc), post-release,
// development-release and local segments that Python packages use.
//
// The zero Version has no parts; Parse never returns it. Versions hold a
// slice, so compare them with Compare or Equal, not ==.
type Version struct {
	text   string   // as written, so "535.261.03" keeps its leading zero
	parts  []uint64 // release parts
	relEnd int      // length of the release in text, for Trunc

	pre    preKind
	preNum uint64
	post   bool
	postN  uint64
	dev    bool
	devN   uint64
	local  string
}

// preKind orders the PEP 440 pre-release labels: a < b < rc.
type preKind uint8

const (
	preNone preKind = iota
	preAlpha
	preBeta
	preRC
)

// Parse reads a version: one or more dot-separated decimal parts, then
// optionally, in the canonical PEP 440 spelling, a pre-release ("a1", "b2",
// "rc1"), ".postN", ".devN" and a local label ("+cu124"). Nothing else is
// accepted: no leading "v", no spaces, no "-" (which would be a semver
// pre-release or a Debian revision, both read differently).
func Parse(s string) (Version, error) {
	v, err := parse(s)
	if err != nil {
		return Version{}, fmt.Errorf("invalid version %q: %s", s, err)
	}
	return v, nil
}

// MustParse is Parse for versions known to be valid; it panics otherwise.
func MustParse(s string) Version {
	v, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return v
}

func parse(s string) (Version, error) {
	if s == "" {
		return Version{}, fmt.Errorf("empty")
	}
	if !isDigit(s[0]) {
		return Version{}, fmt.Errorf("must start with a digit")
	}
	// One allocation for the parts: a dot-separated string has at most
	// one more part than dots.
	v := Version{text: s, parts: make([]uint64, 0, strings.Count(s, ".")+1)}
	i := 0
	for {
		n, j, err := number(s, i)
		if err != nil {
			return Version{}, err
		}
		v.parts = append(v.parts, n)
		i = j
		if i < len(s) && s[i] == '.' && i+1 < len(s) && isDigit(s[i+1]) {
			i++
			continue
		}
		break
	}
	v.relEnd = i
	rest := s[i:]

	// The pre-release label follows the release directly ("2.0.0rc1"), as
	// in the normalized form that pip and torch.__version__ print.
	for _, l := range []struct {
		label string
		kind  preKind
	}{{"rc", preRC}, {"a", preAlpha}, {"b", preBeta}} {
		if strings.HasPrefix(rest, l.label) {
			n, j, err := labelNumber(s, i+len(l.label), l.label)
			if err != nil {
				return Version{}, err
			}
			v.pre, v.preNum, i = l.kind, n, j
			break
		}
	}
	if strings.HasPrefix(s[i:], ".post") {
		n, j, err := labelNumber(s, i+len(".post"), "post")
		if err != nil {
			return Version{}, err
		}
		v.post, v.postN, i = true, n, j
	}
	if strings.HasPrefix(s[i:], ".dev") {
		n, j, err := labelNumber(s, i+len(".dev"), "dev")
		if err != nil {
			return Version{}, err
		}
		v.dev, v.devN, i = true, n, j
	}
	if i < len(s) && s[i] == '+' {
		local := s[i+1:]
		if err := checkLocal(local); err != nil {
			return Version{}, err
		}
		v.local = local
		i = len(s)
	}
	if i < len(s) {
		switch {
		case s[i] == '.' && i+1 == len(s):
			return Version{}, fmt.Errorf("trailing dot")
		case s[i] == '.' && s[i+1] == '.':
			return Version{}, fmt.Errorf("empty part after %q", s[:i])
		}
		return Version{}, fmt.Errorf("unexpected %q after %q", s[i:], s[:i])
	}
	return v, nil
}

// number reads the decimal number starting at s[i], which must be a digit.
func number(s string, i int) (uint64, int, error) {
	j := i
	for j < len(s) && isDigit(s[j]) {
		j++
	}
	if j == i {
		return 0, i, fmt.Errorf("empty part after %q", s[:i])
	}
	n, err := strconv.ParseUint(s[i:j], 10, 64)
	if err != nil {
		return 0, i, fmt.Errorf("part %q is out of range", s[i:j])
	}
	return n, j, nil
}

// labelNumber reads the number PEP 440 requires after a label; the
// normalized form always spells it, so "1.0rc" is rejected rather than
// guessed to be "1.0rc0".
func labelNumber(s string, i int, label string) (uint64, int, error) {
	if i >= len(s) || !isDigit(s[i]) {
		return 0, i, fmt.Errorf("%q needs a number", label)
	}
	return number(s, i)
}

// checkLocal accepts PEP 440 local labels in normalized form: lowercase
// letters and digits in dot-separated segments.
func checkLocal(local string) error {
	if local == "" {
		return fmt.Errorf("empty local label")
	}
	for seg := range strings.SplitSeq(local, ".") {
		if seg == "" {
			return fmt.Errorf("empty segment in local label %q", local)
		}
		for k := 0; k < len(seg); k++ {
			if c := seg[k]; !isDigit(c) && (c < 'a' || c > 'z') {
				return fmt.Errorf("local label %q may hold only lowercase letters, digits and dots", local)
			}
		}
	}
	return nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// String returns the version as it was written.
func (v Version) String() string { return v.text }

// Parts returns a copy of the numeric release parts.
func (v Version) Parts() []uint64 {
	if v.parts == nil {
		return nil
	}
	return append([]uint64(nil), v.parts...)
}

// Major returns the first release part, 0 if absent.
func (v Version) Major() uint64 { return v.part(0) }

// Minor returns the second release part, 0 if absent.
func (v Version) Minor() uint64 { return v.part(1) }

func (v Version) part(i int) uint64 {
	if i < len(v.parts) {
		return v.parts[i]
	}
	return 0
}

// Local returns the PEP 440 local label, "cu124" for "2.5.1+cu124", or "".
func (v Version) Local() string { return v.local }

// IsZero reports whether v is the zero Version. It lets encoding/json's
// omitzero leave out unset versions.
func (v Version) IsZero() bool { return len(v.parts) == 0 }

// IsPrerelease reports whether v is a PEP 440 pre-release or development
// release, which constraints admit only when they name one.
func (v Version) IsPrerelease() bool { return v.pre != preNone || v.dev }

// isRelease reports whether v has release parts only (a local label aside,
// which constraints ignore unless they name one).
func (v Version) isRelease() bool { return v.pre == preNone && !v.post && !v.dev }

// Trunc returns the first n release parts, spelled as in v ("535.261.03"
// truncated to 3 is "535.261.03"). Pre, post, dev and local segments are
// dropped. Trunc never adds parts, so n beyond the number of parts returns
// all of them, and n <= 0 returns the zero Version.
func (v Version) Trunc(n int) Version {
	if n <= 0 || len(v.parts) == 0 {
		return Version{}
	}
	n = min(n, len(v.parts))
	end := 0
	for k := 0; k < n; k++ {
		if k > 0 {
			end++ // the dot
		}
		for end < len(v.text) && isDigit(v.text[end]) {
			end++
		}
	}
	return Version{text: v.text[:end], parts: v.parts[:n:n], relEnd: end}
}

// Compare returns -1, 0 or +1 as v is less than, equal to or greater than
// w. Release parts compare numerically, a missing part counting as 0, so
// "12.4" equals "12.4.0" and "570.124.06" is above "570.26". Versions with
// equal releases then order by PEP 440: "1.0.dev1" < "1.0a1" < "1.0rc1" <
// "1.0" < "1.0+cpu" < "1.0+cu124" < "1.0.post1". The zero Version is below
// every parsed version.
func (v Version) Compare(w Version) int {
	if c := v.compareNoLocal(w); c != 0 {
		return c
	}
	return compareLocal(v.local, w.local)
}

// Equal reports whether v and w compare equal; their text may differ
// ("12.4" and "12.4.0").
func (v Version) Equal(w Version) bool { return v.Compare(w) == 0 }

func (v Version) compareNoLocal(w Version) int {
	if v.IsZero() != w.IsZero() {
		if v.IsZero() {
			return -1
		}
		return 1
	}
	if c := compareParts(v.parts, w.parts); c != 0 {
		return c
	}
	if c := cmpInt(v.preRank(), w.preRank()); c != 0 {
		return c
	}
	if v.pre != preNone {
		if c := cmpInt(v.preNum, w.preNum); c != 0 {
			return c
		}
	}
	if c := cmpBool(v.post, w.post); c != 0 {
		return c
	}
	if c := cmpInt(v.postN, w.postN); c != 0 {
		return c
	}
	// A development release comes before the release it leads to.
	if c := cmpBool(w.dev, v.dev); c != 0 {
		return c
	}
	return cmpInt(v.devN, w.devN)
}

// preRank places a bare development release ("1.0.dev1") below all
// pre-releases and a final release above them, as PEP 440 requires.
func (v Version) preRank() int {
	switch {
	case v.pre != preNone:
		return int(v.pre)
	case v.dev && !v.post:
		return -1
	default:
		return int(preRC) + 1
	}
}

func compareParts(a, b []uint64) int {
	for i := 0; i < max(len(a), len(b)); i++ {
		var x, y uint64
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if c := cmpInt(x, y); c != 0 {
			return c
		}
	}
	return 0
}

// compareLocal orders PEP 440 local labels: no label is lowest; segments
// compare in turn, numbers numerically and above any alphanumeric segment,
// which compare as strings; a label that is a prefix of another is lower.
func compareLocal(a, b string) int {
	if a == b {
		return 0
	}
	if a == "" {
		return -1
	}
	if b == "" {
		return 1
	}
	for a != "" && b != "" {
		var x, y string
		x, a, _ = strings.Cut(a, ".")
		y, b, _ = strings.Cut(b, ".")
		xn, yn := allDigits(x), allDigits(y)
		var c int
		switch {
		case xn && yn:
			c = compareDecimal(x, y)
		case xn:
			c = 1
		case yn:
			c = -1
		default:
			c = strings.Compare(x, y)
		}
		if c != 0 {
			return c
		}
	}
	return cmpInt(len(a), len(b))
}

// compareDecimal compares digit strings of any length numerically.
func compareDecimal(x, y string) int {
	x, y = strings.TrimLeft(x, "0"), strings.TrimLeft(y, "0")
	if c := cmpInt(len(x), len(y)); c != 0 {
		return c
	}
	return strings.Compare(x, y)
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return s != ""
}

func cmpInt[T int | uint64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// MarshalText returns the version as written, so JSON carries it as a
// string.
func (v Version) MarshalText() ([]byte, error) { return []byte(v.text), nil }

// UnmarshalText parses text; empty text gives the zero Version, the
// inverse of marshalling it.
func (v *Version) UnmarshalText(text []byte) error {
	if len(text) == 0 {
		*v = Version{}
		return nil
	}
	p, err := Parse(string(text))
	if err != nil {
		return err
	}
	*v = p
	return nil
}
