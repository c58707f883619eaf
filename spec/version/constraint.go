package version

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Constraint is a set of versions written in the operator syntax of
// Masterminds/semver: terms joined by "," or spaces (all must hold), and
// alternatives joined by "||" (one must hold). The package documentation
// gives the meaning of each operator.
//
// The zero Constraint has no terms and admits every version, so an unset
// constraint means "any version".
type Constraint struct {
	text     string
	branches []branch
}

// branch is one "||" alternative: every term must hold.
type branch struct {
	terms []term
	// pre admits pre-releases and development releases; it is set when a
	// term names one, following PEP 440 and semver.
	pre bool
}

// term is one comparison, kept as the interval [lo, hi) of versions it
// admits, or excludes when neg is set ("!="). Keeping intervals lets Check
// and Satisfiable share one meaning.
type term struct {
	op     string  // operator as normalized: =, !=, >, >=, <, <=, ~, ^, or - for a hyphen range
	v      Version // the version written; zero for "*"
	wild   bool    // v was followed by wildcard parts, or is "*"
	lo, hi cut
	neg    bool
	pre    bool // a version written is a pre-release or development release
}

// ParseConstraint reads a constraint; see the package documentation.
func ParseConstraint(s string) (Constraint, error) {
	c, err := parseConstraint(s)
	if err != nil {
		return Constraint{}, fmt.Errorf("invalid constraint %q: %s", s, err)
	}
	return c, nil
}

// MustParseConstraint is ParseConstraint for constraints known to be valid;
// it panics otherwise.
func MustParseConstraint(s string) Constraint {
	c, err := ParseConstraint(s)
	if err != nil {
		panic(err)
	}
	return c
}

func parseConstraint(s string) (Constraint, error) {
	if strings.TrimSpace(s) == "" {
		return Constraint{}, fmt.Errorf("empty")
	}
	c := Constraint{text: s}
	for alt := range strings.SplitSeq(s, "||") {
		b, err := parseBranch(alt)
		if err != nil {
			return Constraint{}, err
		}
		c.branches = append(c.branches, b)
	}
	return c, nil
}

// operators lists the operator spellings, longer before their prefixes.
// "==" is accepted for Python habits, "=>", "=<" and "~>" because
// Masterminds/semver accepts them.
var operators = []struct{ spelling, op string }{
	{"==", "="}, {"!=", "!="}, {">=", ">="}, {"=>", ">="}, {"<=", "<="},
	{"=<", "<="}, {"~>", "~"}, {"=", "="}, {">", ">"}, {"<", "<"},
	{"~", "~"}, {"^", "^"},
}

func splitOperator(word string) (op, rest string) {
	for _, o := range operators {
		if r, ok := strings.CutPrefix(word, o.spelling); ok {
			return o.op, r
		}
	}
	return "", word
}

// tokens splits a branch into words, with each comma as its own token so
// that misplaced commas can be reported.
func tokens(s string) []string {
	return strings.Fields(strings.ReplaceAll(s, ",", " , "))
}

func parseBranch(s string) (branch, error) {
	toks := tokens(s)
	if len(toks) == 0 {
		return branch{}, fmt.Errorf("empty alternative")
	}
	var b branch
	expectTerm := true
	for i := 0; i < len(toks); i++ {
		tok := toks[i]
		if tok == "," {
			if expectTerm {
				return branch{}, fmt.Errorf("misplaced comma")
			}
			expectTerm = true
			continue
		}
		op, rest := splitOperator(tok)
		if op != "" && rest == "" {
			// The operator stands apart from its version: ">= 535".
			if i+1 == len(toks) || toks[i+1] == "," {
				return branch{}, fmt.Errorf("operator %q needs a version", tok)
			}
			i++
			rest = toks[i]
		}
		if o, _ := splitOperator(rest); o != "" {
			return branch{}, fmt.Errorf("unexpected %q", rest)
		}
		var t term
		var err error
		if op == "" && i+2 < len(toks) && toks[i+1] == "-" {
			t, err = hyphenTerm(rest, toks[i+2])
			i += 2
		} else {
			if rest == "-" {
				return branch{}, fmt.Errorf("hyphen range needs a version on each side")
			}
			if op == "" {
				op = "="
			}
			t, err = newTerm(op, rest)
		}
		if err != nil {
			return branch{}, err
		}
		b.terms = append(b.terms, t)
		b.pre = b.pre || t.pre
		expectTerm = false
	}
	if expectTerm {
		return branch{}, fmt.Errorf("misplaced comma")
	}
	return b, nil
}

// pattern reads a constraint version: a version, a version followed by
// wildcard parts ("550.*", "12.x"), or "*" alone. Wildcards are looked for
// only before a local label, where "x" is an ordinary segment ("1.0+0.x").
func pattern(s string) (v Version, wild bool, err error) {
	head, _, local := strings.Cut(s, "+")
	parts := strings.Split(head, ".")
	k := slices.IndexFunc(parts, isWildcard)
	if k < 0 {
		v, err := parse(s)
		if err != nil {
			return Version{}, false, fmt.Errorf("version %q: %s", s, err)
		}
		return v, false, nil
	}
	if local {
		return Version{}, false, fmt.Errorf("version %q: a wildcard may follow only numeric parts", s)
	}
	for _, p := range parts[k:] {
		if !isWildcard(p) {
			return Version{}, false, fmt.Errorf("version %q: only wildcards may follow a wildcard", s)
		}
	}
	if k == 0 {
		return Version{}, true, nil
	}
	prefix := strings.Join(parts[:k], ".")
	v, err = parse(prefix)
	if err != nil {
		return Version{}, false, fmt.Errorf("version %q: %s", s, err)
	}
	if !v.isRelease() || v.local != "" {
		return Version{}, false, fmt.Errorf("version %q: a wildcard may follow only numeric parts", s)
	}
	return v, true, nil
}

func isWildcard(p string) bool { return p == "*" || p == "x" || p == "X" }

func newTerm(op, s string) (term, error) {
	v, wild, err := pattern(s)
	if err != nil {
		return term{}, err
	}
	t := term{op: op, v: v, wild: wild, pre: v.IsPrerelease()}
	// A plain release names every version that starts with it; any other
	// version names itself alone.
	at, past := before(v), afterOf(v)
	if v.isRelease() && v.local == "" {
		at, past = releaseStart(v.parts), releaseEnd(v.parts)
	}
	tilde := v.parts[:min(len(v.parts), 2)]
	if len(v.parts) == 1 {
		tilde = v.parts
	}
	switch op {
	case "=":
		t.lo, t.hi = at, past
	case "!=":
		t.lo, t.hi, t.neg = at, past, true
	case ">":
		t.lo, t.hi = past, posInf
	case ">=":
		t.lo, t.hi = at, posInf
	case "<":
		t.lo, t.hi = negInf, at
	case "<=":
		t.lo, t.hi = negInf, past
	case "~":
		t.lo, t.hi = at, releaseEnd(tilde)
	case "^":
		t.lo, t.hi = at, releaseEnd(v.parts[:caretLen(v.parts)])
	}
	return t, nil
}

// caretLen is how many leading parts "^" keeps fixed: up to and including
// the first non-zero one, as Masterminds/semver does for ^0.2.3 (<0.3.0).
func caretLen(parts []uint64) int {
	for i, p := range parts {
		if p != 0 {
			return i + 1
		}
	}
	return len(parts)
}

// hyphenTerm reads "A - B": at least A, and at most B together with every
// version that starts with B, so "535 - 550" admits 550.54.15.
func hyphenTerm(a, b string) (term, error) {
	lower, err := newTerm(">=", a)
	if err != nil {
		return term{}, err
	}
	upper, err := newTerm("<=", b)
	if err != nil {
		return term{}, err
	}
	return term{
		op: "-", v: lower.v, wild: lower.wild,
		lo: lower.lo, hi: upper.hi,
		pre: lower.pre || upper.pre,
	}, nil
}

// String returns the constraint as it was written.
func (c Constraint) String() string { return c.text }

// Quoted writes c for a message: quoted as it was written, or "any
// version" for the zero Constraint.
func (c Constraint) Quoted() string {
	if c.IsZero() {
		return "any version"
	}
	return strconv.Quote(c.text)
}

// IsZero reports whether c is the zero Constraint, which admits every
// version.
func (c Constraint) IsZero() bool { return len(c.branches) == 0 }

// Check reports whether v satisfies c. A pre-release or development
// release satisfies only an alternative that names one. The zero Version
// satisfies only the zero Constraint.
func (c Constraint) Check(v Version) bool {
	if len(c.branches) == 0 {
		return true
	}
	if v.IsZero() {
		return false
	}
	for _, b := range c.branches {
		if b.check(v) {
			return true
		}
	}
	return false
}

func (b branch) check(v Version) bool {
	if v.IsPrerelease() && !b.pre {
		return false
	}
	for _, t := range b.terms {
		if t.contains(v) == t.neg {
			return false
		}
	}
	return true
}

func (t term) contains(v Version) bool {
	return t.lo.cmpVersion(v) < 0 && t.hi.cmpVersion(v) > 0
}

// Satisfiable reports whether some version satisfies c. It is exact for
// constraints whose versions are plain releases (drivers, CUDA, cuDNN), with
// any number of parts. In an alternative that names a pre-, post-,
// development or local version it may answer true where only a gap between
// two adjacent versions is left (">1.0.dev1, <1.0.dev2"), never false where
// a version satisfies it.
func (c Constraint) Satisfiable() bool {
	if len(c.branches) == 0 {
		return true
	}
	for _, b := range c.branches {
		if ok, _ := b.satisfiable(); ok {
			return true
		}
	}
	return false
}

// satisfiable intersects the branch's intervals, removes the "!=" holes and
// looks for a gap that holds an admitted version. When it can name the
// least such version it returns it, so tests can check it satisfies b.
func (b branch) satisfiable() (bool, Version) {
	lo, hi := negInf, posInf
	var holes []term
	for _, t := range b.terms {
		if t.neg {
			if t.lo.cmp(t.hi) < 0 {
				holes = append(holes, t)
			}
			continue
		}
		if t.lo.cmp(lo) > 0 {
			lo = t.lo
		}
		if t.hi.cmp(hi) < 0 {
			hi = t.hi
		}
	}
	slices.SortFunc(holes, func(x, y term) int { return x.lo.cmp(y.lo) })
	cur := lo
	for _, h := range holes {
		if cur.cmp(hi) >= 0 {
			return false, Version{}
		}
		if h.lo.cmp(cur) > 0 {
			end := h.lo
			if hi.cmp(end) < 0 {
				end = hi
			}
			if ok, w := gap(cur, end, b.pre); ok {
				return true, w
			}
		}
		if h.hi.cmp(cur) > 0 {
			cur = h.hi
		}
	}
	return gap(cur, hi, b.pre)
}

// gap reports whether [from, to) holds a version, pre-releases counting
// only when pre is set, and returns the least one when it is known.
func gap(from, to cut, pre bool) (bool, Version) {
	if from.cmp(to) >= 0 {
		return false, Version{}
	}
	var w Version
	switch {
	case from.kind == cutNegInf:
		w = Version{parts: []uint64{0}, dev: pre}
	case from.kind == cutBefore:
		w = from.v
		if !pre && w.IsPrerelease() {
			// The least final release at or above a pre-release of R is R
			// itself; above "R.postN.devM" it is "R.postN".
			if w.pre != preNone {
				w.post, w.postN = false, 0
			}
			w.pre, w.preNum, w.dev, w.devN = preNone, 0, false, 0
		}
	default:
		// No version is least above another (1.0 < 1.0.0.1 < 1.0.0.0.1),
		// so the gap is taken to be non-empty. Plain releases bound only
		// with "before" cuts, which keeps their answer exact.
		return true, Version{}
	}
	w.text, w.relEnd = w.canonical()
	return to.cmpVersion(w) > 0, w
}

// canonical spells v from its fields, for versions built rather than
// parsed, and returns the length of the release part.
func (v Version) canonical() (string, int) {
	var sb strings.Builder
	for i, p := range v.parts {
		if i > 0 {
			sb.WriteByte('.')
		}
		fmt.Fprint(&sb, p)
	}
	relEnd := sb.Len()
	switch v.pre {
	case preAlpha:
		fmt.Fprintf(&sb, "a%d", v.preNum)
	case preBeta:
		fmt.Fprintf(&sb, "b%d", v.preNum)
	case preRC:
		fmt.Fprintf(&sb, "rc%d", v.preNum)
	}
	if v.post {
		fmt.Fprintf(&sb, ".post%d", v.postN)
	}
	if v.dev {
		fmt.Fprintf(&sb, ".dev%d", v.devN)
	}
	if v.local != "" {
		sb.WriteString("+" + v.local)
	}
	return sb.String(), relEnd
}

// Exact returns the version c pins when it is a single bare version or
// "= v" (without wildcards), as written. With prefix matching "12.4" still
// admits 12.4.1; a caller needing a complete version checks its parts.
func (c Constraint) Exact() (Version, bool) {
	if len(c.branches) != 1 || len(c.branches[0].terms) != 1 {
		return Version{}, false
	}
	t := c.branches[0].terms[0]
	if t.op != "=" || t.wild {
		return Version{}, false
	}
	return t.v, true
}

// MarshalText returns the constraint as written, so JSON carries it as a
// string.
func (c Constraint) MarshalText() ([]byte, error) { return []byte(c.text), nil }

// UnmarshalText parses text; empty text gives the zero Constraint, the
// inverse of marshalling it.
func (c *Constraint) UnmarshalText(text []byte) error {
	if len(text) == 0 {
		*c = Constraint{}
		return nil
	}
	p, err := ParseConstraint(string(text))
	if err != nil {
		return err
	}
	*c = p
	return nil
}
