package apply_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/apply"
	"github.com/gpuenv/gpuenv/apply/applytest"
	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
)

// callsOf starts recording the fakes' calls and returns what reads them
// back: each call's argv, the command first.
func callsOf(t *testing.T, fx *fixture) func() [][]string {
	log := filepath.Join(t.TempDir(), "calls")
	fx.runner.Env = append(fx.runner.Env, applytest.EnvCalls+"="+log)
	return func() [][]string {
		data, _ := os.ReadFile(log)
		var out [][]string
		for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			if f := strings.Fields(l); len(f) > 0 {
				out = append(out, f)
			}
		}
		return out
	}
}

// count counts the calls of command whose arguments include sub.
func count(calls [][]string, command, sub string) int {
	n := 0
	for _, c := range calls {
		if c[0] == command && slices.Contains(c[1:], sub) {
			n++
		}
	}
	return n
}

// indexed is an executor that reads the fake archive as the root's
// package indexes, as gpuenv's own apply reads a root's lists.
func (fx *fixture) indexed() *apply.HostExecutor {
	return &apply.HostExecutor{Host: fx.h, Indexes: applytest.IndexesOf(fx.Archive)}
}

// appliesIndexed applies p with the indexes to answer from; it must end
// applied.
func (fx *fixture) appliesIndexed(p *plan.Plan) *apply.Result {
	fx.t.Helper()
	res := fx.apply(p, fx.opts(fx.indexed()))
	if res.Status != apply.StatusApplied {
		fx.t.Fatalf("status %s, failed %+v\n%s", res.Status, res.Failed, fx.out.String())
	}
	return res
}

// With the package indexes to answer from, the standard plan's apt
// transaction asks apt nothing (no apt-cache), fetches the old package
// files it saves with one apt-get download of what the archive still has,
// and rebuilds only what it has lost; rollback restores the host.
func TestApplyQueriesTheIndexesOnce(t *testing.T) {
	for _, tc := range []struct {
		name     string
		restored bool // the archive has libnvidia-ml1's old version again
		rebuilt  int
	}{
		{name: "one version lost", rebuilt: 1},
		{name: "both in the archive", restored: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := newFixture(t)
			if tc.restored {
				if err := applytest.WriteArchive(fx.Archive, applytest.DriverDebs(applytest.DriverOld)[0]); err != nil {
					t.Fatal(err)
				}
			}
			before := fx.snapshot()
			calls := callsOf(t, fx)
			fx.appliesIndexed(applytest.StandardPlan(fx.Index))
			got := calls()
			for _, c := range got {
				if c[0] == "apt-cache" {
					t.Errorf("apply asked apt-cache: %q", c)
				}
			}
			if n := count(got, "apt-get", "download"); n != 1 {
				t.Errorf("%d apt-get download calls, want 1", n)
			}
			if n := count(got, "dpkg-deb", "--build"); n != tc.rebuilt {
				t.Errorf("%d dpkg-deb --build calls, want %d", n, tc.rebuilt)
			}
			gen := filepath.Join(fx.Root, stateDir, "generations", "1", "packages")
			old := applytest.DriverDebs(applytest.DriverOld)
			saved, err := os.ReadFile(filepath.Join(gen, "1-nvidia-smi", old[1].FileName()))
			if err != nil || !bytes.Equal(saved, old[1].Bytes()) {
				t.Errorf("nvidia-smi %s saved %d bytes (%v), want the archive's file", applytest.DriverOld, len(saved), err)
			}
			// Rebuilt or downloaded, it is the package as installed.
			saved, err = os.ReadFile(filepath.Join(gen, "1-libnvidia-ml1", old[0].FileName()))
			if err != nil || !bytes.Equal(saved, old[0].Bytes()) {
				t.Errorf("libnvidia-ml1 %s saved %d bytes (%v), want the installed package", applytest.DriverOld, len(saved), err)
			}
			if _, err := os.Stat(filepath.Join(gen, "1-download")); err == nil {
				t.Error("the download directory is left in the generation")
			}
			fx.rollsBack(before, "after rolling back an apply that asked the indexes")
		})
	}
}

// A package file apt left in its cache is saved from there when its
// SHA-256 is the index's, with no download; a damaged one of the same
// size is not, and the archive's is downloaded instead. Either way the
// saved file restores the host.
func TestApplySavesFromThePackageCache(t *testing.T) {
	smi := applytest.ArchiveDebs()[0]
	for _, tc := range []struct {
		name      string
		cached    []byte
		downloads int
	}{
		{"checksum matches", smi.Bytes(), 0},
		{"damaged copy", bytes.Repeat([]byte("x"), len(smi.Bytes())), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := newFixture(t)
			cache := filepath.Join(fx.Root, "var/cache/apt/archives")
			if err := os.MkdirAll(cache, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(cache, smi.FileName()), tc.cached, 0o644); err != nil {
				t.Fatal(err)
			}
			before := fx.snapshot()
			calls := callsOf(t, fx)
			fx.appliesIndexed(applytest.StandardPlan(fx.Index))
			if n := count(calls(), "apt-get", "download"); n != tc.downloads {
				t.Errorf("%d apt-get download calls, want %d", n, tc.downloads)
			}
			saved, err := os.ReadFile(filepath.Join(fx.Root, stateDir, "generations", "1", "packages", "1-nvidia-smi", smi.FileName()))
			if err != nil || !bytes.Equal(saved, smi.Bytes()) {
				t.Errorf("saved nvidia-smi: %d bytes (%v), want the archive's file", len(saved), err)
			}
			// Rolled back offline: the saved file, not the archive.
			if err := os.RemoveAll(fx.Archive); err != nil {
				t.Fatal(err)
			}
			fx.rollsBack(before, "after rolling back from the saved file")
		})
	}
}

// A plan made before the indexes were fetched leaves the versions to
// apply: the refresh runs first (apt-get update, journaled, with an
// inverse that restores nothing), then the pins get the newest version
// the indexes list that satisfies their constraint, without asking apt,
// and the journal records it. A constraint the indexes cannot meet stops
// the apply before anything is installed.
func TestApplyPinsAfterTheRefresh(t *testing.T) {
	for _, tc := range []struct {
		constraint, want, err string
	}{
		{constraint: "12.4", want: "12.4.1-1"},
		{constraint: "12.6", err: `apt lists no version of cuda-toolkit-12-4 that satisfies "12.6", even with the plan's repositories configured and its indexes fetched (the package indexes list 12.4.1-1)`},
	} {
		t.Run(tc.constraint, func(t *testing.T) {
			fx := newFixture(t)
			before := fx.snapshot()
			calls := callsOf(t, fx)
			p := &plan.Plan{FormatVersion: plan.FormatVersion, Steps: []plan.Step{
				{Address: "index.apt", Action: plan.Update, Reason: "no index on disk", ReasonCode: plan.ReasonDependency,
					Operations: []plan.Operation{{Kind: plan.OpRefresh, Refresh: &plan.RefreshOp{Manager: "apt"}}}},
				{Address: "cuda", Action: plan.Create, Reason: "CUDA 12.4 is not installed", DependsOn: []string{"index.apt"},
					After: map[string]string{"version": plan.KnownAfterApply, "package": "cuda-toolkit-12-4"},
					Operations: []plan.Operation{{Kind: plan.OpPackages, Packages: &plan.PackagesOp{
						Manager: "apt", Install: []plan.PackagePin{{Name: "cuda-toolkit-12-4", Constraint: tc.constraint}},
					}}}},
			}}
			p.Transactions = planner.Batch(p.Steps)
			res := fx.apply(p, fx.opts(fx.indexed()))
			got := calls()
			if n := count(got, "apt-get", "update"); n != 1 {
				t.Errorf("%d apt-get update calls, want 1", n)
			}
			for _, c := range got {
				if c[0] == "apt-cache" {
					t.Errorf("apply asked apt-cache: %q", c)
				}
			}
			if tc.err != "" {
				if res.Status != apply.StatusReverted || res.Failed == nil || !strings.Contains(res.Failed.Error, tc.err) {
					t.Fatalf("status %s, failed %+v; want a failure saying %q:\n%s", res.Status, res.Failed, tc.err, fx.out.String())
				}
				fx.same(before, "after the refused pin")
				return
			}
			if res.Status != apply.StatusApplied {
				t.Fatalf("status %s, failed %+v:\n%s", res.Status, res.Failed, fx.out.String())
			}
			if got := fx.read("/var/lib/dpkg/status"); !strings.Contains(got, "Package: cuda-toolkit-12-4\nStatus: install ok installed\nVersion: "+tc.want) {
				t.Errorf("cuda-toolkit-12-4 not installed at %s:\n%s", tc.want, got)
			}
			journal := fx.read("/var/lib/gpuenv/generations/1/journal")
			if !strings.Contains(journal, `"version":"`+tc.want+`"`) || !strings.Contains(journal, `"refresh":{"manager":"apt"}`) {
				t.Errorf("the journal records neither the refresh nor the pinned version %s:\n%s", tc.want, journal)
			}
			fx.rollsBack(before, "after rollback")
		})
	}
}

// A version left to apply is the one apt would install among those that
// satisfy the constraint: a newer one at a lower priority (a backport's
// 100) is passed over for the default 500.
func TestApplyPinsWhatAptPrefers(t *testing.T) {
	fx := newFixture(t)
	if err := applytest.WriteArchive(fx.Archive, applytest.Deb{Name: "cuda-toolkit-12-4", Version: "12.4.0-1", Depends: "cuda-cudart-12-4",
		Files: map[string]string{"/usr/local/cuda-12.4/version.json": `{"cuda": {"name": "CUDA SDK", "version": "12.4.0"}}` + "\n"}}); err != nil {
		t.Fatal(err)
	}
	read := applytest.IndexesOf(fx.Archive)
	x := &apply.HostExecutor{Host: fx.h, Indexes: func(ctx context.Context) (*facts.PackageIndexes, error) {
		ix, err := read(ctx)
		if err != nil {
			return nil, err
		}
		for i := range ix.Packages {
			for j := range ix.Packages[i].Versions {
				if v := &ix.Packages[i].Versions[j]; v.Version == "12.4.1-1" {
					v.Priority = 100
				}
			}
		}
		return ix, nil
	}}
	p := &plan.Plan{FormatVersion: plan.FormatVersion, Steps: []plan.Step{{
		Address: "cuda", Action: plan.Create, Reason: "CUDA 12.4 is not installed", After: map[string]string{"version": plan.KnownAfterApply, "package": "cuda-toolkit-12-4"},
		Operations: []plan.Operation{{Kind: plan.OpPackages, Packages: &plan.PackagesOp{
			Manager: "apt", Install: []plan.PackagePin{{Name: "cuda-toolkit-12-4", Constraint: "12.4"}},
		}}},
	}}}
	p.Transactions = planner.Batch(p.Steps)
	if res := fx.apply(p, fx.opts(x)); res.Status != apply.StatusApplied {
		t.Fatalf("status %s, failed %+v\n%s", res.Status, res.Failed, fx.out.String())
	}
	if got := fx.read("/var/lib/dpkg/status"); !strings.Contains(got, "Package: cuda-toolkit-12-4\nStatus: install ok installed\nVersion: 12.4.0-1") {
		t.Errorf("cuda-toolkit-12-4 not at 12.4.0-1, the version of the higher priority:\n%s", got)
	}
}

// The packages a pin depends on at one exact version are pinned too, from
// the indexes: nvidia-smi alone brings libnvidia-ml1 at its own version.
func TestApplyPinsExactDependenciesFromTheIndexes(t *testing.T) {
	fx := newFixture(t)
	calls := callsOf(t, fx)
	p := &plan.Plan{FormatVersion: plan.FormatVersion, Steps: []plan.Step{{
		Address: "driver", Action: plan.Update, Reason: "driver 535.261.03 is older", After: map[string]string{"version": applytest.DriverNew, "packages": "nvidia-smi"},
		Operations: []plan.Operation{{Kind: plan.OpPackages, Packages: &plan.PackagesOp{
			Manager: "apt", Unhold: []string{"libnvidia-ml1"}, Install: []plan.PackagePin{{Name: "nvidia-smi", Version: applytest.DriverNew}},
		}}},
	}}}
	p.Transactions = planner.Batch(p.Steps)
	fx.appliesIndexed(p)
	if !strings.Contains(fx.out.String(), "pinning libnvidia-ml1="+applytest.DriverNew+", which nvidia-smi "+applytest.DriverNew+" depends on exactly") {
		t.Errorf("libnvidia-ml1 was not pinned:\n%s", fx.out.String())
	}
	if got := fx.read("/var/lib/dpkg/status"); !strings.Contains(got, "Package: libnvidia-ml1\nStatus: install ok installed\nVersion: "+applytest.DriverNew) {
		t.Errorf("libnvidia-ml1 not at %s:\n%s", applytest.DriverNew, got)
	}
	if n := count(calls(), "apt-cache", "show"); n != 0 {
		t.Errorf("%d apt-cache show calls, want none", n)
	}
}

// Rollback with the indexes to answer from installs a saved package file
// that the index still describes by name, from the package cache where it
// puts the file, as apt installs any cached package; the one no index
// lists any more goes back from its path. The host is as before.
func TestRollbackInstallsSavedFilesByName(t *testing.T) {
	fx := newFixture(t)
	if err := os.MkdirAll(filepath.Join(fx.Root, "var/cache/apt/archives"), 0o755); err != nil {
		t.Fatal(err)
	}
	before := fx.snapshot()
	fx.appliesIndexed(upgradePlan(applytest.DriverNew, "libnvidia-ml1", "nvidia-smi"))
	calls := callsOf(t, fx)
	res, err := apply.Rollback(context.Background(), fx.h, apply.RollbackOptions{StateDir: stateDir, To: -1, Hook: &fx.out, Executor: fx.indexed()})
	if err != nil || res.Status != apply.StatusDone {
		t.Fatalf("rollback: %v %+v\n%s", err, res, fx.out.String())
	}
	fx.same(before, "after a rollback by name")
	var install []string
	for _, c := range calls() {
		if c[0] == "apt-get" && slices.Contains(c, "install") {
			install = c
		}
	}
	smi := applytest.DriverDebs(applytest.DriverOld)[1]
	if !slices.Contains(install, "nvidia-smi="+applytest.DriverOld) || !slices.ContainsFunc(install, func(a string) bool { return strings.HasSuffix(a, "/libnvidia-ml1_"+applytest.DriverOld+"_amd64.deb") }) {
		t.Errorf("rollback ran %q: want nvidia-smi by name, libnvidia-ml1 (which no index lists) by its saved file", install)
	}
	// The fake apt-get fetches what it installs by name and removes it
	// after, where apt would take the cached file: the log says it was
	// put there.
	if log := fx.read("/var/lib/gpuenv/generations/2/log"); !strings.Contains(log, "nvidia-smi "+applytest.DriverOld+" goes back from /var/lib/gpuenv/generations/1/packages/1-nvidia-smi/"+smi.FileName()+", put in the package cache") {
		t.Errorf("the rollback's log does not say nvidia-smi's saved file went into the package cache:\n%s", log)
	}
}
