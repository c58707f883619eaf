package version

import "testing"

func TestIntersect(t *testing.T) {
	tests := []struct {
		c, d, want string
		ok         bool
	}{
		{"", "", "", true},
		{"550.*", "", "550.*", true},
		{"", ">= 550", ">= 550", true},
		{"", ">= 550, >= 560", ">= 560", true},
		{"535.*", ">= 520.61.05", "535.*", true},
		{">= 525.60.13", ">= 570", ">= 570", true},
		{"550.54.15", ">= 550.54.14", "550.54.15", true},
		{"< 581", ">= 384", "< 581, >= 384", true},
		{"535.*", "535.*", "535.*", true},
		{"535.* || 550.*", ">= 540", "535.*, >= 540 || 550.*", true},
		{"535.*", ">= 550", "535.*, >= 550", false},
		{"535.* || 550.*", "< 540 || >= 550.54", "535.*, < 540 || 535.*, >= 550.54 || 550.*, < 540 || 550.*, >= 550.54", true},
		{"~12.4", "12.6.*", "~12.4, 12.6.*", false},
		{">= 8.9, < 10", "9.1.0.70", ">= 8.9, < 10, 9.1.0.70", true},
	}
	for _, tt := range tests {
		var c, d Constraint
		if tt.c != "" {
			c = MustParseConstraint(tt.c)
		}
		if tt.d != "" {
			d = MustParseConstraint(tt.d)
		}
		got, ok := c.Intersect(d)
		if got.String() != tt.want || ok != tt.ok {
			t.Errorf("%q ∩ %q = %q, %v; want %q, %v", tt.c, tt.d, got, ok, tt.want, tt.ok)
		}
	}
}

// TestIntersectAdmits: a version satisfies the intersection exactly when
// it satisfies both constraints.
func TestIntersectAdmits(t *testing.T) {
	cs := []string{"", "535.*", ">= 535, < 560", "550.*", "535.* || 550.*", "~12.4", ">= 550.54.14", "!= 550.54.15", "< 540 || >= 550.54", "^9.1"}
	vs := []string{"384.1", "535", "535.261.03", "540.1", "550.54.14", "550.54.15", "550.163.01", "560.35.03", "12.4.1", "12.6", "9.1.0.70", "9.2"}
	parse := func(s string) Constraint {
		if s == "" {
			return Constraint{}
		}
		return MustParseConstraint(s)
	}
	for _, a := range cs {
		for _, b := range cs {
			c, d := parse(a), parse(b)
			n, ok := c.Intersect(d)
			any := false
			for _, s := range vs {
				v := MustParse(s)
				want := c.Check(v) && d.Check(v)
				any = any || want
				if n.Check(v) != want {
					t.Errorf("%q ∩ %q = %q: Check(%s) = %v, want %v", a, b, n, s, n.Check(v), want)
				}
			}
			if any && !ok {
				t.Errorf("%q ∩ %q = %q reported empty, but admits a version", a, b, n)
			}
		}
	}
}
