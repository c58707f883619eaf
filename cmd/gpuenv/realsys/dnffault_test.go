//go:build realsystem

package realsys

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestDnfFaultMatrix is the fault matrix's RPM part: a power cut (SIGKILL
// of every process in the root) at phases of the real rpm transaction
// that gpuenv's dnf runs, in an RPM root (NewRPMRoot), the CUDA 12.4
// toolkit and its libraries going in, moving from 12.4.0 to 12.4.1, and
// back. Each cell ends, after `gpuenv force-unlock` and at most one
// `gpuenv rollback`, with the root as it was before (RPMSnapshot: the
// package set, version locks, files byte for byte, rpm -Va). It is a test
// of its own, beside TestFaultMatrix, so that it runs without the Debian
// matrix's journal counting; its cells run in the same slots.
func TestDnfFaultMatrix(t *testing.T) {
	m := &matrix{}
	start := time.Now()
	t.Run("cell", func(t *testing.T) {
		for _, k := range dnfKillCells {
			t.Run(k.name, func(t *testing.T) {
				t.Parallel()
				faultSlots <- struct{}{}
				defer func() { <-faultSlots }()
				c := &cell{t: t}
				begin := time.Now()
				defer func() {
					m.add(cellOutcome{name: k.name, ok: !t.Failed(), took: since(begin), detail: c.detail()})
				}()
				runDnf(k, c)
			})
		}
	})
	slices.SortFunc(m.cells, func(a, b cellOutcome) int { return strings.Compare(a.name, b.name) })
	passed := 0
	for _, c := range m.cells {
		if c.ok {
			passed++
		}
	}
	h.Report("dnf fault matrix: %d cells, %d pass, %d fail, in %s", len(m.cells), passed, len(m.cells)-passed, since(start))
	for _, c := range m.cells {
		result := "pass"
		if !c.ok {
			result = "FAIL"
		}
		h.Report("  %-48s %s %7s  %s", c.name, result, c.took, c.detail)
	}
}

// The kill cells of the RPM root, by rpm's order: an install puts
// cuda-libraries-12-4 in (%pre, files, %post) before the toolkit that
// requires it; an upgrade installs both new versions, then erases both
// old ones (%preun, files, %postun, then the database entry); a rollback
// of the upgrade installs the saved 12.4.0 files the same way. %pretrans
// of the first package runs once dnf has its packages and rpm has
// checked the transaction, before any package changes: between dnf's
// download and rpm's transaction.
var dnfKillCells = []killCell{
	{"kill/dnf-install-before-transaction", "apply-install", rpmLibraries + ".pretrans-1"},
	// The libraries are installed, the toolkit not yet.
	{"kill/dnf-install-pre", "apply-install", rpmToolkit + ".pre-1"},
	// The new libraries are in rpm's database beside the old ones.
	{"kill/dnf-upgrade-post", "apply-upgrade", rpmLibraries + ".post-2"},
	// The old libraries' files are gone, their database entry not yet.
	{"kill/dnf-upgrade-postun", "apply-upgrade", rpmLibraries + ".postun-1"},
	// The rollback reinstalls the saved 12.4.0 libraries: killed once
	// they are in beside 12.4.1.
	{"kill/dnf-rollback-of-upgrade-post", "rollback-upgrade", rpmLibraries + ".post-2"},
}

// newDnfFaultRoot is an RPM root with the CUDA 12.4 packages of both
// releases in a repository as NVIDIA's, dnf's cache filled for it.
func newDnfFaultRoot(t *testing.T) *faultRoot {
	t.Helper()
	r := &faultRoot{Root: h.NewRPMRoot(t)}
	r.BuildRPMRepository(rpmRepoDir, append(rpmCUDA(rpmCUDAOld), rpmCUDA(rpmCUDANew)...), "")
	r.UseRPMRepository(rpmRepoID, "file://"+rpmRepoDir)
	r.MustSh("mkdir -p " + faultMarkers)
	return r
}

// runDnf is a kill cell in an RPM root: as killCell.run, with the CUDA
// toolkit alone for spec (cudaSpec) and the root compared by
// RPMSnapshot.
func runDnf(k killCell, c *cell) {
	t := c.t
	r := newDnfFaultRoot(t)
	c.r = r
	what, target, _ := strings.Cut(k.when, "-")
	spec, ok := map[string]string{"install": cudaSpec(rpmCUDAOld), "upgrade": cudaSpec(rpmCUDANew)}[target]
	if !ok || what != "apply" && what != "rollback" {
		t.Fatalf("unknown kill cell %q", k.when)
	}
	if target == "upgrade" {
		r.mustApply(cudaSpec(rpmCUDAOld))
	}
	before := r.RPMSnapshot()
	argv, kind := []string{"apply", "--auto-approve", specDir}, faultedApply
	if what == "rollback" {
		r.mustApply(spec)
		argv, kind = []string{"rollback", "--auto-approve"}, faultedRollback
	} else {
		r.writeSpec(spec)
	}
	res, ok := c.killAt(what, k.phase, argv, before, kind)
	if !ok {
		return
	}
	c.step("left: %s", r.rpmStates(rpmToolkit, rpmLibraries))
	c.finish(before, kind, res)
}

// rpmStates is the named packages' installed instances as rpm lists
// them, one line.
func (r *Root) rpmStates(names ...string) string {
	pkgs := r.RPMs()
	var out []string
	for _, n := range names {
		v := strings.Join(pkgs[n], "+")
		if v == "" {
			v = "absent"
		}
		out = append(out, n+" "+v)
	}
	return strings.Join(out, ", ")
}

// rpmEvidence is what rpm, dnf and gpuenv's history say about the cell's
// packages, and the newest generations' logs and saved files, for a
// failure's report.
func (r *faultRoot) rpmEvidence() string {
	res := r.Sh(`rpm -qa | sort; echo '--- rpm -Va:'; rpm -Va 2>&1 || true
echo '--- dnf history:'; dnf -q --disablerepo='*' history 2>&1 | head -n 12
echo "--- saved package files"; find /var/lib/gpuenv/generations -path '*/packages/*' -type f -printf '%M %s %p\n' 2>&1 | sort -k3
for gen in $(ls /var/lib/gpuenv/generations 2>/dev/null | sort -n | tail -n 2); do
	echo "--- generation $gen: tail of its log"; tail -n 40 /var/lib/gpuenv/generations/$gen/log 2>&1
done`)
	hist := r.Gpuenv("history")
	return fmt.Sprint(res.Stdout, res.Stderr, "--- gpuenv history:\n", hist.Stdout, hist.Stderr)
}
