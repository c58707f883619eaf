// Package pkgindex reads the package indexes a root already has on disk,
// the way its package manager reads them, into facts.PackageIndexes:
// apt's lists under /var/lib/apt/lists (plain or compressed with gzip,
// lz4, xz, zstd or bzip2), the InRelease or Release file of each suite,
// the pins of /etc/apt/preferences and preferences.d and
// APT::Default-Release; or dnf 4's metadata cache (primary.xml under
// /var/cache/dnf/<repo>-<hash>/repodata). dnf 5 keeps its cache under
// /var/cache/libdnf5 and is not read yet.
//
// A list of the Debian archive is tens of megabytes, of which gpuenv
// wants a few hundred stanzas. The lists are scanned, not parsed: each
// "Package:" line is found with a byte search in the decompressed
// stream, and only the stanzas of GPU-relevant packages (pkgdb.Relevant)
// go to the deb822 parser (pault.ag/go/debian's control package, through
// pkgdb.Paragraphs). Versions are ordered as dpkg orders them.
//
// Priorities and candidates follow apt's policy (apt_preferences(5) and
// apt-pkg/policy.cc; see policy.go), so that what a plan installs is
// what "apt-get install name" would, and the plan can say which pin or
// priority decided.
//
// The relevant stanzas of each list are cached in /var/cache/gpuenv
// inside the root, keyed by the list's identity (path, size,
// modification time, inode), so that a second plan does not decompress
// the archive again (see cache.go for who may write and read it).
package pkgindex
