package version

import (
	"slices"
	"strings"
)

// Intersect returns the constraint that admits exactly the versions both c
// and d admit, and reports whether any version is left (Satisfiable). The
// zero Constraint admits everything: intersected with it, a constraint
// admits what it did.
//
// The result is written, like a constraint a person would write, from the
// terms of c and d as they were written: each alternative of c is joined
// with each alternative of d, a term already there is not repeated, and a
// lower bound ("≥ X", "X", "X.*") that another term already implies is
// left out or, when it raises a ">=" already there, replaces it:
//
//	"535.*"          ∩ ">= 520.61.05" = "535.*"
//	">= 525.60.13"   ∩ ">= 570"       = ">= 570"
//	"535.* || 550.*" ∩ ">= 540"       = "535.*, >= 540 || 550.*" (the first alternative admits nothing)
func (c Constraint) Intersect(d Constraint) (Constraint, bool) {
	if d.IsZero() {
		return c, c.Satisfiable()
	}
	var alts []string
	for a := range strings.SplitSeq(c.text, "||") { // the zero c: one empty alternative
		for b := range strings.SplitSeq(d.text, "||") {
			terms := termTexts(a)
			for _, t := range termTexts(b) {
				terms = addTerm(terms, t)
			}
			alts = append(alts, strings.Join(terms, ", "))
		}
	}
	n, err := ParseConstraint(strings.Join(alts, " || "))
	if err != nil {
		// The terms of two valid constraints make a valid one; keep c
		// rather than panic should that ever not hold.
		return c, false
	}
	return n, n.Satisfiable()
}

// termTexts splits one alternative at its commas into trimmed terms.
func termTexts(alt string) []string {
	var terms []string
	for t := range strings.SplitSeq(alt, ",") {
		if t = strings.TrimSpace(t); t != "" {
			terms = append(terms, t)
		}
	}
	return terms
}

// addTerm adds a term to one alternative's terms, leaving out a lower
// bound that a term already there implies and replacing a lower bound
// that the new one raises, so that an intersection reads like a
// constraint a person would write.
func addTerm(terms []string, t string) []string {
	if slices.Contains(terms, t) {
		return terms
	}
	floor, isFloor := lowerBound(t)
	if !isFloor || !strings.HasPrefix(t, ">=") {
		return append(terms, t)
	}
	for i, have := range terms {
		b, ok := lowerBound(have)
		if !ok {
			continue
		}
		if b.Compare(floor) >= 0 {
			return terms
		}
		if strings.HasPrefix(have, ">=") {
			terms[i] = t
			return terms
		}
	}
	return append(terms, t)
}

// lowerBound is the least version a term admits when the term has one:
// ">= X", an exact "X" or "= X", or a wildcard "X.*".
func lowerBound(t string) (Version, bool) {
	t = strings.TrimSpace(t)
	switch {
	case strings.HasPrefix(t, ">="):
		t = strings.TrimSpace(t[2:])
	case strings.HasPrefix(t, "="):
		t = strings.TrimSpace(t[1:])
	case strings.ContainsAny(t[:min(1, len(t))], "<>!~^"):
		return Version{}, false
	}
	t = strings.TrimSuffix(strings.TrimSuffix(t, ".*"), ".x")
	v, err := Parse(t)
	return v, err == nil
}
