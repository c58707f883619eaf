package pkgindex

import (
	"io"
	"os"
	"path"
	"path/filepath"
	"testing"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
	"github.com/gpuenv/gpuenv/providers/repository"
)

// BenchmarkReadFixture reads the Debian 12 fixture's lists (3,300
// stanzas, 200 of them relevant): cold, decompressing and scanning every
// list, and from the stanza cache.
func BenchmarkReadFixture(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("the cache is written only as root")
	}
	h, repos := fixture(b, "debian12-lists")
	if err := os.MkdirAll(filepath.Join(h.Root(), "var/cache"), 0o755); err != nil {
		b.Fatal(err)
	}
	benchRead(b, h, repos)
}

// BenchmarkReadLive reads this machine's lists, copied into a root of
// their own so that the cache is not written into the machine's: cold
// and cached as above, and the floor, which only decompresses them.
// Figures are in docs/planning.md's section on package indexes.
func BenchmarkReadLive(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("the cache is written only as root")
	}
	live := hosttest.New(b, "/")
	repos, _ := repository.Observe(live, "deb")
	root := b.TempDir()
	n := 0
	for _, dir := range []string{ListsDir, "/etc/apt/sources.list.d", PreferencesDir, AptConfDir} {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if e.Type().IsRegular() {
				copyFile(b, path.Join(dir, e.Name()), filepath.Join(root, dir, e.Name()))
				n++
			}
		}
	}
	for _, f := range []string{"/etc/apt/sources.list", PreferencesFile, AptConfFile} {
		if _, err := os.Stat(f); err == nil {
			copyFile(b, f, filepath.Join(root, f))
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "var/cache"), 0o755); err != nil {
		b.Fatal(err)
	}
	h := hosttest.New(b, root)
	if ix, _ := Read(h, Options{Family: "deb", Repositories: repos, NoCache: true}); len(ix.Indexes) == 0 {
		b.Skip("this machine has no package lists apt fetched")
	}
	benchRead(b, h, repos)
	b.Run("floor", func(b *testing.B) {
		ix, _ := Read(h, Options{Family: "deb", Repositories: repos, NoCache: true})
		hosttest.Benchmark(b, h, func(h *host.Host) {
			for _, x := range ix.Indexes {
				decompressOnly(b, h, x.Path)
			}
		})
	})
}

func benchRead(b *testing.B, h *host.Host, repos []facts.Repository) {
	opts := Options{Family: "deb", Repositories: repos, Arch: "x86_64"}
	for _, c := range []struct {
		name    string
		noCache bool
	}{{"cold", true}, {"cached", false}} {
		b.Run(c.name, func(b *testing.B) {
			opts.NoCache = c.noCache
			ix, _ := Read(h, opts) // writes the cache
			stanzas := 0
			for _, x := range ix.Indexes {
				stanzas += x.Stanzas
			}
			hosttest.Benchmark(b, h, func(h *host.Host) { Read(h, opts) })
			b.ReportMetric(float64(stanzas), "stanzas")
			b.ReportMetric(float64(len(ix.Packages)), "packages")
		})
	}
}

// decompressOnly reads the list at p through the scan's buffer without
// looking into it: what any reader of the list must spend.
func decompressOnly(b *testing.B, h *host.Host, p string) {
	f, err := h.Open(p)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	src, done, err := decompress(p, f)
	if err != nil {
		b.Fatal(err)
	}
	defer done()
	if err := scanSource(src, blankLine, func([]byte) error { return nil }); err != nil {
		b.Fatal(err)
	}
}

func copyFile(b *testing.B, from, to string) {
	b.Helper()
	in, err := os.Open(from)
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		b.Fatal(err)
	}
	out, err := os.Create(to)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		b.Fatal(err)
	}
	if err := out.Close(); err != nil {
		b.Fatal(err)
	}
}
