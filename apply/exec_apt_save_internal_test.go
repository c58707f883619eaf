package apply

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
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
		if f := saved[r.name].path; path.Dir(f) != "/gen/packages/1-"+r.name {
			t.Errorf("%s saved as %q", r.name, f)
		}
	}
}

// Before undo installs a saved package file it checks it: against the
// digest recorded when it was saved, else the index's, else its
// structure (generations saved before digests were recorded). A file that
// fails is fetched again where the archive may have the version, the
// download checked against the index; otherwise the error names it.
func TestCheckSavedDebs(t *testing.T) {
	good := applytest.Deb{Name: "nvidia-smi", Version: "1.0"}
	goodSum := sha256.Sum256(good.Bytes())
	goodHex := hex.EncodeToString(goodSum[:])
	const saved = "/gen1/packages/1-nvidia-smi/nvidia-smi_1.0_amd64.deb"
	const list = "/var/lib/apt/lists/x_Packages"
	listing := func(sha string) *facts.PackageIndexes {
		return &facts.PackageIndexes{Manager: "apt", Indexes: []facts.PackageIndex{{Path: list}}, Packages: []facts.IndexedPackage{
			{Name: "nvidia-smi", Versions: []facts.IndexedVersion{{Version: "1.0", Architecture: "amd64", Origins: []string{list}, SHA256: sha}}},
		}}
	}
	// The archive moved on: only a newer version is listed.
	movedOn := &facts.PackageIndexes{Manager: "apt", Indexes: []facts.PackageIndex{{Path: list}}, Packages: []facts.IndexedPackage{
		{Name: "nvidia-smi", Versions: []facts.IndexedVersion{{Version: "2.0", Origins: []string{list}}}},
	}}
	garbage := []byte("garbage over the file\n")
	for _, tc := range []struct {
		name      string
		content   []byte // nil: the file is gone
		recorded  string // the digest recorded when saved
		ix        *facts.PackageIndexes
		archive   bool     // the archive gives nvidia-smi=1.0
		downloads int      // apt-get download runs
		refetched bool     // the file used is the one fetched again
		errs      []string // what the error says; none: no error
	}{
		{name: "intact", content: good.Bytes(), recorded: goodHex, ix: listing(goodHex), archive: true},
		{name: "corrupt, listed", content: garbage, recorded: goodHex, ix: listing(goodHex), archive: true, downloads: 1, refetched: true},
		{name: "corrupt, not indexed", content: garbage, recorded: goodHex, archive: true, downloads: 1, refetched: true},
		{name: "corrupt, the archive's copy differs from the index", content: garbage, recorded: goodHex, ix: listing(strings.Repeat("0", 64)), archive: true, downloads: 1,
			errs: []string{saved, "is corrupt", "recorded when it was saved as " + goodHex, "the archive's copy was refused", "SHA-256 " + goodHex}},
		{name: "corrupt, the archive moved on", content: garbage, recorded: goodHex, ix: movedOn, archive: true,
			errs: []string{saved, "is corrupt", "no package index lists nvidia-smi 1.0 any more", "install nvidia-smi 1.0 by hand"}},
		{name: "corrupt, the archive lacks it", content: garbage, recorded: goodHex, downloads: 1,
			errs: []string{saved, "is corrupt", "apt-get download nvidia-smi=1.0 gave no file"}},
		{name: "missing, listed: apt fetches it by name", recorded: goodHex, ix: listing(goodHex), archive: true},
		{name: "missing, the archive moved on", recorded: goodHex, ix: movedOn,
			errs: []string{saved, "is missing", "no package index lists nvidia-smi 1.0 any more"}},
		{name: "no digest recorded, the index's", content: good.Bytes(), ix: listing(goodHex), archive: true},
		{name: "no digest recorded, whole", content: good.Bytes(), archive: true},
		{name: "no digest recorded, not the index's but whole", content: applytest.Deb{Name: "nvidia-smi", Version: "1.0", Depends: "rebuilt"}.Bytes(), ix: listing(goodHex), archive: true, downloads: 1, refetched: true},
		{name: "no digest recorded, garbage", content: garbage, ix: listing(goodHex), downloads: 1,
			errs: []string{saved, "is not a whole package file: no ar archive header", "the package index's is " + goodHex}},
		{name: "a recorded digest that is not one", content: good.Bytes(), recorded: "\x1b]0;pwned\x07", errs: []string{saved, `"\x1b]0;pwned\a", is not one`, "apt-get download nvidia-smi=1.0 gave no file"}, downloads: 1},
		{name: "no digest recorded, no index, garbage", content: garbage, downloads: 1,
			errs: []string{saved, "is not a whole package file", "Put a whole package file of nvidia-smi 1.0 at that path"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			local := filepath.Join(root, saved)
			if err := os.MkdirAll(filepath.Dir(local), 0o700); err != nil {
				t.Fatal(err)
			}
			if tc.content != nil {
				if err := os.WriteFile(local, tc.content, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			d := &downloader{root: root, has: map[string]bool{"nvidia-smi=1.0": tc.archive}}
			h, err := host.New(root, host.WithRunner(d))
			if err != nil {
				t.Fatal(err)
			}
			ws := &Workspace{Dir: "/gen2", Path: filepath.Join(root, "gen2"), Log: &bytes.Buffer{}}
			x := aptManager{&HostExecutor{Host: h}}
			p := PriorPackage{Name: "nvidia-smi", Version: "1.0", Saved: saved, SHA256: tc.recorded}
			if tc.recorded != "" {
				p.Size = int64(len(good.Bytes()))
			}
			got, err := x.checkSavedDebs(context.Background(), ws, []PriorPackage{p}, tc.ix)
			if len(d.calls) != tc.downloads {
				t.Errorf("apt-get download ran %d times, want %d", len(d.calls), tc.downloads)
			}
			if len(tc.errs) > 0 {
				var sfe *SavedFileError
				if !errors.As(err, &sfe) {
					t.Fatalf("error %v, want a SavedFileError", err)
				}
				for _, w := range tc.errs {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("the error does not say %q:\n%v", w, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			use := got[0].Saved
			if tc.refetched != (use == "/gen2/packages/0-nvidia-smi/nvidia-smi_1.0_amd64.deb") || !tc.refetched && use != saved {
				t.Errorf("undo installs %s (refetched: %v)", use, tc.refetched)
			}
			if tc.content != nil || tc.refetched {
				data, err := os.ReadFile(filepath.Join(root, use))
				if err != nil {
					t.Fatal(err)
				}
				if sum := sha256.Sum256(data); got[0].SHA256 != hex.EncodeToString(sum[:]) {
					t.Errorf("the digest passed on is %s, the file's %x", got[0].SHA256, sum)
				}
			}
		})
	}
}
