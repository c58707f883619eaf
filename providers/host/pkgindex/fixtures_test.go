package pkgindex

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
	"github.com/gpuenv/gpuenv/providers/repository"
)

// fixture builds the fixture root name, with the layers of testdata/apt
// over it, and returns a host of it and its configured sources, as
// providers/repository observes them.
func fixture(tb testing.TB, name string, layers ...string) (*host.Host, []facts.Repository) {
	tb.Helper()
	root := hosttest.Build(tb, name)
	for _, l := range layers {
		if err := hosttest.BuildFile(filepath.Join(hosttest.TestdataDir(tb), "apt", l+".txtar"), root); err != nil {
			tb.Fatal(err)
		}
	}
	h := hosttest.New(tb, root)
	family := "deb"
	if _, err := os.Stat(filepath.Join(root, "etc", "yum.repos.d")); err == nil {
		family = "rpm"
	}
	repos, warns := repository.Observe(h, family)
	if len(warns) > 0 {
		tb.Fatalf("observing the sources: %v", warns)
	}
	return h, repos
}

// read reads the indexes of h, without the cache unless cache is set, and
// fails the test on a warning.
func read(tb testing.TB, h *host.Host, repos []facts.Repository, opts Options) facts.PackageIndexes {
	tb.Helper()
	if opts.Family == "" {
		opts.Family = "deb"
	}
	opts.Repositories = repos
	ix, warns := Read(h, opts)
	if len(warns) > 0 {
		tb.Fatalf("warnings: %v", warns)
	}
	return ix
}

// pkg returns the package name of ix, failing the test when it is not there.
func pkg(tb testing.TB, ix facts.PackageIndexes, name string) facts.IndexedPackage {
	tb.Helper()
	for _, p := range ix.Packages {
		if p.Name == name {
			return p
		}
	}
	tb.Fatalf("no package %s among %d", name, len(ix.Packages))
	return facts.IndexedPackage{}
}
