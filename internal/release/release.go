// Package release names gpuenv's version: the one constant below, stamped
// with the commit it was built from, so that `gpuenv version` and the
// version of the .deb and .rpm that carry the binary are the same string.
package release

import (
	"runtime/debug"
)

// Version is the release this tree is, in semantic-versioning form; it
// starts with a digit because Debian and RPM versions must.
const Version = "0.9.0"

// revisionDigits is how much of the commit id a version carries: as many
// as git's abbreviated ids in a repository of this size, and enough to be
// unique for years.
const revisionDigits = 12

// The commit and whether the tree had uncommitted changes, set with
// -ldflags -X by deploy/package. The Go toolchain records them itself only
// when VCS stamping is on (GOFLAGS may say -buildvcs=false) and it finds
// the repository (it does not see a git worktree's .git file).
var (
	revision string
	modified string
)

// Build is how a binary was built: its version and, where known, the full
// commit id.
type Build struct {
	Version  string
	Revision string
}

// FromBuildInfo is the build of a binary with bi: Version, with the commit
// as semantic-versioning build metadata ("0.9.0+g0123456789ab") when the
// Go toolchain recorded one, and ".dirty" after it when the tree had
// uncommitted changes. Without a recorded commit (go test, go run, a
// source tarball) it is Version alone.
func FromBuildInfo(bi *debug.BuildInfo) Build {
	var rev string
	var dirty bool
	if bi != nil {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	return Build{Version: WithCommit(rev, dirty), Revision: rev}
}

// WithCommit is Version stamped with the commit rev; rev "" is no commit.
func WithCommit(rev string, dirty bool) string {
	if rev == "" {
		return Version
	}
	if len(rev) > revisionDigits {
		rev = rev[:revisionDigits]
	}
	v := Version + "+g" + rev
	if dirty {
		v += ".dirty"
	}
	return v
}

// LinkerFlags are the -ldflags with which a build stamps rev and dirty
// into this package.
func LinkerFlags(rev string, dirty bool) string {
	const pkg = "github.com/gpuenv/gpuenv/internal/release"
	f := "-X " + pkg + ".revision=" + rev
	if dirty {
		f += " -X " + pkg + ".modified=true"
	}
	return f
}

// Current is the build of the running binary: what deploy/package stamped,
// or else what the Go toolchain recorded.
func Current() Build {
	if revision != "" {
		return Build{Version: WithCommit(revision, modified == "true"), Revision: revision}
	}
	bi, _ := debug.ReadBuildInfo()
	return FromBuildInfo(bi)
}
