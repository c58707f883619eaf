package host

import (
	"path"
	"testing"
)

// isClean must say of every path exactly what path.Clean says: a path it
// calls clean is one Clean leaves as it is, and no other.
func FuzzIsClean(f *testing.F) {
	for _, p := range []string{"/", "", ".", "..", "/a", "/a/", "//a", "/a//b", "/./a", "/a/.", "/a/..", "/a/../b", "/..", "/...", "/a...",
		"/..a", "/a/.b", "a/b", "/usr/local/cuda-12.4/bin/nvcc", "/a/b/", "/a/./"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if got, want := isClean(p), path.Clean(p) == p && path.IsAbs(p); got != want {
			t.Errorf("isClean(%q) = %v, path.Clean gives %q", p, got, path.Clean(p))
		}
		if got, want := cleanPath(p), path.Clean(p); got != want {
			t.Errorf("cleanPath(%q) = %q, want %q", p, got, want)
		}
	})
}
