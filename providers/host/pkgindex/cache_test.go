package pkgindex

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuenv/gpuenv/planner/facts"
)

// cacheRoot is the Debian fixture with /var/cache, where gpuenv may make
// its cache directory, and a func that reads its indexes with the cache,
// ignoring warnings (an untrusted cache directory is one).
func cacheRoot(t *testing.T) (string, func() facts.PackageIndexes) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the cache is written and trusted only as root")
	}
	h, repos := fixture(t, "debian12-lists")
	if err := os.MkdirAll(filepath.Join(h.Root(), "var/cache"), 0o755); err != nil {
		t.Fatal(err)
	}
	return h.Root(), func() facts.PackageIndexes {
		ix, _ := Read(h, Options{Family: "deb", Repositories: repos})
		return ix
	}
}

const (
	nonFree = "/var/lib/apt/lists/deb.debian.org_debian_dists_bookworm_non-free_binary-amd64_Packages.lz4"
	// updates is a plain list of no relevant package.
	updates = "/var/lib/apt/lists/deb.debian.org_debian_dists_bookworm-updates_main_binary-amd64_Packages"
)

// rewriteKeepingIdentity replaces the bytes of the bookworm-updates list
// with content, of the same size, and puts its modification time back:
// rewritten in place, it keeps its inode too, and only its bytes tell
// it apart.
func rewriteKeepingIdentity(t *testing.T, root string, content []byte) {
	t.Helper()
	p := filepath.Join(root, updates)
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(content)) > fi.Size() {
		t.Fatalf("replacement of %d bytes for %d", len(content), fi.Size())
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(append(content, bytes.Repeat([]byte("\n"), int(fi.Size())-len(content))...)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
}

// hasVersion reports whether the indexes list nvidia-driver at version.
func hasVersion(ix facts.PackageIndexes, version string) bool {
	for _, p := range ix.Packages {
		for _, v := range p.Versions {
			if p.Name == "nvidia-driver" && v.Version == version {
				return true
			}
		}
	}
	return false
}

// hasDriver reports whether the indexes list nvidia-driver 535.261.03-1,
// which only the bookworm non-free list does.
func hasDriver(ix facts.PackageIndexes) bool { return hasVersion(ix, "535.261.03-1") }

const otherList = "Package: nvidia-driver\nVersion: 1.0-1\nArchitecture: amd64\n\n"

// hasOther reports whether the indexes hold otherList's package.
func hasOther(ix facts.PackageIndexes) bool { return hasVersion(ix, "1.0-1") }

func TestCacheIsUsedForTheSameList(t *testing.T) {
	root, read := cacheRoot(t)
	first := read()
	cache := filepath.Join(root, cachePath(updates))
	fi, err := os.Stat(cache)
	if err != nil {
		t.Fatalf("no cache written: %v", err)
	}
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("cache file mode %v", fi.Mode())
	}
	if di, _ := os.Stat(filepath.Dir(cache)); di.Mode().Perm() != 0o755 {
		t.Errorf("cache directory mode %v", di.Mode())
	}
	// Same identity, other bytes: the cache answers, which shows it is
	// what a second read uses.
	rewriteKeepingIdentity(t, root, []byte(otherList))
	if second := read(); hasOther(second) || second.Indexes[3].Stanzas != first.Indexes[3].Stanzas {
		t.Fatal("a list whose identity did not change is read from the cache")
	}
	// A new modification time is a new list.
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(root, updates), later, later); err != nil {
		t.Fatal(err)
	}
	if !hasOther(read()) {
		t.Error("a changed list must be read again")
	}
}

func TestCacheCorruptIsIgnoredAndRewritten(t *testing.T) {
	root, read := cacheRoot(t)
	read()
	cache := filepath.Join(root, cachePath(nonFree))
	data, err := os.ReadFile(cache)
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Replace(data, []byte("Package: nvidia-driver\n"), []byte("Package: nvidia-drivex\n"), 1)
	if bytes.Equal(bad, data) {
		t.Fatal("the cache does not hold nvidia-driver")
	}
	if err := os.WriteFile(cache, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	ix := read()
	if !hasDriver(ix) {
		t.Error("a corrupt cache entry was used")
	}
	if now, _ := os.ReadFile(cache); !bytes.Equal(now, data) {
		t.Error("the corrupt entry was not rewritten")
	}
	// Cut short: ignored too.
	if err := os.WriteFile(cache, data[:len(data)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	if !hasDriver(read()) {
		t.Error("a truncated cache entry was used")
	}
}

func TestCacheNotTrusted(t *testing.T) {
	tests := []struct {
		name  string
		spoil func(t *testing.T, dir, file string)
	}{
		{"a group-writable directory", func(t *testing.T, dir, _ string) { chmod(t, dir, 0o775) }},
		{"a file others may write", func(t *testing.T, _, file string) { chmod(t, file, 0o646) }},
		{"a file of another user", func(t *testing.T, _, file string) {
			if err := os.Chown(file, 1000, 1000); err != nil {
				t.Fatal(err)
			}
		}},
		{"a directory of another user", func(t *testing.T, dir, _ string) {
			if err := os.Chown(dir, 1000, 1000); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root, read := cacheRoot(t)
			read()
			cache := filepath.Join(root, cachePath(updates))
			tt.spoil(t, filepath.Dir(cache), cache)
			// What the cache says no longer matches the list: a cache
			// that were used would hide the change.
			rewriteKeepingIdentity(t, root, []byte(otherList))
			if !hasOther(read()) {
				t.Error("an untrusted cache was used")
			}
		})
	}
}

func chmod(t *testing.T, p string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// TestCacheWrittenOnlyByRoot: a plan run by another user reads the lists
// and writes nothing.
func TestCacheWrittenOnlyByRoot(t *testing.T) {
	root, read := cacheRoot(t)
	defer func(old func() int) { geteuid = old }(geteuid)
	geteuid = func() int { return 1000 }
	if !hasDriver(read()) {
		t.Fatal("no packages read")
	}
	if _, err := os.Stat(filepath.Join(root, CacheDir)); !os.IsNotExist(err) {
		t.Errorf("another user made the cache: %v", err)
	}
}

func TestParseCache(t *testing.T) {
	id := facts.FileIdentity{Size: 10, MTime: 20, Inode: 30}
	key := cacheKey("/l", id)
	if !strings.Contains(key, "Inode: 30") || !strings.HasPrefix(key, cacheFormat) {
		t.Fatalf("key %q", key)
	}
	good := []byte(key + "Stanzas: 3\nSHA256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n\n")
	if s, ok := parseCache(good, key); !ok || s.total != 3 || len(s.stanzas) != 0 {
		t.Errorf("an empty cache entry: %+v %v", s, ok)
	}
	if _, ok := parseCache(good, cacheKey("/l", facts.FileIdentity{Size: 10, MTime: 20, Inode: 31})); ok {
		t.Error("an entry for another inode was taken")
	}
}
