package apply

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/providers/host/pkgdb"
	"github.com/gpuenv/gpuenv/spec/lazyregexp"
	"github.com/gpuenv/gpuenv/spec/version"
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
func expectOp(op *planner.PackagesOp) []expectedDeb {
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

func aptTransaction(op *planner.PackagesOp, simulate bool) []string {
	argv := []string{"apt-get"}
	if simulate {
		argv = append(argv, "-s")
	} else {
		argv = append(argv, "-y", "-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold")
	}
	argv = append(argv, "install", "--no-install-recommends")
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

func (x aptManager) waitLock(ctx context.Context, ws *Workspace) error {
	return x.waitDpkgLock(ctx, ws)
}

// pinPending pins what the plan left to apply, then the packages the pins
// depend on at one exact version.
func (x aptManager) pinPending(ctx context.Context, ws *Workspace, op *planner.PackagesOp) error {
	if err := x.pinLatest(ctx, ws, op); err != nil {
		return err
	}
	x.pinExactDependencies(ctx, ws, op)
	return nil
}

func (x aptManager) readPrior(_ context.Context, _ *Workspace, _ *planner.PackagesOp, _ *PackagesInverse) (priorState, error) {
	before, err := x.readDpkg()
	if err != nil {
		return nil, err
	}
	return &aptPrior{x: x, before: before}, nil
}

// aptPrior is dpkg's database before an apt transaction.
type aptPrior struct {
	x      aptManager
	before map[string]debState
}

func (a *aptPrior) direct(op *planner.PackagesOp) (affected, changes []string, err error) {
	for _, p := range op.Install {
		affected = append(affected, p.Name)
	}
	affected = append(affected, slices.Concat(op.Remove, op.Hold, op.Unhold)...)
	for _, p := range op.Install {
		if s, ok := a.before[p.Name]; ok && s.installed() && s.Version != p.Version {
			changes = append(changes, p.Name)
		}
		if s := a.before[p.Name]; s.held() && !slices.Contains(op.Unhold, p.Name) && !slices.Contains(op.Hold, p.Name) {
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

func (a *aptPrior) simulate(ctx context.Context, ws *Workspace, op *planner.PackagesOp) ([]string, error) {
	if len(op.Install) == 0 && len(op.Remove) == 0 {
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
		saved, err := a.x.saveDeb(ctx, ws, seq, name, s.Version)
		if err != nil {
			return nil, err
		}
		pp.Saved = saved
	}
	return []PriorPackage{pp}, nil
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

// saveDeb keeps the installed version of a package as a .deb in the
// generation: from the archive when it still has that version, else
// rebuilt from the installed files. The package cache is not relied on:
// images often clean it.
func (x aptManager) saveDeb(ctx context.Context, ws *Workspace, seq int, name, version string) (string, error) {
	sub := path.Join(packagesDir, strconv.Itoa(seq)+"-"+name)
	dir := filepath.Join(ws.Path, sub)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	inRoot := path.Join(ws.Dir, sub)
	// find returns the package file saved in dir once it is whole; a cut
	// one is removed, so that the next way of saving it starts afresh.
	var broken error
	find := func() string {
		m, _ := filepath.Glob(filepath.Join(dir, "*.deb"))
		if len(m) != 1 {
			return ""
		}
		if err := checkDebFile(m[0]); err != nil {
			broken = err
			fmt.Fprintf(ws.Log, "gpuenv: %v\n", err)
			os.Remove(m[0])
			return ""
		}
		return path.Join(inRoot, filepath.Base(m[0]))
	}
	// apt-get download writes into the working directory; env -C sets it
	// without a shell.
	// As root: apt's sandbox user cannot write into the private
	// generation directory.
	if err := x.command(ctx, ws, aptEnv, "env", "-C", inRoot, "apt-get", "-o", "APT::Sandbox::User=root", "download", "--", name+"="+version); err == nil {
		if f := find(); f != "" {
			return f, syncDir(dir)
		}
	}
	if broken != nil {
		ws.say("the downloaded package file of %s %s is not whole: rebuilding it from dpkg's records of the installed package", name, version)
	} else {
		ws.say("%s %s is not in the archive any more: rebuilding it from dpkg's records of the installed package", name, version)
	}
	if err := x.rebuildDeb(ctx, ws, dir, inRoot, name, version); err != nil {
		return "", fmt.Errorf("cannot save %s %s for rollback (apt-get download failed and rebuilding it did too; see %s): %w", name, version, ws.Dir+"/"+logName, err)
	}
	f := find()
	if f == "" && broken != nil {
		return "", fmt.Errorf("cannot save %s %s for rollback: %w", name, version, broken)
	}
	if f == "" {
		return "", fmt.Errorf("cannot save %s %s for rollback: dpkg-deb wrote no package file", name, version)
	}
	return f, syncDir(dir)
}

// Control files dpkg keeps in /var/lib/dpkg/info for an installed
// package, by the name they have in a package's DEBIAN directory.
var controlFiles = []string{"preinst", "postinst", "prerm", "postrm", "config", "templates", "triggers", "shlibs", "symbols", "conffiles", "md5sums"}

// rebuildDeb makes a package file of an installed package from dpkg's own
// records, as dpkg-repack does but with only dpkg-deb, which every Debian
// system has: the control fields from the status database, the
// maintainer scripts and control files dpkg kept, and the installed files
// its file list names, with their current contents, modes, owners and
// link targets. The tree is built inside the generation (private) and
// removed afterwards.
func (x aptManager) rebuildDeb(ctx context.Context, ws *Workspace, dir, inRoot, name, version string) error {
	para, arch, err := pkgdb.ControlParagraph(x.Host, name, version)
	if err != nil {
		return err
	}
	info := "/var/lib/dpkg/info/" + name
	if _, err := x.Host.Stat(info + ".list"); err != nil && arch != "" {
		info += ":" + arch
	}
	list, err := x.Host.ReadFile(info + ".list")
	if err != nil {
		return fmt.Errorf("dpkg's file list of %s: %w", name, err)
	}
	tree := filepath.Join(dir, "tree")
	os.RemoveAll(tree)
	defer os.RemoveAll(tree)
	if err := os.MkdirAll(filepath.Join(tree, "DEBIAN"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tree, "DEBIAN", "control"), para, 0o644); err != nil {
		return err
	}
	for _, c := range controlFiles {
		data, err := x.Host.ReadFile(info + "." + c)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if c == "preinst" || c == "postinst" || c == "prerm" || c == "postrm" || c == "config" {
			mode = 0o755
		}
		if err := os.WriteFile(filepath.Join(tree, "DEBIAN", c), data, mode); err != nil {
			return err
		}
	}
	for _, p := range strings.Split(string(list), "\n") {
		if p == "" || p == "/." || !path.IsAbs(p) {
			continue
		}
		if err := x.copyInstalled(p, filepath.Join(tree, filepath.FromSlash(p))); err != nil {
			return fmt.Errorf("copying %s of %s: %w", p, name, err)
		}
	}
	return x.command(ctx, ws, nil, "dpkg-deb", "-Zgzip", "--build", "--", path.Join(inRoot, "tree"), inRoot)
}

// copyInstalled copies one installed path (inside the root) to dst on
// this machine as it is: a directory, a file with its bytes, or a
// symbolic link, with mode and owner. A path that is gone is skipped, as
// dpkg-repack does.
func (x aptManager) copyInstalled(p, dst string) error {
	rp, err := x.real(p)
	if err != nil {
		return err
	}
	fi, err := os.Lstat(rp)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	st := fi.Sys().(*syscall.Stat_t)
	switch {
	case fi.IsDir():
		if err := os.Mkdir(dst, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(rp)
		if err != nil {
			return err
		}
		if err := os.Symlink(target, dst); err != nil {
			return err
		}
		return os.Lchown(dst, int(st.Uid), int(st.Gid))
	case fi.Mode().IsRegular():
		data, err := os.ReadFile(rp)
		if err != nil {
			return err
		}
		if err := os.WriteFile(dst, data, 0o600); err != nil {
			return err
		}
	default:
		// Device nodes and pipes are not package contents dpkg ships.
		return nil
	}
	if os.Geteuid() == 0 {
		if err := os.Lchown(dst, int(st.Uid), int(st.Gid)); err != nil {
			return err
		}
	}
	// After the owner: chown clears setuid and setgid bits.
	return os.Chmod(dst, fileMode(st.Mode&0o7777))
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

func (x aptManager) run(ctx context.Context, ws *Workspace, op *planner.PackagesOp) error {
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
		if err := x.command(ctx, ws, aptEnv, argv...); err != nil {
			return err
		}
	}
	if len(op.Hold) > 0 {
		return x.command(ctx, ws, aptEnv, append([]string{"apt-mark", "hold", "--"}, op.Hold...)...)
	}
	return nil
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
	if interrupted {
		if cur, err = x.repairDpkg(ctx, ws, inv, cur); err != nil {
			return err
		}
	}
	if err := x.restoreWithApt(ctx, ws, inv, cur); err != nil {
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
func (x aptManager) restoreWithApt(ctx context.Context, ws *Workspace, inv *PackagesInverse, cur map[string]debState) error {
	var debs, remove, purge, unhold []string
	for _, p := range differing(inv.Packages, cur) {
		c := cur[p.Name]
		switch {
		case p.Version != "":
			if _, err := x.Host.Stat(p.Saved); p.Saved == "" || err != nil {
				// Pruned by history --keep: the archive may still have it.
				ws.say("the saved package file of %s %s is gone; installing it from the archive", p.Name, p.Version)
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

// pinLatest fixes the versions the plan could only learn after apply: the
// repositories its earlier steps configured are in place now, so apt lists
// their packages. Each pin gets the newest listed version that satisfies
// its constraint; the journal then records that exact version.
func (x aptManager) pinLatest(ctx context.Context, ws *Workspace, op *planner.PackagesOp) error {
	var names []string
	for _, p := range op.Install {
		if p.Version == "" {
			names = append(names, p.Name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	out, err := x.output(ctx, ws, aptEnv, append([]string{"apt-cache", "policy"}, names...)...)
	if err != nil {
		return fmt.Errorf("asking apt for the versions of %s: %w", strings.Join(names, ", "), err)
	}
	policies, err := pkgdb.ParseAptPolicy(out)
	if err != nil {
		return fmt.Errorf("reading apt-cache policy: %w", err)
	}
	for i := range op.Install {
		p := &op.Install[i]
		if p.Version != "" {
			continue
		}
		var c version.Constraint
		if p.Constraint != "" {
			if c, err = version.ParseConstraint(p.Constraint); err != nil {
				return fmt.Errorf("package %s: %w", p.Name, err)
			}
		}
		best := ""
		for _, pol := range policies {
			if pol.Name != p.Name {
				continue
			}
			for _, v := range pol.Versions {
				up, err := version.FromDebian(v.Version)
				if err != nil || !c.Check(up) {
					continue
				}
				if best == "" {
					best = v.Version
				} else if cmp, err := version.CompareDebian(v.Version, best); err == nil && cmp > 0 {
					best = v.Version
				}
			}
		}
		if best == "" {
			return fmt.Errorf("apt lists no version of %s that satisfies %q, even with the plan's repositories configured", p.Name, p.Constraint)
		}
		ws.say("%s: pinned %s=%s, the newest version apt lists that satisfies %q", "apt", p.Name, best, p.Constraint)
		p.Version = best
	}
	return nil
}

// pinExactDependencies adds to the transaction the packages its pins depend
// on at one exact version. Debian's driver packages depend on each other
// with "(= version)": installing nvidia-smi=535.261.03-1 while the archive's
// candidate for nvidia-alternative is 535.309.01 leaves apt unable to
// resolve the transaction, since apt takes candidates for what is not
// pinned. Pinning them too installs the consistent set the plan asked for.
// A pin apt cannot show (a version no longer in the archive) is left as it
// is: the dry run that follows reports what apt cannot do.
func (x aptManager) pinExactDependencies(ctx context.Context, ws *Workspace, op *planner.PackagesOp) {
	pinned := map[string]bool{}
	for _, p := range op.Install {
		pinned[p.Name] = true
	}
	for i := 0; i < len(op.Install); i++ {
		p := op.Install[i]
		out, err := x.output(ctx, ws, aptEnv, "apt-cache", "show", p.Name+"="+p.Version)
		if err != nil {
			continue
		}
		for _, dep := range exactDependencies(out) {
			if pinned[dep.Name] {
				continue
			}
			pinned[dep.Name] = true
			ws.say("apt: pinning %s=%s, which %s %s depends on exactly", dep.Name, dep.Version, p.Name, p.Version)
			op.Install = append(op.Install, dep)
		}
	}
}

// exactDependencies reads the first paragraph of apt-cache show and returns
// the dependencies (Depends, Pre-Depends) that name one package at one
// exact version, without alternatives.
func exactDependencies(show []byte) []planner.PackagePin {
	var out []planner.PackagePin
	fields := map[string]string{}
	var last string
	for _, line := range strings.Split(string(show), "\n") {
		if line == "" {
			break
		}
		if line[0] == ' ' || line[0] == '\t' {
			if last != "" {
				fields[last] += " " + strings.TrimSpace(line)
			}
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			last = ""
			continue
		}
		last = k
		fields[k] = strings.TrimSpace(v)
	}
	for _, field := range []string{"Pre-Depends", "Depends"} {
		for _, rel := range strings.Split(fields[field], ",") {
			rel = strings.TrimSpace(rel)
			if rel == "" || strings.Contains(rel, "|") {
				continue
			}
			name, cond, ok := strings.Cut(rel, "(")
			if !ok {
				continue
			}
			cond = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(cond), ")"))
			v, exact := strings.CutPrefix(cond, "=")
			if !exact {
				continue
			}
			name, _, _ = strings.Cut(strings.TrimSpace(name), ":")
			v = strings.TrimSpace(v)
			if name == "" || v == "" || strings.ContainsAny(name+v, " []") {
				continue
			}
			out = append(out, planner.PackagePin{Name: name, Version: v})
		}
	}
	return out
}
