package applytest

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/pkgdb"
)

// Excluded are the paths "the same host" leaves out: what the tools keep
// for themselves (backups, logs, caches) and the database compared as
// packages instead of bytes (its paragraphs' layout is the tool's
// business). The state directory is excluded by Snapshot's caller.
var Excluded = []string{
	"/etc/group-", "/etc/gshadow-", "/etc/passwd-", "/etc/shadow-",
	"/var/lib/dpkg/status", "/var/lib/dpkg/status-old",
	"/var/log", "/var/cache",
}

// State is a host as "the same host" compares it.
type State struct {
	// Files maps a path inside the root to its type, mode, owner and
	// content hash or link target.
	Files map[string]string
	// Packages maps a package name to "version status": the hold is the
	// status' first word.
	Packages map[string]string
}

// Snapshot reads root, leaving out Excluded and extra (paths inside the
// root, such as the state directory) and Python's byte-code caches.
func Snapshot(root string, extra ...string) (*State, error) {
	skip := map[string]bool{}
	for _, p := range append(append([]string{}, Excluded...), extra...) {
		skip[filepath.Clean(p)] = true
	}
	st := &State{Files: map[string]string{}, Packages: map[string]string{}}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := "/" + strings.TrimPrefix(strings.TrimPrefix(p, root), "/")
		if skip[rel] || d.Name() == "__pycache__" {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		sys := fi.Sys().(*syscall.Stat_t)
		desc := fmt.Sprintf("%s %04o %d:%d", fi.Mode().Type(), sys.Mode&0o7777, sys.Uid, sys.Gid)
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			desc += " -> " + t
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += fmt.Sprintf(" sha256:%x", sha256.Sum256(data))
		case fi.Mode()&fs.ModeDevice != 0:
			desc += fmt.Sprintf(" dev:%d", sys.Rdev)
		}
		if rel != "/" {
			st.Files[rel] = desc
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	h, err := host.New(root)
	if err != nil {
		return nil, err
	}
	for _, p := range pkgdb.ReadDpkgAll(h).Packages {
		st.Packages[p.Name] = p.Version + " " + pkgdb.StatusText(p)
	}
	return st, nil
}

// Diff lists how b differs from a, one line each, sorted; empty means the
// same host.
func Diff(a, b *State) string {
	var out []string
	cmp := func(kind string, x, y map[string]string) {
		for k, v := range x {
			w, ok := y[k]
			switch {
			case !ok:
				out = append(out, fmt.Sprintf("%s %s: gone (was %s)", kind, k, v))
			case v != w:
				out = append(out, fmt.Sprintf("%s %s: %s, was %s", kind, k, w, v))
			}
		}
		for k, w := range y {
			if _, ok := x[k]; !ok {
				out = append(out, fmt.Sprintf("%s %s: new (%s)", kind, k, w))
			}
		}
	}
	cmp("file", a.Files, b.Files)
	cmp("package", a.Packages, b.Packages)
	sort.Strings(out)
	return strings.Join(out, "\n")
}
