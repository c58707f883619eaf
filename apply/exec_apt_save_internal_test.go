package apply

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/apply/applytest"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
)

// downloader answers apt-get download inside root as apt does: every
// version it has, or nothing when it lacks one; it records each call's
// packages.
type downloader struct {
	root  string
	has   map[string]bool // name=version
	calls [][]string
}

func (d *downloader) Run(_ context.Context, c host.Command) error {
	i := slices.Index(c.Argv, "download")
	dir := slices.Index(c.Argv, "-C")
	if i < 0 || dir < 0 {
		return fmt.Errorf("unexpected command %q", c.Argv)
	}
	pkgs := c.Argv[i+2:]
	d.calls = append(d.calls, pkgs)
	for _, p := range pkgs {
		if !d.has[p] {
			return fmt.Errorf("E: Version not found: %s", p)
		}
	}
	for _, p := range pkgs {
		name, ver, _ := strings.Cut(p, "=")
		deb := applytest.Deb{Name: name, Version: ver}
		if err := os.WriteFile(filepath.Join(d.root, c.Argv[dir+1], deb.FileName()), deb.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// The versions an index lists are fetched with one apt-get download; a
// package the indexes do not keep (not GPU-relevant), of which they cannot
// say whether the archive still has it, on its own, so that it cannot
// spoil the others' download.
func TestSaveDebsBatchesWhatTheIndexesList(t *testing.T) {
	root := t.TempDir()
	d := &downloader{root: root, has: map[string]bool{"nvidia-smi=1.0": true, "libcuda1=1.0": true, "pciutils=1:3.9.0-4": true}}
	h, err := host.New(root, host.WithRunner(d))
	if err != nil {
		t.Fatal(err)
	}
	ws := &Workspace{Dir: "/gen", Path: filepath.Join(root, "gen"), Log: &bytes.Buffer{}}
	const list = "/var/lib/apt/lists/x_Packages"
	ix := &facts.PackageIndexes{Manager: "apt", Indexes: []facts.PackageIndex{{Path: list}}, Packages: []facts.IndexedPackage{
		{Name: "libcuda1", Versions: []facts.IndexedVersion{{Version: "1.0", Origins: []string{list}}}},
		{Name: "nvidia-smi", Versions: []facts.IndexedVersion{{Version: "1.0", Origins: []string{list}}}},
	}}
	x := aptManager{&HostExecutor{Host: h}}
	refs := []debRef{{"libcuda1", "1.0"}, {"nvidia-smi", "1.0"}, {"pciutils", "1:3.9.0-4"}}
	saved, err := x.saveDebs(context.Background(), ws, 1, refs, ix)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"libcuda1=1.0", "nvidia-smi=1.0"}, {"pciutils=1:3.9.0-4"}}
	if !slices.EqualFunc(d.calls, want, slices.Equal) {
		t.Errorf("downloads %q, want %q", d.calls, want)
	}
	for _, r := range refs {
		if f := saved[r.name]; path.Dir(f) != "/gen/packages/1-"+r.name {
			t.Errorf("%s saved as %q", r.name, f)
		}
	}
}
