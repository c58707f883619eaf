package repository

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzParseSourcesList: any sources.list.d drop-in parses without a
// panic; each repository comes from one "deb" line, and its URI, suites
// and components are words of the file, outside comments.
func FuzzParseSourcesList(f *testing.F) {
	for _, s := range []string{
		"deb http://deb.debian.org/debian bookworm main contrib\n",
		"deb [arch=amd64 signed-by=/k.gpg] https://x/ubuntu jammy main # c\n# deb http://y z w\ndeb-src http://a b c\n",
		"deb [ unterminated http://x y\n", "deb\n", "deb a b",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		repos := ParseSourcesList("/etc/apt/sources.list.d/x.list", data)
		if n := bytes.Count(data, []byte("deb")); len(repos) > n {
			t.Fatalf("%d repositories from %d \"deb\" words: %q", len(repos), n, data)
		}
		for _, r := range repos {
			if len(r.URIs) != 1 || len(r.Suites) != 1 {
				t.Fatalf("repository %+v of %q", r, data)
			}
			for _, w := range append(append(append([]string(nil), r.URIs...), r.Suites...), r.Components...) {
				if w == "" || strings.ContainsAny(w, " \t\n#") || !bytes.Contains(data, []byte(w)) {
					t.Fatalf("repository %+v of %q: %q is no word of the file", r, data, w)
				}
			}
		}
	})
}

// FuzzParseDeb822: any .sources drop-in parses without a panic, and a
// repository's URIs, suites and components are words of the file.
func FuzzParseDeb822(f *testing.F) {
	for _, s := range []string{
		"Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: main\n",
		"Types: deb deb-src\nURIs: a\n b\nSuites: s\nEnabled: no\n\nTypes: deb\nURIs: c\n",
		"# x\n\n Types: deb\n:\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, r := range ParseDeb822("/etc/apt/sources.list.d/x.sources", data) {
			for _, w := range append(append(append([]string(nil), r.URIs...), r.Suites...), r.Components...) {
				if w == "" || strings.ContainsAny(w, " \t\n") || !bytes.Contains(data, []byte(w)) {
					t.Fatalf("repository %+v of %q: %q is no word of the file", r, data, w)
				}
			}
		}
	})
}
