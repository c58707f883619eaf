package pkgindex

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
)

// ListsDir is where apt keeps the indexes "apt-get update" fetched.
const ListsDir = "/var/lib/apt/lists"

// compressions are the extensions apt gives a list it keeps compressed
// (Acquire::GzipIndexes, Acquire::CompressionTypes), "" for a plain one.
var compressions = []string{"", ".lz4", ".gz", ".xz", ".zst", ".bz2"}

// URIToFileName is apt's name, inside ListsDir, of the file it downloads
// from uri (apt-pkg/contrib/strutl.cc, URItoFileName): the scheme, user
// and password dropped, the characters `\|{}[]<>"^~_=!@#$%&*`, spaces,
// controls and bytes outside ASCII written as %xx (lower-case hex; "_"
// becomes %5f), and every "/" made "_". So
// http://deb.debian.org/debian/dists/bookworm/InRelease is
// deb.debian.org_debian_dists_bookworm_InRelease, and NVIDIA's
// .../ubuntu2204/x86_64/Packages ends in ubuntu2204_x86%5f64_Packages.
func URIToFileName(uri string) string {
	rest := uri
	// apt's URI class: the scheme ends at the first ':', and a host
	// follows "//".
	if i := strings.IndexByte(rest, ':'); i >= 0 {
		rest = rest[i+1:]
	}
	host, p := "", rest
	if strings.HasPrefix(rest, "//") {
		rest = rest[2:]
		host, p = rest, ""
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			host, p = rest[:i], rest[i:]
		}
		if i := strings.LastIndexByte(host, '@'); i >= 0 {
			host = host[i+1:]
		}
		host = strings.Trim(host, "[]")
	}
	if p == "" {
		p = "/"
	}
	return strings.ReplaceAll(quote(host+p, `\|{}[]<>"^~_=!@#$%^&*`), "/", "_")
}

// quote is apt's QuoteString: each byte in bad, '%', a space or control
// and every byte from 0x7f up is written as %xx.
func quote(s, bad string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= 0x20 || c >= 0x7f || c == '%' || strings.IndexByte(bad, c) >= 0 {
			fmt.Fprintf(&b, "%%%02x", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// uriEncode is pkgAcquire::URIEncode with apt's default
// Acquire::URIEncode ("+~ "), which apt applies to a suite and an index's
// path before they join the source's URI.
func uriEncode(s string) string { return quote(s, "+~ ") }

// entry is one source entry of one suite: an apt "deb" line or deb822
// stanza expands to one per URI and suite.
type entry struct {
	file, uri, suite string
	components       []string
}

// flat reports whether the entry is a flat repository ("deb URI ./"),
// whose suite is a path and which has no components.
func (e entry) flat() bool { return strings.HasSuffix(e.suite, "/") }

// metaURI is apt's constructMetaIndexURI (apt-pkg/deb/debmetaindex.cc):
// the URI of a file of the suite.
func (e entry) metaURI(name string) string {
	uri := e.uri
	if !strings.HasSuffix(uri, "/") {
		uri += "/"
	}
	switch {
	case e.suite == "/":
	case e.flat():
		uri += uriEncode(e.suite)
	default:
		uri += "dists/" + uriEncode(e.suite) + "/"
	}
	return uri + uriEncode(name)
}

// site is the host of the entry's URI, which "Pin: origin" matches; ""
// for a local source (file:, cdrom:).
func (e entry) site() string {
	u, err := url.Parse(e.uri)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

// entries expands the configured apt sources into one entry per URI and
// suite, in the order apt reads them.
func entries(repos []facts.Repository) []entry {
	var out []entry
	for _, r := range repos {
		for _, u := range r.URIs {
			for _, s := range r.Suites {
				out = append(out, entry{file: r.File, uri: u, suite: s, components: r.Components})
			}
		}
	}
	return out
}

// listName is a Packages list as ListsDir holds it: the name apt gives
// the index of a component and architecture, or of a flat repository,
// and how it is compressed.
type listName struct {
	entry     entry
	component string
	arch      string // "" for a flat repository, whose stanzas say
	file      string // the name in ListsDir
}

// matchLists finds the lists of e among the names in ListsDir. apt
// fetches one per component and architecture it is configured for
// (APT::Architectures, the entry's arch= option, binary-all where the
// suite publishes one); rather than recompute that set, the names on disk
// say which were fetched. A name with an extension gpuenv cannot
// decompress is not matched.
func matchLists(e entry, names map[string]bool) []listName {
	var out []listName
	if e.flat() {
		base := URIToFileName(e.metaURI("Packages"))
		for _, ext := range compressions {
			if names[base+ext] {
				out = append(out, listName{entry: e, file: base + ext})
				break
			}
		}
		return out
	}
	for _, comp := range e.components {
		prefix := URIToFileName(e.metaURI(comp + "/binary-"))
		// One list per architecture: where apt left it both plain and
		// compressed (the configuration changed), the first of
		// compressions.
		byArch := map[string]string{}
		for name := range names {
			rest, ok := strings.CutPrefix(name, prefix)
			if !ok {
				continue
			}
			arch, ext, ok := strings.Cut(rest, "_Packages")
			if !ok || strings.Contains(arch, "_") {
				continue
			}
			rank := slices.Index(compressions, ext)
			if rank < 0 {
				continue
			}
			if old, seen := byArch[arch]; !seen || rank < slices.Index(compressions, strings.TrimPrefix(old, prefix+arch+"_Packages")) {
				byArch[arch] = name
			}
		}
		for _, arch := range slices.Sorted(maps.Keys(byArch)) {
			out = append(out, listName{entry: e, component: comp, arch: arch, file: byArch[arch]})
		}
	}
	return out
}
