package apply

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpuenv/gpuenv/internal/safefile"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/host/pkgdb"
	"github.com/gpuenv/gpuenv/spec/lazyregexp"
)

// Where dpkg keeps its database and the lock apt front-ends take.
const (
	dpkgLockFrontend = "/var/lib/dpkg/lock-frontend"
)

// debState is one package in dpkg's database.
type debState struct {
	Version string
	Status  string // the whole Status field: "install ok installed"
}

func (s debState) installed() bool {
	f := strings.Fields(s.Status)
	return len(f) == 3 && (f[2] == "installed" || f[2] == "half-configured" || f[2] == "unpacked" || f[2] == "half-installed" || f[2] == "triggers-awaited" || f[2] == "triggers-pending")
}

func (s debState) held() bool { return strings.HasPrefix(s.Status, "hold ") }

// state is dpkg's package state ("installed", "half-installed", …);
// a package dpkg does not know is "not-installed".
func (s debState) state() string {
	if f := strings.Fields(s.Status); len(f) == 3 {
		return f[2]
	}
	return "not-installed"
}

// stable reports whether dpkg finished with the package: installed,
// config-files or not installed, and not marked as needing
// reinstallation.
func (s debState) stable() bool {
	f := strings.Fields(s.Status)
	if len(f) != 3 {
		return true
	}
	return f[1] == "ok" && (f[2] == "installed" || f[2] == "config-files" || f[2] == "not-installed")
}

// present reports whether anything of the package is on the system, its
// configuration files included.
func (s debState) present() bool { return s.state() != "not-installed" }

func (s debState) String() string {
	if !s.present() {
		return "not installed"
	}
	f := strings.Fields(s.Status)
	out := s.Version + " " + f[2]
	if f[1] != "ok" {
		out += " (" + f[1] + ")"
	}
	if s.held() {
		out += ", held"
	}
	return out
}

// expectedDeb is what dpkg's database must show of one package once an
// operation or its inverse is done.
type expectedDeb struct {
	Name string
	// Version: installed, configured, at exactly this version. Empty:
	// not installed, which may mean absent, only the configuration files
	// left, or either.
	Version     string
	Absent      bool
	ConfigFiles bool
	// Held, when set, is whether the package must be held.
	Held *bool
}

func (e expectedDeb) matches(c debState) bool {
	if e.Version != "" {
		return c.Version == e.Version && c.state() == "installed" && c.stable() && (e.Held == nil || *e.Held == c.held())
	}
	switch c.state() {
	case "not-installed":
		return e.Absent
	case "config-files":
		return e.ConfigFiles && c.stable()
	}
	return false
}

func (e expectedDeb) String() string {
	switch {
	case e.Version != "" && e.Held != nil && *e.Held:
		return e.Version + " installed, held"
	case e.Version != "" && e.Held != nil:
		return e.Version + " installed, not held"
	case e.Version != "":
		return e.Version + " installed"
	case e.Absent && e.ConfigFiles:
		return "removed"
	case e.ConfigFiles:
		return "removed with its configuration files kept"
	}
	return "not installed"
}

// expectPrior is what an inverse restores: each package as it was.
func expectPrior(pkgs []PriorPackage) []expectedDeb {
	out := make([]expectedDeb, 0, len(pkgs))
	for _, p := range pkgs {
		out = append(out, expectedOf(p))
	}
	return out
}

func expectedOf(p PriorPackage) expectedDeb {
	e := expectedDeb{Name: p.Name, Version: p.Version}
	switch {
	case p.Version != "":
		held := p.Held
		e.Held = &held
	case debState{Status: p.Status}.state() == "config-files":
		e.ConfigFiles = true
	default:
		e.Absent = true
	}
	return e
}

// expectOp is what an apt transaction leaves: its pins installed, held
// when it holds them, its removals gone.
func expectOp(op *plan.PackagesOp) []expectedDeb {
	var out []expectedDeb
	for _, p := range op.Install {
		held := slices.Contains(op.Hold, p.Name)
		out = append(out, expectedDeb{Name: p.Name, Version: p.Version, Held: &held})
	}
	for _, r := range op.Remove {
		out = append(out, expectedDeb{Name: r, Absent: true, ConfigFiles: !op.Purge})
	}
	return out
}

// differing lists the packages whose version or status is not what they
// were before (holds aside).
func differing(pkgs []PriorPackage, cur map[string]debState) []PriorPackage {
	var out []PriorPackage
	for _, p := range pkgs {
		e := expectedOf(p)
		e.Held = nil
		if !e.matches(cur[p.Name]) {
			out = append(out, p)
		}
	}
	return out
}

// PackageMismatchError says that the package database does not show what
// an apply, revert or rollback should have left, naming each package.
type PackageMismatchError struct {
	Packages []string
}

func (e *PackageMismatchError) Error() string {
	return "the package database does not show the expected state: " + strings.Join(e.Packages, "; ")
}

// checkApt compares dpkg's database with what is expected, and with
// dpkg having finished: a package left half-done anywhere is a mismatch
// too, since the host is not in a state to build on — except the ones
// dpkg had already left half-done before gpuenv began (before), which are
// not gpuenv's to judge.
func (x aptManager) checkApt(want []expectedDeb, before []string) error {
	cur, err := x.readDpkg()
	if err != nil {
		return err
	}
	var bad []string
	named := map[string]bool{}
	for _, e := range want {
		named[e.Name] = true
		if c := cur[e.Name]; !e.matches(c) {
			bad = append(bad, fmt.Sprintf("%s is %s, expected %s", e.Name, c, e))
		}
	}
	var unfinished []string
	for n, s := range cur {
		if !named[n] && !s.stable() && !slices.Contains(before, n) {
			unfinished = append(unfinished, fmt.Sprintf("%s is %s", n, s))
		}
	}
	sort.Strings(unfinished)
	bad = append(bad, unfinished...)
	if len(bad) > 0 {
		return &PackageMismatchError{Packages: bad}
	}
	return nil
}

// readDpkg reads every package's version and status from the root's dpkg
// database as dpkg itself would (pkgdb.ReadDpkgAll): the status file,
// then the journal of changes dpkg made since it last rewrote that file.
// After a power cut in the middle of dpkg the journal is where the
// half-installed packages are. A package is keyed by its name, and by
// name:arch when the status file lists another architecture of it first
// (a foreign architecture).
func (x aptManager) readDpkg() (map[string]debState, error) {
	db := pkgdb.ReadDpkgAll(x.Host)
	if db.Err != nil {
		return nil, db.Err
	}
	out := make(map[string]debState, len(db.Packages))
	for _, p := range db.Packages {
		k := p.Name
		if _, dup := out[k]; dup && p.Architecture != "" {
			k = p.Name + ":" + p.Architecture
		}
		out[k] = debState{Version: p.Version, Status: pkgdb.StatusText(p)}
	}
	return out, nil
}

// simLine matches what apt-get -s prints for each package it would change.
var simLine = lazyregexp.New(`^(Inst|Remv|Purg) (\S+)`)

func aptTransaction(op *plan.PackagesOp, simulate bool) []string {
	argv := []string{"apt-get"}
	if simulate {
		argv = append(argv, "-s")
	} else {
		argv = append(argv, "-y", "-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold")
	}
	argv = append(argv, "install", "--no-install-recommends")
	if op.Reinstall {
		// Without it apt leaves a package at its pinned version alone,
		// damaged files and all.
		argv = append(argv, "--reinstall")
	}
	if op.AllowDowngrade {
		argv = append(argv, "--allow-downgrades")
	}
	if op.Purge {
		argv = append(argv, "--purge")
	}
	// Names and versions are validated before a plan runs; "--" keeps a
	// name that slipped through from being read as an option.
	argv = append(argv, "--")
	for _, p := range op.Install {
		argv = append(argv, p.Name+"="+p.Version)
	}
	// apt-get install removes a package whose name ends in "-" in the
	// same transaction, so one operation is one dpkg run.
	for _, r := range op.Remove {
		argv = append(argv, r+"-")
	}
	return argv
}

// aptManager carries out apt transactions; dpkg's database is the truth
// it checks them against.
type aptManager struct{ *HostExecutor }

var _ packageManager = aptManager{}

// aptPrior is dpkg's database before an apt transaction.
type aptPrior struct {
	x      aptManager
	before map[string]debState
	// ix are the package indexes read for the transaction
	// (indexesFor), nil when they cannot answer.
	ix *facts.PackageIndexes
	// saved are the package files saveAll kept, by package name.
	saved map[string]savedFile
}

func (a *aptPrior) direct(op *plan.PackagesOp) (affected, changes []string, err error) {
	for _, p := range op.Install {
		affected = append(affected, p.Name)
	}
	affected = append(affected, slices.Concat(op.Remove, op.Hold, op.Unhold)...)
	for _, p := range op.Install {
		if s, ok := a.before[p.Name]; ok && s.installed() && (s.Version != p.Version || op.Reinstall) {
			changes = append(changes, p.Name)
		}
		if s := a.before[p.Name]; s.held() && !op.Reinstall && !slices.Contains(op.Unhold, p.Name) && !slices.Contains(op.Hold, p.Name) {
			return nil, nil, fmt.Errorf("package %s is held at %s and the plan does not release it", p.Name, s.Version)
		}
	}
	for _, r := range op.Remove {
		if s, ok := a.before[r]; ok && s.installed() {
			changes = append(changes, r)
		}
	}
	return affected, changes, nil
}

func (a *aptPrior) simulate(ctx context.Context, ws *Workspace, op *plan.PackagesOp) ([]string, error) {
	if len(op.Install) == 0 && len(op.Remove) == 0 {
		return nil, nil
	}
	if a.x.fullOp != op && a.trivial(op) {
		// The pins are all the transaction changes, if apt agrees:
		// run tells it to refuse anything more (--trivial-only), and
		// the dry run is done only when it does.
		a.x.trivialOp = op
		return nil, nil
	}
	argv := aptTransaction(op, true)
	for _, p := range op.Install {
		if a.before[p.Name].held() {
			// Released before the real transaction (checked in direct);
			// the dry run runs while the hold is still there.
			argv = slices.Insert(argv, 2, "--allow-change-held-packages")
			break
		}
	}
	out, err := a.x.output(ctx, ws, aptEnv, argv...)
	if err != nil {
		return nil, fmt.Errorf("apt-get cannot carry out the transaction (dry run failed; see %s): %w", ws.Dir+"/"+logName, err)
	}
	var names []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if m := simLine.FindStringSubmatch(sc.Text()); m != nil {
			names = append(names, strings.TrimSuffix(m[2], ":"+hostArch(a.before, m[2])))
		}
	}
	return names, nil
}

// trivial reports whether op is likely to change its pins and nothing
// else: every pin upgrades a package already installed (the packages its
// pins depend on at one exact version are pinned too, by pinPending), and
// it removes and downgrades nothing. apt's --trivial-only then decides:
// apt refuses when the packages it would install are not exactly as many
// as the pins, or it would remove, downgrade or change a held package.
// A pin already at its version would leave room in that count for one
// package more, so none may be.
func (a *aptPrior) trivial(op *plan.PackagesOp) bool {
	if len(op.Install) == 0 || len(op.Remove) > 0 || op.Purge || op.AllowDowngrade {
		return false
	}
	for _, p := range op.Install {
		if s := a.before[p.Name]; !s.installed() || !s.stable() || s.Version == p.Version {
			return false
		}
	}
	return true
}

func (a *aptPrior) changes(name string) bool {
	s, ok := a.before[name]
	return ok && s.installed()
}

func (a *aptPrior) prior(ctx context.Context, ws *Workspace, seq int, name string, changed bool) ([]PriorPackage, error) {
	s := a.before[name]
	pp := PriorPackage{Name: name, Status: s.Status, Held: s.held()}
	if s.installed() {
		pp.Version = s.Version
	}
	if changed {
		f, ok := a.saved[name]
		if !ok {
			saved, err := a.x.saveDebs(ctx, ws, seq, []debRef{{name, s.Version}}, a.ix)
			if err != nil {
				return nil, err
			}
			f = saved[name]
		}
		pp.Saved, pp.SHA256, pp.Size = f.path, f.sha256, f.size
	}
	return []PriorPackage{pp}, nil
}

// saveAll keeps the installed package files of the packages the
// transaction changes, all at once (saveDebs).
func (a *aptPrior) saveAll(ctx context.Context, ws *Workspace, seq int, names []string) error {
	refs := make([]debRef, 0, len(names))
	for _, n := range names {
		refs = append(refs, debRef{n, a.before[n].Version})
	}
	saved, err := a.x.saveDebs(ctx, ws, seq, refs, a.ix)
	a.saved = saved
	return err
}

// withSaved is inv with the saved files (and their digests) of the
// packages checked in place of those recorded, for this run only.
func withSaved(inv *PackagesInverse, checked []PriorPackage) *PackagesInverse {
	by := map[string]PriorPackage{}
	for _, p := range checked {
		by[p.Name+"="+p.Version] = p
	}
	out := *inv
	out.Packages = slices.Clone(inv.Packages)
	for i, p := range out.Packages {
		if c, ok := by[p.Name+"="+p.Version]; ok {
			out.Packages[i].Saved, out.Packages[i].SHA256 = c.Saved, c.SHA256
		}
	}
	return &out
}

// finish records the packages dpkg had left half-done before the
// transaction, which its checks do not hold against it.
func (a *aptPrior) finish(inv *PackagesInverse, affected map[string]bool) {
	for n, s := range a.before {
		if !s.stable() && !affected[n] {
			inv.Unfinished = append(inv.Unfinished, n)
		}
	}
	sort.Strings(inv.Unfinished)
}

// recover records in the log what dpkg left. dpkg's own recovery
// (`dpkg --configure -a`) cannot repair a package a power cut left
// half-unpacked, and stops there; undoing the transaction repairs dpkg
// from the package files saved for it (see undo).
func (x aptManager) recover(ctx context.Context, ws *Workspace) error {
	_ = x.command(ctx, ws, nil, "dpkg", "--audit")
	return nil
}

// check checks apt transactions against dpkg's database.
func (x aptManager) check(_ context.Context, _ *Workspace, want []Expectation) error {
	byName := map[string]expectedDeb{}
	var order, before []string
	for _, e := range want {
		if e.Inverse != nil {
			before = append(before, e.Inverse.Unfinished...)
		}
		var exp []expectedDeb
		if e.Op != nil {
			exp = expectOp(e.Op)
			// A hold or release of a package the transaction does not
			// pin changes only the hold of what an earlier one left.
			for _, names := range [][]string{e.Op.Hold, e.Op.Unhold} {
				for _, n := range names {
					if d, ok := byName[n]; ok && d.Version != "" && !slices.ContainsFunc(exp, func(x expectedDeb) bool { return x.Name == n }) {
						held := slices.Contains(e.Op.Hold, n)
						d.Held = &held
						byName[n] = d
					}
				}
			}
		} else {
			exp = expectPrior(e.Inverse.Packages)
		}
		for _, d := range exp {
			if _, ok := byName[d.Name]; !ok {
				order = append(order, d.Name)
			}
			byName[d.Name] = d
		}
	}
	exp := make([]expectedDeb, 0, len(order))
	for _, n := range order {
		exp = append(exp, byName[n])
	}
	return x.checkApt(exp, before)
}

// hostArch is the architecture suffix apt may print after a name; names in
// the database are plain unless foreign.
func hostArch(before map[string]debState, name string) string {
	if _, ok := before[name]; ok {
		return ""
	}
	if i := strings.LastIndexByte(name, ':'); i > 0 {
		return name[i+1:]
	}
	return ""
}

// waitDpkgLock waits, up to the timeout, for another package manager
// (unattended-upgrades, an apt run in another terminal) to release dpkg's
// front-end lock, saying who holds it. apt-get is also given the same
// timeout, so a lock taken again between the check and its start is
// waited for too.
func (x aptManager) waitDpkgLock(ctx context.Context, ws *Workspace) error {
	rp, err := x.Host.Resolve(dpkgLockFrontend)
	if err != nil {
		return err
	}
	f, err := os.Open(rp)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	timeout := x.lockTimeout()
	return waitForLock(ctx, ws, time.Now().Add(timeout),
		func() (int, bool, error) {
			lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0}
			if err := unix.FcntlFlock(f.Fd(), unix.F_GETLK, &lk); err != nil {
				return 0, false, fmt.Errorf("checking dpkg's lock %s: %w", dpkgLockFrontend, err)
			}
			return int(lk.Pid), lk.Type != unix.F_UNLCK, nil
		},
		func(holder string) {
			ws.say("waiting up to %s for dpkg's lock %s, held by %s", timeout, dpkgLockFrontend, holder)
		},
		func(int) error {
			return fmt.Errorf("dpkg's lock %s is still held after %s; another package manager (unattended-upgrades?) is running", dpkgLockFrontend, timeout)
		})
}

func (x aptManager) aptLockOption() []string {
	return []string{"-o", fmt.Sprintf("DPkg::Lock::Timeout=%d", int(x.lockTimeout().Seconds()))}
}

func (x aptManager) run(ctx context.Context, ws *Workspace, op *plan.PackagesOp) error {
	if err := x.waitDpkgLock(ctx, ws); err != nil {
		return err
	}
	before, err := x.readDpkg()
	if err != nil {
		return err
	}
	// A pin of a held package is released first and held again after,
	// when the plan holds it.
	var unhold []string
	for _, n := range op.Unhold {
		if before[n].held() {
			unhold = append(unhold, n)
		}
	}
	for _, p := range op.Install {
		if before[p.Name].held() && !slices.Contains(unhold, p.Name) {
			unhold = append(unhold, p.Name)
		}
	}
	if len(unhold) > 0 {
		if err := x.command(ctx, ws, aptEnv, append([]string{"apt-mark", "unhold", "--"}, unhold...)...); err != nil {
			return err
		}
	}
	if len(op.Install) > 0 || len(op.Remove) > 0 {
		argv := aptTransaction(op, false)
		argv = slices.Insert(argv, 1, x.aptLockOption()...)
		trivial := x.trivialOp == op
		if trivial {
			argv = slices.Insert(argv, 1, "--trivial-only")
		}
		if err := x.command(ctx, ws, aptEnv, argv...); err != nil {
			if trivial {
				return x.notTrivial(ctx, ws, op, before, unhold, err)
			}
			return err
		}
	}
	hold := op.Hold
	if op.Reinstall {
		// A reinstall leaves the package as it was, hold included.
		hold = unhold
	}
	if len(hold) > 0 {
		return x.command(ctx, ws, aptEnv, append([]string{"apt-mark", "hold", "--"}, hold...)...)
	}
	return nil
}

// notTrivial handles the failure of a transaction prepared as trivial
// (trivialOp): apt refuses, before it fetches or changes anything, a
// transaction that would change more than its pins. When dpkg's database
// shows nothing changed, once the holds released for it are set again,
// the transaction is prepared again with a dry run (PrepareAgainError);
// anything else is the failure it is.
func (x aptManager) notTrivial(ctx context.Context, ws *Workspace, op *plan.PackagesOp, before map[string]debState, unheld []string, failure error) error {
	x.trivialOp = nil
	if len(unheld) > 0 {
		if err := x.command(ctx, ws, aptEnv, append([]string{"apt-mark", "hold", "--"}, unheld...)...); err != nil {
			return failure
		}
	}
	after, err := x.readDpkg()
	if err != nil || !maps.Equal(before, after) {
		return failure
	}
	x.fullOp = op
	return &PrepareAgainError{Reason: "apt would change more packages than the transaction names: preparing it again with a dry run"}
}

// undo puts every package the transaction could change back to its
// version, status and hold from before, working from dpkg's state as it
// finds it: after a power cut dpkg may have left packages half-installed
// (reinstreq), unpacked, half-configured or awaiting triggers, and apt
// refuses to act until that is repaired. Saved package files are installed
// directly (offline), packages that were absent are purged, holds set as
// they were; only what differs is touched. The inverse is done when dpkg's
// database shows exactly the prior state and no package is left
// half-done; anything else is an error naming the packages.
func (x aptManager) undo(ctx context.Context, ws *Workspace, inv *PackagesInverse) error {
	cur, err := x.readDpkg()
	if err != nil {
		return err
	}
	interrupted := x.dpkgInterrupted(cur)
	if len(differing(inv.Packages, cur)) == 0 && !interrupted {
		// Already as it was: nothing to wait for or run.
		return nil
	}
	if err := x.waitDpkgLock(ctx, ws); err != nil {
		return err
	}
	// Every file to install is checked before the first is: a damaged
	// one found half-way would leave the host between two states.
	ix := x.readIndexes(ctx, ws)
	checked, err := x.checkSavedDebs(ctx, ws, differing(inv.Packages, cur), ix)
	if err != nil {
		return err
	}
	inv = withSaved(inv, checked)
	if interrupted {
		if cur, err = x.repairDpkg(ctx, ws, inv, cur); err != nil {
			return err
		}
	}
	if err := x.restoreWithApt(ctx, ws, inv, cur, ix); err != nil {
		return err
	}
	if cur, err = x.readDpkg(); err != nil {
		return err
	}
	if err := x.setHolds(ctx, ws, inv.Packages, cur); err != nil {
		return err
	}
	return x.checkApt(expectPrior(inv.Packages), inv.Unfinished)
}

// dpkgInterrupted reports whether dpkg was stopped part-way: a package in
// a state other than installed, config-files or not-installed, or with
// the reinstreq flag, or journal entries dpkg has not yet folded into its
// database (/var/lib/dpkg/updates), which is what makes apt say "dpkg was
// interrupted".
func (x aptManager) dpkgInterrupted(db map[string]debState) bool {
	for _, s := range db {
		if !s.stable() {
			return true
		}
	}
	return pkgdb.JournalPending(x.Host)
}

// repairDpkg is the recovery a person does by hand after a power cut in
// the middle of dpkg, done with dpkg itself since apt refuses to run:
// the saved package files of every package not at its prior version and
// status are installed with dpkg -i (a half-installed package is simply
// reinstalled), packages that were absent before are purged, forcing the
// removal of ones dpkg marked as needing reinstallation, and then dpkg
// finishes whatever else it left unconfigured (triggers included). Each
// step's failure is only logged: what is left is for apt to resolve, and
// the check that ends the inverse says whether the state is right.
func (x aptManager) repairDpkg(ctx context.Context, ws *Workspace, inv *PackagesInverse, cur map[string]debState) (map[string]debState, error) {
	ws.say("dpkg was interrupted: repairing its database from the package files saved in the generation")
	var debs, purge, remove []string
	for _, p := range differing(inv.Packages, cur) {
		c := cur[p.Name]
		switch {
		case p.Version != "":
			if p.Saved != "" {
				if _, err := x.Host.Stat(p.Saved); err == nil {
					debs = append(debs, p.Saved)
				}
			}
		case c.present():
			if (debState{Status: p.Status}).state() == "config-files" {
				remove = append(remove, p.Name)
			} else {
				purge = append(purge, p.Name)
			}
		}
	}
	if len(debs) > 0 {
		argv := append([]string{"dpkg", "--force-confdef", "--force-confold", "--install", "--"}, debs...)
		_ = x.command(ctx, ws, aptEnv, argv...)
	}
	for _, set := range []struct {
		verb  string
		names []string
	}{{"--purge", purge}, {"--remove", remove}} {
		if len(set.names) > 0 {
			argv := append([]string{"dpkg", "--force-remove-reinstreq", set.verb, "--"}, set.names...)
			_ = x.command(ctx, ws, aptEnv, argv...)
		}
	}
	_ = x.command(ctx, ws, aptEnv, "dpkg", "--force-confdef", "--force-confold", "--configure", "--pending")
	_ = x.command(ctx, ws, nil, "dpkg", "--audit")
	return x.readDpkg()
}

// restoreWithApt resolves what still differs with apt: saved package files
// (read as root: apt's unprivileged download user cannot enter the
// generation's private directory, and would fetch the version again from
// the network), versions whose saved file was pruned from the archive,
// and removals, with apt's dependency resolution.
func (x aptManager) restoreWithApt(ctx context.Context, ws *Workspace, inv *PackagesInverse, cur map[string]debState, ix *facts.PackageIndexes) error {
	var debs, remove, purge, unhold []string
	for _, p := range differing(inv.Packages, cur) {
		c := cur[p.Name]
		switch {
		case p.Version != "":
			if _, err := x.Host.Stat(p.Saved); p.Saved == "" || err != nil {
				// Pruned by history --keep: the archive may still have it.
				ws.say("the saved package file of %s %s is gone; installing it from the archive", p.Name, p.Version)
				debs = append(debs, p.Name+"="+p.Version)
			} else if x.cacheSaved(ws, p, ix) {
				debs = append(debs, p.Name+"="+p.Version)
			} else {
				debs = append(debs, p.Saved)
			}
		case !c.present():
			continue
		case (debState{Status: p.Status}).state() == "config-files":
			remove = append(remove, p.Name)
		default:
			purge = append(purge, p.Name)
		}
		if c.held() {
			unhold = append(unhold, p.Name)
		}
	}
	if len(unhold) > 0 {
		if err := x.command(ctx, ws, aptEnv, append([]string{"apt-mark", "unhold", "--"}, unhold...)...); err != nil {
			return err
		}
	}
	// Old versions go back first, so that nothing left depends on a
	// package removed next.
	if len(debs) > 0 {
		argv := append([]string{"apt-get"}, x.aptLockOption()...)
		argv = append(argv, "-o", "APT::Sandbox::User=root", "-y", "-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold",
			"install", "--no-install-recommends", "--allow-downgrades", "--allow-change-held-packages", "--")
		if err := x.command(ctx, ws, aptEnv, append(argv, debs...)...); err != nil {
			return err
		}
	}
	for _, set := range []struct {
		verb  string
		names []string
	}{{"purge", purge}, {"remove", remove}} {
		if len(set.names) == 0 {
			continue
		}
		argv := append([]string{"apt-get"}, x.aptLockOption()...)
		argv = append(argv, "-y", "--allow-change-held-packages", set.verb, "--")
		if err := x.command(ctx, ws, aptEnv, append(argv, set.names...)...); err != nil {
			return err
		}
	}
	return nil
}

// cacheSaved puts p's saved package file into apt's package cache, where
// apt-get install name=version takes it without a download, when an index
// still lists that version with the saved file's SHA-256: apt reads a
// package named on its command line by its path from the file itself,
// which costs more than the cache's entry, and installs the same bytes
// either way. It reports whether the package can be installed by name.
func (x aptManager) cacheSaved(ws *Workspace, p PriorPackage, ix *facts.PackageIndexes) bool {
	v := pkgdb.IndexedVersion(ix, p.Name, p.Version)
	if v == nil || len(v.Origins) == 0 || v.SHA256 == "" {
		return false
	}
	// p.SHA256 is the saved file's, checked by checkSavedDebs; the copy
	// below checks the bytes it copies again.
	if p.SHA256 != v.SHA256 {
		return false
	}
	saved, err := x.Host.Resolve(p.Saved)
	if err != nil {
		return false
	}
	dst, err := x.Host.Resolve(path.Join(aptArchives, archiveName(p.Name, p.Version, v.Architecture)))
	if err != nil {
		return false
	}
	if sum, err := fileSHA256(dst); err == nil && sum == v.SHA256 {
		return true
	}
	if err := putChecked(saved, dst, v.SHA256); err != nil {
		fmt.Fprintf(ws.Log, "gpuenv: not putting %s into the package cache: %v\n", p.Saved, err)
		return false
	}
	fmt.Fprintf(ws.Log, "gpuenv: %s %s goes back from %s, put in the package cache as the index's file\n", p.Name, p.Version, p.Saved)
	return true
}

// putChecked puts a copy of src at dst, mode 0644 as apt's own downloads,
// through safefile; when the bytes' SHA-256 is not want, nothing is put
// in place.
func putChecked(src, dst, want string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := safefile.Create(dst, 0o644, safefile.Options{})
	if err != nil {
		return err
	}
	defer out.Close()
	sum := sha256.New()
	if _, err := io.Copy(io.MultiWriter(out, sum), in); err != nil {
		return err
	}
	if got := hex.EncodeToString(sum.Sum(nil)); got != want {
		return fmt.Errorf("its SHA-256 is %s, the index's %s", got, want)
	}
	return out.Commit()
}

// setHolds holds and releases packages until their holds are as listed.
func (x aptManager) setHolds(ctx context.Context, ws *Workspace, pkgs []PriorPackage, cur map[string]debState) error {
	var hold, unhold []string
	for _, p := range pkgs {
		c := cur[p.Name]
		if !c.installed() {
			continue
		}
		if p.Held && !c.held() {
			hold = append(hold, p.Name)
		} else if !p.Held && c.held() {
			unhold = append(unhold, p.Name)
		}
	}
	if len(unhold) > 0 {
		if err := x.command(ctx, ws, aptEnv, append([]string{"apt-mark", "unhold", "--"}, unhold...)...); err != nil {
			return err
		}
	}
	if len(hold) > 0 {
		return x.command(ctx, ws, aptEnv, append([]string{"apt-mark", "hold", "--"}, hold...)...)
	}
	return nil
}
