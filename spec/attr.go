package spec

import "github.com/hashicorp/hcl/v2"

// Attr is one attribute as the spec wrote it. An attribute that was left out
// or set to null is not Set, and gpuenv leaves what it describes alone;
// false, 0 or an empty list are Set and managed like any other value.
type Attr[T any] struct {
	Value T
	Set   bool
	// Range covers the attribute's value expression; it is the zero Range
	// when the attribute is not Set.
	Range hcl.Range
}

// Get returns the value and whether the spec set it.
func (a Attr[T]) Get() (T, bool) {
	return a.Value, a.Set
}

// Or returns the value the spec set, or def when it set none.
func (a Attr[T]) Or(def T) T {
	if a.Set {
		return a.Value
	}
	return def
}

// RangeOr returns the attribute's range, or block (the range of the block
// that holds it) when the spec did not set it: where a diagnostic about
// the attribute's value points.
func (a Attr[T]) RangeOr(block hcl.Range) hcl.Range {
	if a.Set {
		return a.Range
	}
	return block
}

func setAttr[T any](v T, rng hcl.Range) Attr[T] {
	return Attr[T]{Value: v, Set: true, Range: rng}
}
