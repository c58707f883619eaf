package pydeps

import (
	"fmt"
	"strconv"
	"strings"
)

// Version is a PEP 440 version: epoch, release, pre-release (a, b, rc),
// post-release, dev-release and local label.
type Version struct {
	Epoch   int
	Release []int
	// Pre is the pre-release kind, 0 none, 1 a, 2 b, 3 rc, with PreN.
	Pre, PreN int
	// Post is -1 when there is no post-release.
	Post int
	// Dev is -1 when there is no dev-release.
	Dev   int
	Local string
}

// ParseVersion reads a version in PEP 440's normal form or one of the
// spellings it normalises ("1.0RC1", "1.0-post2", "v2.1").
func ParseVersion(s string) (Version, error) {
	v := Version{Post: -1, Dev: -1}
	t := strings.ToLower(strings.TrimSpace(s))
	t = strings.TrimPrefix(t, "v")
	if t == "" {
		return v, fmt.Errorf("empty version")
	}
	if i := strings.IndexByte(t, '+'); i >= 0 {
		v.Local, t = t[i+1:], t[:i]
		if v.Local == "" {
			return v, fmt.Errorf("version %q: empty local label", s)
		}
	}
	if i := strings.IndexByte(t, '!'); i >= 0 {
		e, err := strconv.Atoi(t[:i])
		if err != nil {
			return v, fmt.Errorf("version %q: bad epoch", s)
		}
		v.Epoch, t = e, t[i+1:]
	}
	// Release: digits and dots.
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.' && i+1 < len(t) && t[i+1] >= '0' && t[i+1] <= '9') {
		i++
	}
	if i == 0 {
		return v, fmt.Errorf("version %q: no release number", s)
	}
	for _, p := range strings.Split(t[:i], ".") {
		n, err := strconv.Atoi(p)
		if err != nil {
			return v, fmt.Errorf("version %q: bad release", s)
		}
		v.Release = append(v.Release, n)
	}
	rest := t[i:]
	num := func() int {
		rest = strings.TrimLeft(rest, ".-_")
		j := 0
		for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
			j++
		}
		n, _ := strconv.Atoi(rest[:j])
		rest = rest[j:]
		return n
	}
	for rest != "" {
		r := strings.TrimLeft(rest, ".-_")
		switch {
		case hasAny(r, "alpha", "a") && v.Pre == 0 && v.Post < 0 && v.Dev < 0:
			rest, v.Pre = cut(r, "alpha", "a"), 1
			v.PreN = num()
		case hasAny(r, "beta", "b") && v.Pre == 0 && v.Post < 0 && v.Dev < 0:
			rest, v.Pre = cut(r, "beta", "b"), 2
			v.PreN = num()
		case hasAny(r, "rc", "c", "pre", "preview") && v.Pre == 0 && v.Post < 0 && v.Dev < 0:
			rest, v.Pre = cut(r, "preview", "pre", "rc", "c"), 3
			v.PreN = num()
		case hasAny(r, "post", "rev", "r") && v.Post < 0 && v.Dev < 0:
			rest = cut(r, "post", "rev", "r")
			v.Post = num()
		case strings.HasPrefix(rest, "-") && len(r) > 0 && r[0] >= '0' && r[0] <= '9' && v.Post < 0 && v.Dev < 0:
			rest = r
			v.Post = num()
		case strings.HasPrefix(r, "dev") && v.Dev < 0:
			rest = r[3:]
			v.Dev = num()
		default:
			return v, fmt.Errorf("version %q: cannot read %q", s, rest)
		}
	}
	return v, nil
}

func hasAny(s string, prefixes ...string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

func cut(s string, prefixes ...string) string {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return s[len(p):]
		}
	}
	return s
}

// String writes the normal form.
func (v Version) String() string {
	var b strings.Builder
	if v.Epoch != 0 {
		fmt.Fprintf(&b, "%d!", v.Epoch)
	}
	for i, r := range v.Release {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(strconv.Itoa(r))
	}
	if v.Pre > 0 {
		fmt.Fprintf(&b, "%s%d", []string{"", "a", "b", "rc"}[v.Pre], v.PreN)
	}
	if v.Post >= 0 {
		fmt.Fprintf(&b, ".post%d", v.Post)
	}
	if v.Dev >= 0 {
		fmt.Fprintf(&b, ".dev%d", v.Dev)
	}
	if v.Local != "" {
		b.WriteString("+" + v.Local)
	}
	return b.String()
}

// IsPre reports a pre- or dev-release.
func (v Version) IsPre() bool { return v.Pre > 0 || v.Dev >= 0 }

// Public is v without its local label.
func (v Version) Public() Version { v.Local = ""; return v }

// Compare orders versions as PEP 440 does: epoch, release (trailing zeros
// do not count), then a dev-release of a release before its
// pre-releases, those before the release, post-releases after it; a
// local label sorts after the same version without one.
func Compare(a, b Version) int {
	if c := cmpInt(a.Epoch, b.Epoch); c != 0 {
		return c
	}
	n := max(len(a.Release), len(b.Release))
	for i := range n {
		if c := cmpInt(at(a.Release, i), at(b.Release, i)); c != 0 {
			return c
		}
	}
	if c := cmpInt(preKey(a), preKey(b)); c != 0 {
		return c
	}
	if a.Pre > 0 && b.Pre > 0 {
		if c := cmpInt(a.PreN, b.PreN); c != 0 {
			return c
		}
	}
	if c := cmpInt(a.Post, b.Post); c != 0 {
		return c
	}
	if c := cmpInt(devKey(a), devKey(b)); c != 0 {
		return c
	}
	return compareLocal(a.Local, b.Local)
}

// preKey: a dev-release with no pre- or post-release sorts before every
// pre-release; then a, b, rc; then the final release.
func preKey(v Version) int {
	switch {
	case v.Pre == 0 && v.Post < 0 && v.Dev >= 0:
		return -1
	case v.Pre == 0:
		return 4
	}
	return v.Pre
}

func devKey(v Version) int {
	if v.Dev < 0 {
		return 1 << 30
	}
	return v.Dev
}

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
	as, bs := strings.FieldsFunc(a, sep), strings.FieldsFunc(b, sep)
	for i := 0; i < len(as) && i < len(bs); i++ {
		an, aerr := strconv.Atoi(as[i])
		bn, berr := strconv.Atoi(bs[i])
		switch {
		case aerr == nil && berr == nil:
			if c := cmpInt(an, bn); c != 0 {
				return c
			}
		case aerr == nil:
			return 1 // numbers sort after strings
		case berr == nil:
			return -1
		default:
			if c := strings.Compare(as[i], bs[i]); c != 0 {
				return c
			}
		}
	}
	return cmpInt(len(as), len(bs))
}

func sep(r rune) bool { return r == '.' || r == '-' || r == '_' }

func at(s []int, i int) int {
	if i < len(s) {
		return s[i]
	}
	return 0
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Specifier is one clause of a version specifier ("~=2.1", "==9.1.*").
type Specifier struct {
	Op       string
	Version  Version
	Wildcard bool
	Raw      string // for ===
}

// ParseSpecifiers reads a comma-separated specifier set.
func ParseSpecifiers(s string) ([]Specifier, error) {
	var out []Specifier
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		var sp Specifier
		for _, op := range []string{"===", "~=", "==", "!=", "<=", ">=", "<", ">"} {
			if strings.HasPrefix(part, op) {
				sp.Op = op
				break
			}
		}
		if sp.Op == "" {
			return nil, fmt.Errorf("specifier %q: no operator", part)
		}
		vs := strings.TrimSpace(part[len(sp.Op):])
		if sp.Op == "===" {
			sp.Raw = vs
			out = append(out, sp)
			continue
		}
		if strings.HasSuffix(vs, ".*") {
			if sp.Op != "==" && sp.Op != "!=" {
				return nil, fmt.Errorf("specifier %q: a wildcard only follows == or !=", part)
			}
			sp.Wildcard, vs = true, strings.TrimSuffix(vs, ".*")
		}
		v, err := ParseVersion(vs)
		if err != nil {
			return nil, fmt.Errorf("specifier %q: %w", part, err)
		}
		if sp.Op == "~=" && len(v.Release) < 2 {
			return nil, fmt.Errorf("specifier %q: ~= needs two release numbers", part)
		}
		sp.Version = v
		out = append(out, sp)
	}
	return out, nil
}

// Allows reports whether v satisfies every specifier. An installed
// version is judged as it is: pre-releases are not excluded, for pip
// check takes what is installed.
func Allows(specs []Specifier, v Version, raw string) bool {
	for _, s := range specs {
		if !s.allows(v, raw) {
			return false
		}
	}
	return true
}

func (s Specifier) allows(v Version, raw string) bool {
	switch s.Op {
	case "===":
		return strings.EqualFold(strings.TrimSpace(raw), s.Raw)
	case "==", "!=":
		eq := false
		switch {
		case s.Wildcard:
			eq = prefixMatch(v, s.Version)
		case s.Version.Local == "":
			eq = Compare(v.Public(), s.Version) == 0
		default:
			eq = Compare(v, s.Version) == 0
		}
		return eq == (s.Op == "==")
	case "~=":
		prefix := s.Version
		prefix.Release = prefix.Release[:len(prefix.Release)-1]
		prefix.Pre, prefix.Post, prefix.Dev, prefix.Local = 0, -1, -1, ""
		return Compare(v.Public(), s.Version) >= 0 && prefixMatch(v, prefix)
	case ">=":
		return Compare(v.Public(), s.Version) >= 0
	case "<=":
		return Compare(v.Public(), s.Version) <= 0
	case ">":
		// A post-release of the version named is not greater than it,
		// unless the specifier names a post-release itself.
		if s.Version.Post < 0 && v.Post >= 0 && sameRelease(v, s.Version) {
			return false
		}
		return Compare(v.Public(), s.Version) > 0
	case "<":
		// A pre-release of the version named is not less than it, unless
		// the specifier names a pre-release itself.
		if !s.Version.IsPre() && v.IsPre() && sameRelease(v, s.Version) {
			return false
		}
		return Compare(v.Public(), s.Version) < 0
	}
	return false
}

func sameRelease(a, b Version) bool {
	a.Pre, a.PreN, a.Post, a.Dev, a.Local = 0, 0, -1, -1, ""
	b.Pre, b.PreN, b.Post, b.Dev, b.Local = 0, 0, -1, -1, ""
	return Compare(a, b) == 0
}

// prefixMatch is PEP 440's prefix matching: v's release, padded with
// zeros, begins with p's (and the epochs agree); p's own pre-, post- and
// dev-parts must match too when given.
func prefixMatch(v, p Version) bool {
	if v.Epoch != p.Epoch {
		return false
	}
	for i, r := range p.Release {
		if at(v.Release, i) != r {
			return false
		}
	}
	if p.Pre > 0 && (v.Pre != p.Pre || v.PreN != p.PreN) {
		return false
	}
	if p.Post >= 0 && v.Post != p.Post {
		return false
	}
	if p.Dev >= 0 && v.Dev != p.Dev {
		return false
	}
	return true
}
