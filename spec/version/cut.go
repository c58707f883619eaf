package version

import "math"

// A cut is a point between versions that bounds an interval: just before a
// version, just after it, or beyond either end. Bounds as cuts rather than
// as versions with inclusive/exclusive flags give "> 2.5.1" its PEP 440
// meaning: after 2.5.1 and after every 2.5.1+local.
type cut struct {
	kind cutKind
	v    Version
}

type cutKind uint8

const (
	cutNegInf cutKind = iota
	cutBefore
	cutAfter
	cutPosInf
)

var (
	negInf = cut{kind: cutNegInf}
	posInf = cut{kind: cutPosInf}
)

func before(v Version) cut  { return cut{kind: cutBefore, v: v} }
func afterOf(v Version) cut { return cut{kind: cutAfter, v: v} }

// releaseStart is the cut below every version whose release starts with
// parts, pre-releases included: just before "parts.dev0".
func releaseStart(parts []uint64) cut {
	if len(parts) == 0 {
		return negInf
	}
	return before(Version{parts: parts, dev: true})
}

// releaseEnd is the cut above every version whose release starts with
// parts: the start of the next such prefix.
func releaseEnd(parts []uint64) cut {
	next, ok := successor(parts)
	if !ok {
		return posInf
	}
	return releaseStart(next)
}

// successor returns the least prefix above every release starting with
// parts: the last part plus one, carrying into the part before it when the
// last is at its maximum. It fails when every part is at its maximum (or
// there are none), as nothing lies above those releases.
func successor(parts []uint64) ([]uint64, bool) {
	for i := len(parts) - 1; i >= 0; i-- {
		if parts[i] < math.MaxUint64 {
			next := append([]uint64(nil), parts[:i+1]...)
			next[i]++
			return next, true
		}
	}
	return nil, false
}

func (c cut) side() int {
	if c.kind == cutBefore {
		return -1
	}
	return 1
}

// cmp orders cuts.
func (c cut) cmp(d cut) int {
	if r := cmpInt(c.end(), d.end()); r != 0 || c.end() != 0 {
		return r
	}
	return comparePos(c.v, c.side(), d.v, d.side())
}

// end places a cut: -1 below every version, +1 above every version, 0
// among them.
func (c cut) end() int {
	switch c.kind {
	case cutNegInf:
		return -1
	case cutPosInf:
		return 1
	}
	return 0
}

// cmpVersion returns -1 when c lies below v and +1 when above.
func (c cut) cmpVersion(v Version) int {
	switch c.kind {
	case cutNegInf:
		return -1
	case cutPosInf:
		return 1
	}
	return comparePos(c.v, c.side(), v, 0)
}

// comparePos orders positions: a version (side 0), or just before (-1) or
// just after (+1) one. Just after a version without a local label lies
// above every local variant of it, because constraints that name no local
// label ignore it (PEP 440).
func comparePos(a Version, aSide int, b Version, bSide int) int {
	if c := a.compareNoLocal(b); c != 0 {
		return c
	}
	aTop, bTop := aSide > 0 && a.local == "", bSide > 0 && b.local == ""
	if aTop != bTop {
		if aTop {
			return 1
		}
		return -1
	}
	if !aTop {
		if c := compareLocal(a.local, b.local); c != 0 {
			return c
		}
	}
	return cmpInt(aSide, bSide)
}
