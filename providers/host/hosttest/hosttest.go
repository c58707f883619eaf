// Package hosttest builds fixture roots: whole machines laid out as files,
// for tests of observation, planning and apply.
//
// A fixture is a txtar archive (golang.org/x/tools/txtar format, as
// testscript reads it) whose files are paths inside the root. Git and txtar
// cannot hold everything a real machine has, so an optional ".manifest"
// file adds the rest, one directive a line ('#' starts a comment):
//
//	symlink PATH TARGET          a symlink, TARGET written as on the real machine
//	dir PATH                     an empty directory
//	mode PATH 0644               permission bits
//	mtime PATH 2024-03-01T10:00:00Z
//	owner PATH UID GID           applied when the test runs as root
//	chardev PATH MAJOR MINOR     a character device when the test runs as
//	                             root, else an empty regular file
//	include PATH FILE            the content of FILE (relative to the
//	                             repository's testdata/) appended to PATH,
//	                             for large real files shared by fixtures
//	bytes PATH HEX               a file holding exactly these bytes, for
//	                             binary files such as efivars, which txtar
//	                             cannot hold (it ends every file with a
//	                             newline)
//	ldcache PATH SONAME LIBRARY  an x86_64 entry added to the loader cache
//	                             at PATH (glibc's binary format, as ldconfig
//	                             writes /etc/ld.so.cache), made when absent
//
// Directives run in order after the files are written.
package hosttest

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/tools/txtar"

	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/ldcache"
)

// Manifest is the name of the archive member holding directives.
const Manifest = ".manifest"

// Build lays out the fixture NAME of the repository's testdata/roots in a
// temporary directory removed when the test ends, and returns its path. The
// fixture is NAME.txtar, or a directory NAME whose *.txtar files are laid
// out in name order into the same root (one per layer of the machine, so
// that each stays readable).
func Build(tb testing.TB, name string) string {
	tb.Helper()
	dir := tb.TempDir()
	if err := BuildNamed(TestdataDir(tb), name, dir); err != nil {
		tb.Fatal(err)
	}
	return dir
}

// BuildNamed lays out fixture name from testdata/roots into root.
func BuildNamed(testdata, name, root string) error {
	base := filepath.Join(testdata, "roots", name)
	if _, err := os.Stat(base + ".txtar"); err == nil {
		return BuildFile(base+".txtar", root)
	}
	parts, err := filepath.Glob(filepath.Join(base, "*.txtar"))
	if err != nil {
		return err
	}
	if len(parts) == 0 {
		return fmt.Errorf("no fixture %s.txtar or %s/*.txtar", base, base)
	}
	for _, p := range parts {
		ar, err := txtar.ParseFile(p)
		if err != nil {
			return err
		}
		if err := BuildArchive(ar, root, testdata); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
	}
	return nil
}

// TestdataDir is the repository's top-level testdata directory, found from
// the working directory of the test (each package's tests run in their own
// directory, at any depth).
func TestdataDir(tb testing.TB) string {
	tb.Helper()
	d, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, "testdata")
		}
		parent := filepath.Dir(d)
		if parent == d {
			tb.Fatal("hosttest: no go.mod above the test's directory")
		}
		d = parent
	}
}

// BuildFile lays out the fixture archive at path into root.
func BuildFile(path, root string) error {
	ar, err := txtar.ParseFile(path)
	if err != nil {
		return err
	}
	testdata := filepath.Dir(filepath.Dir(path))
	return BuildArchive(ar, root, testdata)
}

// BuildArchive lays out ar into root; include directives read files below
// testdata.
func BuildArchive(ar *txtar.Archive, root, testdata string) error {
	var manifest []byte
	for _, f := range ar.Files {
		if f.Name == Manifest {
			manifest = f.Data
			continue
		}
		p, err := inside(root, f.Name)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			return err
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(manifest))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if err := apply(root, testdata, strings.Fields(line)); err != nil {
			return fmt.Errorf("%s line %d: %q: %w", Manifest, n, line, err)
		}
	}
	return nil
}

func apply(root, testdata string, f []string) error {
	want := map[string]int{"symlink": 3, "dir": 2, "mode": 3, "mtime": 3, "owner": 4, "chardev": 4, "include": 3, "bytes": 3, "ldcache": 4}
	if n, ok := want[f[0]]; !ok {
		return fmt.Errorf("unknown directive %q", f[0])
	} else if len(f) != n {
		return fmt.Errorf("%s takes %d arguments", f[0], n-1)
	}
	p, err := inside(root, f[1])
	if err != nil {
		return err
	}
	if f[0] != "mode" && f[0] != "mtime" && f[0] != "owner" {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
	}
	switch f[0] {
	case "symlink":
		return os.Symlink(f[2], p)
	case "dir":
		return os.MkdirAll(p, 0o755)
	case "mode":
		m, err := strconv.ParseUint(f[2], 8, 32)
		if err != nil {
			return err
		}
		return os.Chmod(p, os.FileMode(m)&os.ModePerm|modeBits(m))
	case "mtime":
		t, err := time.Parse(time.RFC3339, f[2])
		if err != nil {
			return err
		}
		return os.Chtimes(p, t, t)
	case "owner":
		uid, err1 := strconv.Atoi(f[2])
		gid, err2 := strconv.Atoi(f[3])
		if err1 != nil || err2 != nil {
			return fmt.Errorf("owner needs numeric ids")
		}
		if os.Geteuid() != 0 {
			return nil
		}
		return os.Lchown(p, uid, gid)
	case "chardev":
		major, err1 := strconv.ParseUint(f[2], 10, 32)
		minor, err2 := strconv.ParseUint(f[3], 10, 32)
		if err1 != nil || err2 != nil {
			return fmt.Errorf("chardev needs numeric major and minor")
		}
		if os.Geteuid() == 0 {
			dev := int((major << 8) | (minor & 0xff) | ((minor &^ 0xff) << 12))
			if err := syscall.Mknod(p, syscall.S_IFCHR|0o666, dev); err == nil {
				return nil
			}
		}
		return os.WriteFile(p, nil, 0o666)
	case "ldcache":
		var entries []ldcache.Entry
		if data, err := os.ReadFile(p); err == nil {
			c, err := ldcache.Parse(data)
			if err != nil {
				return err
			}
			entries = c.Entries
		}
		entries = append(entries, ldcache.Entry{Soname: f[2], Path: f[3], Flags: ldcache.ArchX8664})
		return os.WriteFile(p, ldcache.Write(entries), 0o644)
	case "bytes":
		data, err := hex.DecodeString(f[2])
		if err != nil {
			return err
		}
		return os.WriteFile(p, data, 0o644)
	case "include":
		src, err := inside(testdata, f[2])
		if err != nil {
			return err
		}
		data, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		out, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		if _, err := out.Write(data); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	}
	return nil
}

// modeBits carries setuid/setgid/sticky from an octal mode.
func modeBits(m uint64) os.FileMode {
	var fm os.FileMode
	if m&0o4000 != 0 {
		fm |= os.ModeSetuid
	}
	if m&0o2000 != 0 {
		fm |= os.ModeSetgid
	}
	if m&0o1000 != 0 {
		fm |= os.ModeSticky
	}
	return fm
}

// inside joins rel to root, refusing a path that would leave it.
func inside(root, rel string) (string, error) {
	if slices.Contains(strings.Split(rel, "/"), "..") {
		return "", fmt.Errorf("path %q may leave the root", rel)
	}
	return filepath.Join(root, filepath.Clean("/"+rel)), nil
}

// Host lays out a fixture given as txtar text (include directives read the
// repository's testdata) in a temporary root and returns a Host for it.
func Host(tb testing.TB, archive string, opts ...host.Option) *host.Host {
	tb.Helper()
	dir := tb.TempDir()
	if err := BuildArchive(txtar.Parse([]byte(archive)), dir, TestdataDir(tb)); err != nil {
		tb.Fatal(err)
	}
	return New(tb, dir, opts...)
}

// Fixture lays out the fixture name as Build does and returns a Host for
// it.
func Fixture(tb testing.TB, name string, opts ...host.Option) *host.Host {
	tb.Helper()
	return New(tb, Build(tb, name), opts...)
}

// New returns a Host for root, failing the test when root cannot be one.
func New(tb testing.TB, root string, opts ...host.Option) *host.Host {
	tb.Helper()
	h, err := host.New(root, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return h
}

// WriteFile writes content at p inside root, with the directories it
// needs: a test's change to a fixture.
func WriteFile(tb testing.TB, root, p, content string) {
	tb.Helper()
	full := filepath.Join(root, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// CPUClock measures the process's CPU time over a benchmark loop, which
// on a shared, loaded machine says more than the wall clock's ns/op.
type CPUClock struct{ start time.Duration }

// CPUTime starts a CPUClock.
func CPUTime(b *testing.B) CPUClock { return CPUClock{rusage(b)} }

// Report adds the CPU time per iteration since CPUTime, as cpu-ns/op.
func (c CPUClock) Report(b *testing.B) {
	b.ReportMetric(float64((rusage(b)-c.start).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

func rusage(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
