package version

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		constraint string
		yes, no    []string
	}{
		// A bare version is a prefix of the versions it admits.
		{"535.261.03", []string{"535.261.03", "535.261.3", "535.261.3.0"}, []string{"535.261.4", "535.261.2", "535.262", "535", "535.261"}},
		{"=535.261.03", []string{"535.261.03"}, []string{"535.261.04"}},
		{"== 535.261.03", []string{"535.261.03"}, []string{"535.261.04"}},
		{"12.4", []string{"12.4", "12.4.0", "12.4.1", "12.4.99.1"}, []string{"12.5", "12.3.9", "12", "13.4"}},
		{"550", []string{"550", "550.54.15", "550.163.01"}, []string{"549.9", "551", "5500"}},
		{"550.*", []string{"550", "550.54.15"}, []string{"551.0", "549"}},
		{"12.x", []string{"12.0", "12.4.1", "12.9"}, []string{"11.8", "13.0"}},
		{"12.X", []string{"12.4.1"}, []string{"13.0"}},
		{"12.4.x", []string{"12.4.1"}, []string{"12.5"}},
		{"12.*.*", []string{"12.4.1"}, []string{"13"}},
		{"*", []string{"0", "12.4", "999999"}, []string{"1.0rc1"}},
		{"x", []string{"535.1"}, nil},
		// cuDNN: four parts.
		{"9.1.*", []string{"9.1.0.70", "9.1.1.17"}, []string{"9.2.0.82", "9.0.0.312", "8.9.7.29"}},
		{"9.1.0.70", []string{"9.1.0.70"}, []string{"9.1.0.71", "9.1.0.7"}},
		{"~8.9.7", []string{"8.9.7.29", "8.9.7", "8.9.9"}, []string{"8.10.0", "8.9.6.50", "9.0"}},
		{">= 8.9.7.29, < 9.2", []string{"8.9.7.29", "9.1.0.70", "9.1.99"}, []string{"8.9.7.28", "9.2.0.82"}},
		// Comparisons: a version names its prefix, "> 535" is above all 535.x.
		{">= 535, < 560", []string{"535", "535.261.03", "550.54.15", "559.99"}, []string{"534.9", "560", "560.35.03"}},
		{">=535,<560", []string{"550.54.15"}, []string{"560.1"}},
		{">= 535 < 560", []string{"550.54.15"}, []string{"560.1"}},
		{"> 535", []string{"545.23.06", "536"}, []string{"535", "535.261.03", "530"}},
		{"> 12.4", []string{"12.5", "13"}, []string{"12.4", "12.4.1"}},
		{">12.4.0", []string{"12.4.1", "12.5"}, []string{"12.4", "12.4.0.0"}},
		{"< 12.4", []string{"12.3.2", "11"}, []string{"12.4", "12.4.1"}},
		{"<= 12.4", []string{"12.3.2", "12.4", "12.4.1"}, []string{"12.5"}},
		{"=> 12.4", []string{"12.4"}, []string{"12.3"}},
		{"=< 12.4", []string{"12.4.1"}, []string{"12.5"}},
		{"!= 535.1", []string{"535", "535.2", "536.1"}, []string{"535.1", "535.1.7"}},
		{"!=535.104.05", []string{"535.104.06", "535.104"}, []string{"535.104.05"}},
		// Tilde and caret as in Masterminds/semver.
		{"~12.4", []string{"12.4", "12.4.1"}, []string{"12.5", "12.3"}},
		{"~1.2.3", []string{"1.2.3", "1.2.9"}, []string{"1.3", "1.2.2"}},
		{"~12", []string{"12", "12.9"}, []string{"13", "11"}},
		{"~>12.4", []string{"12.4.1"}, []string{"12.5"}},
		{"~ 12.4", []string{"12.4.1"}, []string{"12.5"}},
		{"^12", []string{"12", "12.9.1"}, []string{"13", "11.8"}},
		{"^12.4", []string{"12.4", "12.9"}, []string{"12.3", "13"}},
		{"^0.2.3", []string{"0.2.3", "0.2.9"}, []string{"0.3", "0.2.2"}},
		{"^0.0.3", []string{"0.0.3", "0.0.3.1"}, []string{"0.0.4", "0.0.2"}},
		{"^0", []string{"0", "0.9"}, []string{"1"}},
		{"~1.x", []string{"1.0", "1.9"}, []string{"2"}},
		// Alternatives.
		{"12.4 || 12.6", []string{"12.4.1", "12.6", "12.6.2"}, []string{"12.5", "12.7"}},
		{"12.4||12.6", []string{"12.6.2"}, []string{"12.5"}},
		{">= 535, < 536 || >= 550", []string{"535.2", "555"}, []string{"540"}},
		// Hyphen ranges include the upper prefix.
		{"535 - 550", []string{"535", "545.23.06", "550", "550.54.15"}, []string{"534.1", "551"}},
		{"12.4 - 12.6.1", []string{"12.4", "12.6.1", "12.6.1.5"}, []string{"12.6.2", "12.3"}},
		{"535 - 550, != 545", []string{"550.54.15"}, []string{"545.23.06"}},
		{"1.x - 2.x", []string{"1.0", "2.9"}, []string{"3.0", "0.9"}},
		// Extremes.
		{"18446744073709551615", []string{"18446744073709551615.7"}, []string{"18446744073709551614"}},
		{"> 18446744073709551615", nil, []string{"18446744073709551615.1"}},
		{"1.18446744073709551615", []string{"1.18446744073709551615.3"}, []string{"2", "1.1"}},
		{"<= 1.18446744073709551615", []string{"1.18446744073709551615.3"}, []string{"2"}},
		// Python: local labels are ignored unless named.
		{"2.5.1", []string{"2.5.1", "2.5.1+cu124", "2.5.1+cpu", "2.5.1.post1"}, []string{"2.5.2", "2.5.1rc1", "2.5.2a0"}},
		{"==2.5.1+cu124", []string{"2.5.1+cu124", "2.5.1.0+cu124"}, []string{"2.5.1", "2.5.1+cu121", "2.5.1+cu124.1"}},
		{"> 2.5.1", []string{"2.5.2", "2.5.2+cu124"}, []string{"2.5.1+cu124", "2.5.1.post1", "2.5.1"}},
		{"<= 2.5.1", []string{"2.5.1+cu124", "2.0", "2.5.1.post1"}, []string{"2.5.2", "2.5.2+cpu"}},
		{">= 2.5.1+cu121", []string{"2.5.1+cu124", "2.5.2"}, []string{"2.5.1", "2.5.1+cpu"}},
		{"> 2.5.1+cu121", []string{"2.5.1+cu124"}, []string{"2.5.1+cu121"}},
		{"< 2.5.1+cu121", []string{"2.5.1+cpu", "2.5.1", "2.4"}, []string{"2.5.1+cu121", "2.5.1+cu124"}},
		{"1.0+0.x", []string{"1.0+0.x"}, []string{"1.0+0.y", "1.0+0", "1.0"}}, // x is a local segment, not a wildcard
		{"2.5.1.post1", []string{"2.5.1.post1", "2.5.1.post1+cu124"}, []string{"2.5.1", "2.5.1.post2"}},
		{">2.5.1.post1", []string{"2.5.1.post2", "2.6"}, []string{"2.5.1.post1+cu124"}},
		// Pre-releases count only when a term names one.
		{">= 2.0", []string{"2.0", "2.1.0"}, []string{"2.1.0rc1", "2.1.0.dev20230801", "2.1.0.dev20230801+cu121"}},
		{"1.13.*", []string{"1.13.1"}, []string{"1.13.0a0"}},
		{">= 2.1.0.dev0", []string{"2.1.0.dev20230801+cu121", "2.2.0rc1", "2.1.0"}, []string{"2.0.9"}},
		{"2.0.0rc1", []string{"2.0.0rc1", "2.0.0rc1+cu118"}, []string{"2.0.0rc2", "2.0.0"}},
		{">= 2.0.0rc1, < 2.0.0rc3", []string{"2.0.0rc1", "2.0.0rc2", "2.0.0rc3.dev1"}, []string{"2.0.0", "2.0.0.dev1", "2.0.0rc3"}},
		{">= 2.0.0rc1, < 2.0.0", nil, []string{"2.0.0rc1", "2.0.0rc2", "2.0.0"}}, // PEP 440: <V rejects pre-releases of V
		{">= 2.0.0rc1, <= 2.0.0", []string{"2.0.0rc2", "2.0.0", "2.0.0.1rc1", "2.0.0.post1"}, []string{"2.0.1rc1", "2.0.0b1"}},
		{"2.1.*, >= 2.1.0a0", []string{"2.1.0rc1", "2.1.0", "2.1.3"}, []string{"2.1.0.dev5", "2.2.0a0"}},
		{"2.1.0a0 || >= 3", []string{"2.1.0a0", "3.1"}, []string{"3.1.0rc1"}},
		{">= 2.1.0a0 || >= 3", []string{"2.2.0rc1", "3.1.0rc1"}, nil},
		{"~2.0.0rc1", []string{"2.0.0rc1", "2.0.5"}, []string{"2.1.0a1", "2.1", "2.0.0b1"}},
		{"^2.0.0rc1", []string{"2.9"}, []string{"3.0.0a1"}},
		{"2.0.0a1 - 2.0.0rc1", []string{"2.0.0a1", "2.0.0b3", "2.0.0rc1"}, []string{"2.0.0rc2", "2.0.0"}},
		{"1.0 - 2.0.0rc1", []string{"1.5", "2.0.0a1"}, []string{"2.0.0"}},
		{"< 2.1", []string{"2.0.9"}, []string{"2.1.0rc1", "2.1.0.dev1"}},
		{"< 2.1, > 2.0.0a0", []string{"2.0.9", "2.0.0rc1"}, []string{"2.1.0rc1", "2.1.0.dev1", "2.0.0a0"}},
		{"!= 2.0.0rc1, >= 2.0.0a0", []string{"2.0.0rc2", "2.0.0a1"}, []string{"2.0.0rc1", "2.0.0rc1+cu118"}},
	}
	for _, tt := range tests {
		c, err := ParseConstraint(tt.constraint)
		if err != nil {
			t.Errorf("ParseConstraint(%q): %v", tt.constraint, err)
			continue
		}
		if c.String() != tt.constraint {
			t.Errorf("ParseConstraint(%q).String() = %q", tt.constraint, c.String())
		}
		for _, v := range tt.yes {
			if !c.Check(MustParse(v)) {
				t.Errorf("%q rejects %s", tt.constraint, v)
			}
		}
		for _, v := range tt.no {
			if c.Check(MustParse(v)) {
				t.Errorf("%q accepts %s", tt.constraint, v)
			}
		}
		if len(tt.yes) > 0 && !c.Satisfiable() {
			t.Errorf("%q is not satisfiable but accepts %s", tt.constraint, tt.yes[0])
		}
	}
}

func TestCheckZero(t *testing.T) {
	var any Constraint
	if !any.IsZero() || !any.Check(MustParse("1.0rc1")) || !any.Check(Version{}) || !any.Satisfiable() {
		t.Error("the zero Constraint should admit every version")
	}
	if _, ok := any.Exact(); ok {
		t.Error("the zero Constraint is not exact")
	}
	if MustParseConstraint("*").Check(Version{}) {
		t.Error(`"*" admits the zero Version`)
	}
}

func TestParseConstraintErrors(t *testing.T) {
	tests := []struct {
		in, err string
	}{
		{"", `invalid constraint "": empty`},
		{"   ", `invalid constraint "   ": empty`},
		{"12.4 ||", `empty alternative`},
		{"|| 12.4", `empty alternative`},
		{"12.4 || || 12.6", `empty alternative`},
		{"12.4 | 12.6", `version "|"`},
		{",12.4", `misplaced comma`},
		{"12.4,", `misplaced comma`},
		{"12.4,,12.6", `misplaced comma`},
		{">=", `operator ">=" needs a version`},
		{">= , 12", `operator ">=" needs a version`},
		{">= >= 12", `unexpected ">="`},
		{">=<12", `unexpected "<12"`},
		{"v12.4", `version "v12.4": must start with a digit`},
		{">= v535", `version "v535"`},
		{"5.x.1", `version "5.x.1": only wildcards may follow a wildcard`},
		{"*.1", `only wildcards may follow a wildcard`},
		{"1..2", `version "1..2": empty part after "1"`},
		{"1.2.3-rc", `version "1.2.3-rc": unexpected "-rc"`},
		{"2.0rc1.*", `a wildcard may follow only numeric parts`},
		{"2.0+cu124.*", `version "2.0+cu124.*": local label "cu124.*" may hold only`},
		{"2.0.*+cu124", `version "2.0.*+cu124": a wildcard may follow only numeric parts`},
		{"535 -", `hyphen range needs a version on each side`},
		{"- 550", `hyphen range needs a version on each side`},
		{"535 - 550 - 560", `hyphen range needs a version on each side`},
		{"535 - >=550", `version ">=550"`},
		{"535 -550", `version "-550"`},
		{"!535", `version "!535"`},
		{"12.4 && 12.5", `version "&&"`},
		{"1.99999999999999999999", `out of range`},
	}
	for _, tt := range tests {
		_, err := ParseConstraint(tt.in)
		if err == nil {
			t.Errorf("ParseConstraint(%q) succeeded, want error %q", tt.in, tt.err)
			continue
		}
		if !strings.Contains(err.Error(), tt.err) || !strings.HasPrefix(err.Error(), fmt.Sprintf("invalid constraint %q: ", tt.in)) {
			t.Errorf("ParseConstraint(%q) error = %q, want it to contain %q", tt.in, err, tt.err)
		}
	}
}

func TestSatisfiable(t *testing.T) {
	tests := []struct {
		constraint string
		want       bool
	}{
		{"535.261.03", true},
		{">= 535, < 560", true},
		{">= 560, < 550", false},
		{"> 5, < 5", false},
		{">= 5, < 5", false},
		{">= 5, <= 5", true},
		{"> 5, <= 5", false},
		{"> 5, < 6", false}, // nothing above every 5.x yet below 6
		{"> 5, <= 6", true},
		{"> 5.0, < 5.1", false},
		{"> 5.0, < 5.1.1", true}, // 5.1
		{"> 5.0, < 6", true},
		{"550.*, 560.*", false},
		{"550, 550.54", true},
		{"550.54.15, 550.54.14", false},
		{"9.1.*, 9.1.0.70", true},
		{"9.1.*, ~8.9.7", false},
		{"~8.9.7, >= 8.9.7.29", true},
		{"~8.9.7, >= 8.10", false},
		{"^12, >= 13", false},
		{"^0.2.3, >= 0.3", false},
		{"!= 5", true},
		{"!= 5, 5", false},
		{"!= 5.1, 5", true},
		{">= 5, <= 5, != 5", false},
		{">= 5, <= 6, != 5, != 6", false},
		{">= 5, <= 7, != 5, != 7", true}, // 6
		{">= 5, < 5.1, != 5.0", false},
		{">= 5, < 5.1, != 5.0.0", true}, // 5.0.1
		{">= 5, < 5.0.1, != 5.0.0", false},
		{">= 5, < 5.0.0.1, != 5.0.0.0.0", true}, // 5.0.0.0.1
		{">= 5, < 5.0.0.1, != 5.0.0.0", false},
		{"!= 0", true},
		{"< 0", false},
		{"< 0.0.0", false},
		{"<= 0", true},
		{"> 18446744073709551615", false},
		{">= 18446744073709551615", true},
		{"> 18446744073709551615.18446744073709551615", false},
		{"> 18446744073709551614.18446744073709551615", true},
		{"> *", false},
		{"< *", false},
		{"!= *", false},
		{"*", true},
		{"<= *", true},
		{"550 - 535", false},
		{"535 - 535", true},
		{">= 560, < 550 || 12.4", true},
		{">= 560, < 550 || > 5, < 5", false},
		// Pre-releases: admitted by name.
		{">= 2.0.0rc1, < 2.0.0", false},
		{">= 2.0.0rc1, < 2.0.0rc2", true},
		{"> 2.0.0rc1, < 2.0.0rc1", false},
		{"2.0.0rc1, 2.0.0rc2", false},
		{"2.0.0rc1, != 2.0.0rc1", false},
		{">= 2.0.0a0, < 2.0", false},
		{">= 2.0.0a0, <= 2.0", true},
		{"2.5.1, 2.5.1+cu124", true},
		{"2.5.1+cu121, 2.5.1+cu124", false},
		{"> 2.5.1, < 2.5.2", false},
		{"> 2.5.1, < 2.5.2.1", true},
		{">= 2.5.1+cu121, < 2.5.1+cu124", true},
		// Documented over-approximations: empty gaps between adjacent versions.
		{"> 2.5.1.post1, < 2.5.1.post2", true},
		{"> 1.0.dev1, < 1.0.dev2", true},
		{"> 2.5.1, <= 2.5.1+cu124", false},
	}
	for _, tt := range tests {
		c := MustParseConstraint(tt.constraint)
		if got := c.Satisfiable(); got != tt.want {
			t.Errorf("%q.Satisfiable() = %v, want %v", tt.constraint, got, tt.want)
		}
		checkWitnesses(t, c)
	}
}

// checkWitnesses checks that each least version Satisfiable found satisfies
// its alternative.
func checkWitnesses(t *testing.T, c Constraint) {
	t.Helper()
	for _, b := range c.branches {
		ok, w := b.satisfiable()
		if ok && !w.IsZero() {
			if _, err := Parse(w.String()); err != nil {
				t.Errorf("%q: witness %q does not parse: %v", c, w, err)
			}
			if !b.check(w) {
				t.Errorf("%q: witness %s does not satisfy its alternative", c, w)
			}
		}
		if ok && w.IsZero() && b.releasesOnly() {
			t.Errorf("%q: satisfiable without a witness", c)
		}
	}
}

// releasesOnly reports whether the branch names only plain releases, where
// Satisfiable is exact.
func (b branch) releasesOnly() bool {
	for _, t := range b.terms {
		if !t.v.isRelease() || t.v.local != "" {
			return false
		}
	}
	return true
}

// TestSatisfiableExhaustive compares Satisfiable with a search over every
// small version, for random constraints of plain releases. The search is
// complete: when such a constraint admits a version it admits one of its
// bounds, and every bound lies in the grid.
func TestSatisfiableExhaustive(t *testing.T) {
	var grid []Version
	var walk func(prefix string, depth int)
	walk = func(prefix string, depth int) {
		for p := range 6 {
			s := fmt.Sprint(p)
			if prefix != "" {
				s = prefix + "." + s
			}
			grid = append(grid, MustParse(s))
			if depth < 4 {
				walk(s, depth+1)
			}
		}
	}
	walk("", 1)

	ops := []string{"", "=", "!=", ">", ">=", "<", "<=", "~", "^"}
	rng := rand.New(rand.NewPCG(1, 2))
	randVersion := func() string {
		parts := make([]string, 1+rng.IntN(3))
		for i := range parts {
			parts[i] = fmt.Sprint(rng.IntN(4))
		}
		if rng.IntN(5) == 0 {
			parts = append(parts, "*")
		}
		return strings.Join(parts, ".")
	}
	n := 3000
	if testing.Short() {
		n = 300
	}
	for range n {
		var alts []string
		for range 1 + rng.IntN(2) {
			var terms []string
			for range 1 + rng.IntN(4) {
				if rng.IntN(8) == 0 {
					terms = append(terms, randVersion()+" - "+randVersion())
					continue
				}
				terms = append(terms, ops[rng.IntN(len(ops))]+randVersion())
			}
			alts = append(alts, strings.Join(terms, ", "))
		}
		s := strings.Join(alts, " || ")
		c := MustParseConstraint(s)
		want := false
		for _, v := range grid {
			if c.Check(v) {
				want = true
				break
			}
		}
		if got := c.Satisfiable(); got != want {
			t.Errorf("%q.Satisfiable() = %v, search says %v", s, got, want)
		}
		checkWitnesses(t, c)
	}
}

func TestExact(t *testing.T) {
	tests := []struct {
		constraint string
		want       string // "" when not exact
	}{
		{"535.261.03", "535.261.03"},
		{"= 535.261.03", "535.261.03"},
		{"=535.261.03", "535.261.03"},
		{"==2.5.1+cu124", "2.5.1+cu124"},
		{"12.4", "12.4"},
		{"9.1.0.70", "9.1.0.70"},
		{"2.0.0rc1", "2.0.0rc1"},
		{" 550 ", "550"},
		{"550.*", ""},
		{"*", ""},
		{">= 535", ""},
		{"!= 535.1", ""},
		{"~12.4", ""},
		{"^12", ""},
		{"535 - 535", ""},
		{"535.261.03, 535.261.03", ""},
		{"535.261.03 || 535.261.03", ""},
	}
	for _, tt := range tests {
		v, ok := MustParseConstraint(tt.constraint).Exact()
		if ok != (tt.want != "") || v.String() != tt.want {
			t.Errorf("%q.Exact() = %q, %v; want %q", tt.constraint, v, ok, tt.want)
		}
	}
}

func TestConstraintJSON(t *testing.T) {
	type doc struct {
		Driver Constraint `json:"driver"`
		CUDA   Constraint `json:"cuda,omitzero"`
	}
	in := doc{Driver: MustParseConstraint(">= 535, < 560")}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"driver":"\u003e= 535, \u003c 560"}`
	if string(b) != want {
		t.Errorf("Marshal = %s, want %s", b, want)
	}
	var out doc
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if out.Driver.String() != in.Driver.String() || !out.Driver.Check(MustParse("550.54.15")) || out.Driver.Check(MustParse("560")) || !out.CUDA.IsZero() {
		t.Errorf("round trip = %#v", out)
	}
	var z Constraint
	if err := json.Unmarshal([]byte(`""`), &z); err != nil || !z.IsZero() {
		t.Errorf(`Unmarshal("") = %v, %v; want the zero Constraint`, z, err)
	}
	err = json.Unmarshal([]byte(`{"driver":">= v1"}`), &out)
	if err == nil || !strings.Contains(err.Error(), `invalid constraint ">= v1"`) {
		t.Errorf("Unmarshal of a bad constraint: %v", err)
	}
}
