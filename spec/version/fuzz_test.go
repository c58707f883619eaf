package version

import (
	"encoding/json"
	"testing"
)

var versionSeeds = []string{
	"535.261.03", "12.4", "12.4.1", "9.1.0.70", "8.9.7.29", "550", "11.8.89",
	"2.5.1+cu124", "1.13.0a0", "2.0.0rc1", "2.1.0.dev20230801+cu121",
	"1.0rc1.post2.dev3+abc.7", "1.0.post1", "0", "18446744073709551615",
	"", "v1", "1..2", "-1", "1.2.3-rc", "1.", "5.x", "1.0+", "1.0+A",
}

// FuzzParse checks that whatever parses prints as written, parses back to
// an equal version and survives Trunc and JSON.
func FuzzParse(f *testing.F) {
	for _, s := range versionSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := Parse(s)
		if err != nil {
			if !v.IsZero() {
				t.Fatalf("Parse(%q) failed but returned %#v", s, v)
			}
			return
		}
		if v.String() != s || v.IsZero() {
			t.Fatalf("Parse(%q) = %#v", s, v)
		}
		if w := MustParse(v.String()); w.Compare(v) != 0 || v.Compare(w) != 0 {
			t.Fatalf("%q does not equal its reparse", s)
		}
		for n := range len(v.parts) + 1 {
			tr := v.Trunc(n)
			if n == 0 {
				if !tr.IsZero() {
					t.Fatalf("%q.Trunc(0) = %q", s, tr)
				}
				continue
			}
			p, err := Parse(tr.String())
			if err != nil || p.Compare(tr) != 0 || len(p.parts) != n || compareParts(p.parts, v.parts[:n]) != 0 {
				t.Fatalf("%q.Trunc(%d) = %q: %v", s, n, tr, err)
			}
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var back Version
		if err := json.Unmarshal(b, &back); err != nil || back.String() != s || back.Compare(v) != 0 {
			t.Fatalf("JSON round trip of %q = %q, %v", s, back, err)
		}
		if !MustParseConstraint("=" + s).Check(v) {
			t.Fatalf("%q does not satisfy =%s", s, s)
		}
	})
}

var constraintSeeds = []string{
	"535.261.03", "550.*", "12.x", ">= 535, < 560", ">=535,<560", "~12.4",
	"~8.9.7", "^12", "^0.2.3", "!= 535.1", "12.4 || 12.6", "535 - 550",
	"9.1.*", "*", ">= 560, < 550", "> 5, < 5", "550.*, 560.*",
	">= 2.0.0rc1, < 2.0.0rc3", "==2.5.1+cu124", "> 2.5.1", "=> 1, =< 2",
	"~>1.2", "", "12.4 ||", ",", ">=", "535 -", "5.x.1", ">= v1",
}

// FuzzParseConstraint checks that whatever parses prints as written,
// reparses to the same meaning, and that Exact and Satisfiable agree with
// Check.
func FuzzParseConstraint(f *testing.F) {
	for _, s := range constraintSeeds {
		f.Add(s, "12.4.1")
	}
	f.Add(">= 2.1.0.dev0", "2.1.0.dev20230801+cu121")
	f.Add("~8.9.7", "8.9.7.29")
	f.Fuzz(func(t *testing.T, s, vs string) {
		c, err := ParseConstraint(s)
		if err != nil {
			if !c.IsZero() {
				t.Fatalf("ParseConstraint(%q) failed but returned %#v", s, c)
			}
			return
		}
		if c.String() != s || c.IsZero() {
			t.Fatalf("ParseConstraint(%q) = %#v", s, c)
		}
		again := MustParseConstraint(c.String())
		sat := c.Satisfiable()
		if again.Satisfiable() != sat {
			t.Fatalf("%q: reparse changed Satisfiable", s)
		}
		checkWitnesses(t, c)
		if v, ok := c.Exact(); ok && !c.Check(v) {
			t.Fatalf("%q.Exact() = %q, which it rejects", s, v)
		}
		v, err := Parse(vs)
		if err != nil {
			return
		}
		if c.Check(v) != again.Check(v) {
			t.Fatalf("%q: reparse changed Check(%q)", s, vs)
		}
		if c.Check(v) && !sat {
			t.Fatalf("%q admits %q but is not satisfiable", s, vs)
		}
	})
}
