//go:build realsystem

package realsys

import (
	"fmt"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The fault matrix (design "Testing tiers", 5; issue 11): with real apt
// and dpkg, a power cut (SIGKILL of every process in the root) at each of
// dpkg's phases of an install, an upgrade and their rollbacks, a full disk
// at each journal write of an apply and of a rollback, the network gone
// during a download and during a rollback, and a rollback that needs a
// package no archive has. Every cell ends, after at most one `gpuenv
// rollback` (with `gpuenv force-unlock` first where the holder died), with
// the host as it was before (Snapshot) and `dpkg --audit` silent.
//
// Cells run two at a time (they share nothing; the CI machine has two
// cores; GPUENV_REALSYS_FAULT_PARALLEL changes it), and the matrix is
// printed at the end of the run.
func TestFaultMatrix(t *testing.T) {
	if n, err := strconv.Atoi(os.Getenv("GPUENV_REALSYS_FAULT_PARALLEL")); err == nil && n > 0 {
		faultSlots = make(chan struct{}, n)
	}
	m := &matrix{}
	start := time.Now()
	applyEnds, rollbackEnds := countJournalPoints(t, upgradeSpec())
	h.Report("fault matrix: an uninterrupted apply of the upgrade writes %d journal records, its rollback %d", len(applyEnds), len(rollbackEnds))
	largeApply, largeRollback := countJournalPoints(t, largeUpgradeSpec())

	type entry struct {
		name string
		run  func(c *cell)
	}
	var cells []entry
	for _, k := range killCells {
		cells = append(cells, entry{"kill/" + k.name, k.run})
	}
	for _, k := range reloadCells {
		cells = append(cells, entry{"reload/" + k.name, k.run})
	}
	for n := 0; n <= len(applyEnds); n++ {
		cells = append(cells, entry{fmt.Sprintf("diskfull/apply-at-%d", n), func(c *cell) { diskFullCell(c, faultedApply, n, upgradeSpec(), false) }})
	}
	for n := 0; n <= len(rollbackEnds); n++ {
		cells = append(cells, entry{fmt.Sprintf("diskfull/rollback-at-%d", n), func(c *cell) { diskFullCell(c, faultedRollback, n, upgradeSpec(), false) }})
	}
	// The records above all fit in the journal's first page; these two
	// tear one, with a spec whose journals pass a page boundary.
	for _, torn := range []struct {
		kind faultedBy
		name string
		ends []int
	}{{faultedApply, "apply", largeApply}, {faultedRollback, "rollback", largeRollback}} {
		n, ok := tornPoint(torn.ends)
		if !ok {
			t.Errorf("no record of the large spec's %s journal straddles a page boundary: %v", torn.name, torn.ends)
			continue
		}
		cells = append(cells, entry{fmt.Sprintf("diskfull/%s-torn-record-%d", torn.name, n+1), func(c *cell) { diskFullCell(c, torn.kind, n, largeUpgradeSpec(), true) }})
	}
	cells = append(cells,
		entry{"network/cut-during-download", networkDownloadCell},
		entry{"network/offline-rollback", networkRollbackCell},
		entry{"rebuild/old-version-in-no-archive", rebuildCell},
		entry{"kill/debian-driver-upgrade-unpack-libcuda1", driverKillCell},
	)
	t.Run("cell", func(t *testing.T) {
		for _, e := range cells {
			t.Run(e.name, func(t *testing.T) {
				t.Parallel()
				faultSlots <- struct{}{}
				defer func() { <-faultSlots }()
				c := &cell{t: t}
				begin := time.Now()
				defer func() {
					m.add(cellOutcome{name: e.name, ok: !t.Failed(), took: since(begin), detail: c.detail()})
				}()
				e.run(c)
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
	h.Report("fault matrix: %d cells, %d pass, %d fail, in %s", len(m.cells), passed, len(m.cells)-passed, since(start))
	for _, c := range m.cells {
		result := "pass"
		if !c.ok {
			result = "FAIL"
		}
		h.Report("  %-48s %s %7s  %s", c.name, result, c.took, c.detail)
	}
}

// countJournalPoints runs the disk-full cells' apply of upgrade (from the
// install) and its rollback once, uninterrupted, and gives the journal's
// size after each record of each: the points the cells fill the disk at
// are 0 (the journal just opened) to the number of records.
func countJournalPoints(t *testing.T, upgrade string) (apply, rollback []int) {
	t.Helper()
	r := newFaultRoot(t, faultRootOptions{StateTmpfs: true})
	r.mustApply(installSpec())
	r.mustApply(upgrade)
	_, _, apply, _ = r.journalLines()
	t.Logf("the apply's journal: %d records, the file's size after each: %v", len(apply), apply)
	if res := r.Gpuenv("rollback", "--auto-approve"); res.Code != 0 {
		t.Fatalf("counting journal points: rollback: %s", res)
	}
	_, _, rollback, _ = r.journalLines()
	t.Logf("the rollback's journal: %d records, the file's size after each: %v", len(rollback), rollback)
	return apply, rollback
}

// faultSlots bounds how many cells run at once, whatever go test's
// -parallel: each holds a root of about 600 MB in memory and keeps a core
// busy. GPUENV_REALSYS_FAULT_PARALLEL changes it.
var faultSlots = make(chan struct{}, 2)

// A killCell kills every process in the root while a maintainer script of
// one of the transaction's packages runs: stopped at phase by faultHook.
type killCell struct {
	name  string
	when  string // apply-install, apply-upgrade, rollback-upgrade, rollback-install
	phase string // the marker: PACKAGE.SCRIPT-ARG
}

// The kill cells. dpkg's order in these transactions (as apt runs them):
// install unpacks libraries then toolkit, configures them in that order,
// and runs config-common's trigger between them; an upgrade unpacks
// toolkit then libraries; a purge removes toolkit then libraries, then
// purges them in that order.
var killCells = []killCell{
	// The toolkit's preinst: the libraries are unpacked already.
	{"install/unpack", "apply-install", toolkitPkg + ".preinst-install"},
	// The libraries' postinst: the toolkit is unpacked, not configured.
	{"install/configure", "apply-install", librariesPkg + ".postinst-configure"},
	{"install/trigger", "apply-install", configPkg + ".postinst-triggered"},
	// The libraries' preinst: the toolkit is at its new version, unpacked.
	{"upgrade/unpack", "apply-upgrade", librariesPkg + ".preinst-upgrade"},
	{"upgrade/configure", "apply-upgrade", librariesPkg + ".postinst-configure"},
	{"upgrade/trigger", "apply-upgrade", configPkg + ".postinst-triggered"},
	// The rollback of the upgrade installs the saved 12.4.0 packages:
	// their scripts run "upgrade" (a downgrade) and "configure".
	{"rollback-of-upgrade/unpack", "rollback-upgrade", librariesPkg + ".preinst-upgrade"},
	{"rollback-of-upgrade/configure", "rollback-upgrade", librariesPkg + ".postinst-configure"},
	// The rollback of the install purges what it installed.
	{"rollback-of-install/remove", "rollback-install", librariesPkg + ".prerm-remove"},
	{"rollback-of-install/purge", "rollback-install", toolkitPkg + ".postrm-purge"},
}

func (k killCell) run(c *cell) {
	t := c.t
	r := newFaultRoot(t, faultRootOptions{})
	c.r = r
	// when is the command killed and the spec it works on: the apply of
	// that spec, or the rollback of its apply. The upgrade is made from
	// the install, applied before the host is taken as it was.
	what, target, _ := strings.Cut(k.when, "-")
	spec, ok := map[string]string{"install": installSpec(), "upgrade": upgradeSpec()}[target]
	if !ok || what != "apply" && what != "rollback" {
		t.Fatalf("unknown kill cell %q", k.when)
	}
	if target == "upgrade" {
		r.mustApply(installSpec())
	}
	before := r.Snapshot()
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
	left := r.dpkgStates(toolkitPkg, librariesPkg, configPkg)
	c.step("left: %s", left)
	c.finish(before, kind, res)
}

// killAt runs gpuenv with argv (the command what) in the cell's root,
// armed to stop at phase, and cuts the power once it gets there. When it
// never gets there, the cell fails and is finished: ok is false.
func (c *cell) killAt(what, phase string, argv []string, before hostState, kind faultedBy) (res Result, ok bool) {
	c.t.Helper()
	r := c.r
	r.arm(phase)
	p := r.StartGpuenv(nil, argv...)
	if !r.waitReached(p, phase, 3*time.Minute) {
		if !p.Exited() {
			r.PowerCut()
		}
		res := p.Wait()
		c.step("%s %s", what, describe(res))
		c.fail(fmt.Sprintf("the %s never reached %s", what, phase), res.String())
		c.finish(before, kind, res)
		return res, false
	}
	killed := r.PowerCut()
	res = p.Wait()
	c.step("%s killed at %s", what, phase)
	c.t.Logf("power cut at %s killed:\n  %s", phase, strings.Join(killed, "\n  "))
	c.t.Logf("gpuenv %s before the kill:\n%s%s", what, res.Stdout, res.Stderr)
	return res, true
}

// diskFullCell fills the state directory's filesystem at journal point n
// of the apply of upgrade (from the install) or of its rollback; the test
// then frees the space, and recovery must work from what was written. On
// a full filesystem a write that fits in the last, partly used page of a
// file still succeeds, as it would on a real disk: the journal's next
// record fails only when it needs a new page. The cell's line says which
// writes met ENOSPC and whether the journal's last record was torn;
// wantTorn says the cell was chosen so that it must be.
func diskFullCell(c *cell, kind faultedBy, n int, upgrade string, wantTorn bool) {
	t := c.t
	r := newFaultRoot(t, faultRootOptions{StateTmpfs: true})
	c.r = r
	r.useFaultBinary()
	r.mustApply(installSpec())
	before := r.Snapshot()
	env := []string{fmt.Sprintf("GPUENV_FAULT_FILL_AT=%d", n)}
	var res Result
	what := "apply"
	if kind == faultedApply {
		r.writeSpec(upgrade)
		res = r.RunGpuenv(env, "apply", "--auto-approve", specDir)
	} else {
		r.mustApply(upgrade)
		what = "rollback"
		res = r.RunGpuenv(env, "rollback", "--auto-approve")
	}
	c.step("%s %s", what, describe(res))
	filler := r.Path("/var/lib/gpuenv/gpuenv-fault-filler")
	if _, err := os.Stat(filler); err != nil {
		c.fail(fmt.Sprintf("journal point %d was never called: the disk was not filled", n), res.String())
	} else {
		t.Logf("the disk filled at journal point %d; gpuenv %s:\n%s%s", n, what, res.Stdout, res.Stderr)
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
	}
	c.step("ENOSPC in: %s", noSpaceIn(res.Stdout+res.Stderr))
	gen, records, _, torn := r.journalLines()
	switch {
	case torn:
		c.step("journal of generation %d torn after %d whole records", gen, records)
	case wantTorn:
		c.fail(fmt.Sprintf("the fill at point %d did not tear the journal's next record (generation %d has %d whole records): the records' sizes moved; the cell must be chosen again", n, gen, records), res.String())
	}
	if bad := r.damagedSavedPackages(); len(bad) > 0 {
		c.step("saved package files damaged: %s", strings.Join(bad, ", "))
	}
	c.finish(before, kind, res)
}

// noSpaceIn names the files whose writes gpuenv reported failing with
// ENOSPC, from its output.
func noSpaceIn(out string) string {
	var what []string
	for _, line := range strings.Split(out, "\n") {
		if !strings.Contains(line, "no space left on device") || strings.Contains(line, "(faultinject)") {
			continue
		}
		name := "other"
		for _, f := range strings.Fields(line) {
			f = strings.TrimRight(f, ":,;)")
			if strings.HasPrefix(f, "/var/lib/gpuenv/") {
				name = strings.TrimLeft(path.Base(f), ".")
				if i := strings.Index(name, ".gpuenv-"); i > 0 {
					name = name[:i] // a temporary file: name what it replaces
				}
				break
			}
		}
		if !slices.Contains(what, name) {
			what = append(what, name)
		}
	}
	if len(what) == 0 {
		return "nothing gpuenv reported"
	}
	return strings.Join(what, ", ")
}

// tornPoint finds the journal point after which the next record straddles
// a page boundary, so that filling the disk there tears it (a short
// write), given the journal's size after each record of an uninterrupted
// run. It wants the boundary well inside the record: sizes move by a few
// bytes between runs (times, durations).
func tornPoint(ends []int) (int, bool) {
	const margin = 48
	page := os.Getpagesize()
	prev := 0
	for k, end := range ends {
		boundary := (prev/page + 1) * page
		if boundary-prev >= margin && end-boundary >= margin {
			return k, true
		}
		prev = end
	}
	return 0, false
}

// largeUpgradeSpec is upgradeSpec with enough more groups that its
// journal, and its rollback's, pass a page boundary.
func largeUpgradeSpec() string {
	s := upgradeSpec()
	for i := 1; i <= 12; i++ {
		s += fmt.Sprintf("\ngroup \"gpuenv-fault-%02d\" {\n  members = [\"alice\"]\n}\n", i)
	}
	return s
}

// networkDownloadCell: the repository is served over HTTP, and the
// connection drops in the middle of the first package file apt downloads,
// after which nothing answers. The apply must fail and revert by itself
// (exit 1), leaving the host as before.
func networkDownloadCell(c *cell) {
	t := c.t
	r := newFaultRoot(t, faultRootOptions{HTTP: true})
	c.r = r
	before := r.Snapshot()
	r.writeSpec(installSpec())
	r.server.cutNext.Store(true)
	res := r.Gpuenv("apply", "--auto-approve", specDir)
	c.step("apply %s", describe(res))
	r.server.mu.Lock()
	cut := r.server.cut
	r.server.mu.Unlock()
	if cut == "" {
		c.fail("no package file was requested: the network was never cut", res.String()+"\nrequests:\n"+r.server.log())
	} else {
		c.step("cut during %s", path.Base(cut))
	}
	if res.Code != 1 {
		c.fail(fmt.Sprintf("apply with the network cut: %s, want exit 1 (failed, fully reverted)", describe(res)), res.String())
	}
	c.finish(before, faultedApply, res)
}

// networkRollbackCell: the upgrade is applied online; then the server
// stops and the package cache is emptied, the lists kept. The rollback
// must restore 12.4.0 from the files the generation saved, with no
// network, by itself.
func networkRollbackCell(c *cell) {
	t := c.t
	r := newFaultRoot(t, faultRootOptions{HTTP: true})
	c.r = r
	r.mustApply(installSpec())
	before := r.Snapshot()
	r.mustApply(upgradeSpec())
	r.server.Stop()
	r.MustSh("rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*")
	c.gpuenv("offline rollback", "offline rollback", "rollback", "--auto-approve")
	c.compare(before)
}

// rebuildCell: the installed 12.4.0 packages came from files (dpkg -i),
// and the repository has only 12.4.1. Before upgrading, gpuenv must
// rebuild the installed version from dpkg's own records with dpkg-deb
// (the root has no dpkg-repack), and the rollback must restore it exactly:
// files, conffiles, maintainer scripts, status.
func rebuildCell(c *cell) {
	t := c.t
	r := newFaultRoot(t, faultRootOptions{Packages: []Deb{faultConfigCommon, faultLibraries(faultCUDANew), faultToolkit(faultCUDANew)}})
	c.r = r
	dir := r.Path("/root/downloaded")
	faultLibraries(faultCUDAOld).Build(t, dir)
	faultToolkit(faultCUDAOld).Build(t, dir)
	r.MustSh("dpkg -i /root/downloaded/*.deb && rm -r /root/downloaded")
	if r.Sh("command -v dpkg-repack").Code == 0 {
		t.Fatal("the root has dpkg-repack; the cell needs a root without it")
	}
	before := r.Snapshot()
	r.writeSpec(upgradeSpec())
	if res := c.gpuenv("apply", "apply of the upgrade", "apply", "--auto-approve", specDir); res.Code != 0 {
		c.compare(before)
		return
	}
	if saved := r.savedPackages(); !containsPrefix(saved, librariesPkg+"_"+debVersion(faultCUDAOld)+"_") || !containsPrefix(saved, toolkitPkg+"_"+debVersion(faultCUDAOld)+"_") {
		c.fail("the generation saved no package file of the 12.4.0 packages", fmt.Sprint(saved))
	}
	c.gpuenv("rollback", "rollback", "rollback", "--auto-approve")
	c.compare(before)
}

// driverKillCell: Debian's own driver packages (as TestDistroDriverInstall
// UpgradeRollback), upgraded from 535.261.03 to 535.309.01 and killed
// while dpkg unpacks libcuda1, caught in /var/log/dpkg.log.
func driverKillCell(c *cell) {
	t := c.t
	r := &faultRoot{Root: h.NewRoot(t, Base, Mounts{Proc: true, Sys: true})}
	c.r = r
	r.writeSpec(driverSpec("535.261.03"))
	if res := r.Gpuenv("apply", "--auto-approve", specDir); res.Code != 0 {
		t.Fatalf("setup: apply of the driver: %s", res)
	}
	before := r.Snapshot()
	logFile := r.Path("/var/log/dpkg.log")
	fi, err := os.Stat(logFile)
	if err != nil {
		t.Fatal(err)
	}
	offset := fi.Size()
	r.writeSpec(driverSpec("535.309.01"))
	p := r.StartGpuenv(nil, "apply", "--auto-approve", specDir)
	const want = "status half-installed libcuda1:amd64 "
	hit := false
	deadline := time.Now().Add(10 * time.Minute)
	for !hit && !p.Exited() && time.Now().Before(deadline) {
		data, _ := os.ReadFile(logFile)
		if int64(len(data)) > offset && strings.Contains(string(data[offset:]), want) {
			hit = true
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	if !hit {
		res := p.Wait()
		c.step("apply %s", describe(res))
		c.fail("dpkg never logged libcuda1 half-installed during the upgrade", res.String())
		c.finish(before, faultedApply, res)
		return
	}
	killed := r.PowerCut()
	res := p.Wait()
	t.Logf("power cut while libcuda1 was half-installed killed:\n  %s", strings.Join(killed, "\n  "))
	t.Logf("gpuenv apply before the kill:\n%s%s", res.Stdout, res.Stderr)
	c.step("apply killed while libcuda1 unpacked")
	c.step("left: %s", r.dpkgStates("libcuda1", "libnvidia-ml1", "nvidia-smi"))
	c.finish(before, faultedApply, res)
}
