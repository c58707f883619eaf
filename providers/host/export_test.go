package host

import "testing"

// UseWalker makes the observation handles made until the test ends
// resolve paths component by component, as they do where the kernel has
// no openat2.
func UseWalker(tb testing.TB) {
	forceWalker = true
	tb.Cleanup(func() { forceWalker = false })
}

// HoldAtMost bounds the directories an observation handle keeps open
// until the test ends.
func HoldAtMost(tb testing.TB, n int) {
	old := maxHeld
	maxHeld = n
	tb.Cleanup(func() { maxHeld = old })
}

// ResolvesInKernel reports whether h resolves paths through directory
// descriptors.
func (h *Host) ResolvesInKernel() bool {
	c := h.fds.lock()
	if c == nil {
		return false
	}
	c.mu.Unlock()
	return true
}
