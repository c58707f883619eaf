package planner

import (
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"testing"
)

// DriverPackage runs driverTopLevel only on names that begin with one of
// driverTopLevelPrefixes: each alternative of the expression must.
func TestDriverTopLevelPrefixes(t *testing.T) {
	re, err := syntax.Parse(driverTopLevel.String(), syntax.Perl)
	if err != nil {
		t.Fatal(err)
	}
	// ^(a|b|…)$: the alternatives are under the capture.
	var alts []*syntax.Regexp
	var walk func(*syntax.Regexp)
	walk = func(r *syntax.Regexp) {
		switch r.Op {
		case syntax.OpConcat, syntax.OpCapture:
			for _, s := range r.Sub {
				walk(s)
			}
		case syntax.OpAlternate:
			alts = append(alts, r.Sub...)
		}
	}
	walk(re)
	if len(alts) < 2 {
		t.Fatalf("no alternatives found in %s", driverTopLevel)
	}
	for _, a := range alts {
		prefix, _ := regexp.MustCompile(a.String()).LiteralPrefix()
		if !slices.ContainsFunc(driverTopLevelPrefixes, func(p string) bool { return strings.HasPrefix(prefix, p) }) {
			t.Errorf("driverTopLevel's alternative %s begins with %q, none of %q: DriverPackage would never match it", a, prefix, driverTopLevelPrefixes)
		}
	}
}
