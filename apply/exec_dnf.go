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
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpuenv/gpuenv/internal/childproc"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/pkgdb"
)

// What dnf 4 keeps where. dnf takes its lock on the RPM database by
// writing its pid into rpmdb_lock.pid in its persistdir (flock is held
// only while the file is read and written): a file naming a live process
// is a held lock, one naming a dead process is taken over by the next
// dnf.
const dnfRpmdbLock = "/var/lib/dnf/rpmdb_lock.pid"

// hostCommand is a command whose output goes where the caller reads it.
func hostCommand(argv, env []string, stdout, stderr io.Writer) host.Command {
	return host.Command{Argv: argv, Env: env, Stdout: stdout, Stderr: stderr}
}

// dnfEnv makes dnf's messages the ones this file recognises.
var dnfEnv = []string{"LC_ALL=C"}

// dnfBase are the options of every dnf run: no questions, exit rather
// than wait forever when another dnf holds the RPM database (the wait is
// done here, bounded, with a message), and no weak dependencies, as apt
// runs without recommends. Package arguments follow a "--" in every dnf
// command, so that dnf's argument parser (argparse) reads none of them as
// an option: an argument starting with "-" is then an error, never an
// option.
var dnfBase = []string{"dnf", "-y", "--setopt=exit_on_lock=True", "--setopt=install_weak_deps=False"}

// dnfOffline keeps dnf off every repository: versionlock and installs
// from saved package files work without a network.
const dnfOffline = "--disablerepo=*"

// rpmPkg is one installed instance of a package. A name can be
// installed more than once (kernels and other install-only packages,
// several architectures).
type rpmPkg struct {
	Name, Arch string
	// EVR is "epoch:version-release", the epoch left out when 0, as dnf
	// list prints versions and plans pin them.
	EVR string
}

func (p rpmPkg) nevra() string {
	e, vr, ok := strings.Cut(p.EVR, ":")
	if !ok {
		e, vr = "0", p.EVR
	}
	return p.Name + "-" + e + ":" + vr + "." + p.Arch
}

// normEVR drops a zero epoch so that "0:1.0-1" and "1.0-1" compare equal.
func normEVR(v string) string { return strings.TrimPrefix(v, "0:") }

// readRPM lists the installed packages by name, from rpm's database in
// the root.
func (x dnfManager) readRPM(ctx context.Context, ws *Workspace) (map[string][]rpmPkg, error) {
	var out bytes.Buffer
	var errb childproc.Tail
	if err := x.Host.Run(ctx, hostCommand(pkgdb.RPMQuery(), dnfEnv, &out, &errb)); err != nil {
		fmt.Fprintf(ws.Log, "$ rpm -qa --qf …\n%s\ngpuenv: %v\n", errb.Text(0), err)
		return nil, fmt.Errorf("reading the RPM database: %w: %s", err, errb.Text(0))
	}
	return parseRPMQuery(out.Bytes())
}

// parseRPMQuery reads pkgdb.RPMQuery's output into the installed
// instances of each package, sorted by version and architecture; output
// it cannot read is an error.
func parseRPMQuery(data []byte) (map[string][]rpmPkg, error) {
	_, pkgs, problems := pkgdb.ParseRPM(data, nil)
	if len(problems) > 0 {
		return nil, fmt.Errorf("rpm -qa %s", problems[0])
	}
	m := map[string][]rpmPkg{}
	for _, p := range pkgs {
		m[p.Name] = append(m[p.Name], rpmPkg{Name: p.Name, Arch: p.Architecture, EVR: p.Version})
	}
	for _, l := range m {
		sort.Slice(l, func(i, j int) bool { return l[i].EVR+l[i].Arch < l[j].EVR+l[j].Arch })
	}
	return m, nil
}

func evrs(l []rpmPkg) []string {
	var out []string
	for _, p := range l {
		if !slices.Contains(out, p.EVR) {
			out = append(out, p.EVR)
		}
	}
	return out
}

// versionlocks is the versionlock plugin's state: whether dnf has the
// plugin, and its lock entries ("name-0:2.0-1.*"; exclusions left out).
type versionlocks struct {
	present bool
	entries []string
}

// readVersionlocks asks dnf itself, which knows whether the plugin is
// installed and enabled and where its list is. Repositories are left
// off: the list needs none, and a rollback may run offline.
func (x dnfManager) readVersionlocks(ctx context.Context, ws *Workspace) (versionlocks, error) {
	var out bytes.Buffer
	var errb childproc.Tail
	argv := []string{"dnf", "--quiet", dnfOffline, "versionlock", "list"}
	fmt.Fprintf(ws.Log, "$ %s\n", strings.Join(argv, " "))
	err := x.Host.Run(ctx, hostCommand(argv, dnfEnv, &out, io.MultiWriter(ws.Log, &errb)))
	if err != nil {
		if strings.Contains(string(errb.Bytes())+out.String(), "No such command: versionlock") {
			return versionlocks{}, nil
		}
		return versionlocks{}, fmt.Errorf("listing dnf's version locks: %w: %s", err, errb.Text(0))
	}
	return versionlocks{present: true, entries: pkgdb.ParseVersionlock(out.Bytes())}, nil
}

// locked reports whether an entry locks an installed instance of name
// (pkgdb.Locked), or names it bare, installed or not.
func (v versionlocks) locked(installed []rpmPkg, name string) bool {
	if slices.Contains(v.entries, name) {
		return true
	}
	return slices.ContainsFunc(installed, func(p rpmPkg) bool {
		return pkgdb.Locked(v.entries, facts.Package{Name: p.Name, Version: p.EVR, Architecture: p.Arch})
	})
}

// names reports whether an entry locks some version of name, installed
// or not (pkgdb.LocksName).
func (v versionlocks) names(name string) bool { return pkgdb.LocksName(v.entries, name) }

// dnfTable reads the package names out of the transaction table dnf
// prints before asking to go on ("Installing:", "Upgrading:",
// "Removing dependent packages:" …): rows are " name arch version repo
// size", dnf widening the name column for a long name (and wrapping the
// end of a row that no longer fits, which leaves short lines that are
// not rows); an obsoleted package is a row "     replacing  name.arch
// version". The "Skipping packages …" sections list what does not
// change.
func dnfTable(out []byte) []string {
	var names []string
	in := false
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "Transaction Summary") {
			in = false
			continue
		}
		if strings.HasPrefix(line, "(") {
			// The explanation under a "Skipping" heading.
			continue
		}
		if !strings.HasPrefix(line, " ") && strings.HasSuffix(strings.TrimSpace(line), ":") && !strings.HasPrefix(line, "Error") {
			in = !strings.HasPrefix(line, "Skipping")
			continue
		}
		if !in || !strings.HasPrefix(line, " ") {
			continue
		}
		f := strings.Fields(line)
		switch {
		case len(f) >= 3 && f[0] == "replacing":
			n := f[1]
			if i := strings.LastIndexByte(n, '.'); i > 0 {
				n = n[:i]
			}
			names = append(names, n)
		case len(f) >= 4:
			names = append(names, f[0])
		}
	}
	return names
}

// dnfDryRun runs a transaction with --assumeno: dnf resolves it, prints
// the table and exits 1 with "Operation aborted.", changing nothing. An
// error message instead means the transaction cannot be done.
func (x dnfManager) dnfDryRun(ctx context.Context, ws *Workspace, args []string) ([]string, error) {
	argv := slices.Concat([]string{"dnf", "--assumeno", "--setopt=exit_on_lock=True", "--setopt=install_weak_deps=False"}, args)
	out, err := x.dnfOutput(ctx, ws, argv)
	text := string(out)
	if strings.Contains(text, "Operation aborted.") || (err == nil && !strings.Contains(text, "Error:")) {
		return dnfTable(out), nil
	}
	if err == nil {
		err = errors.New("dnf reported an error")
	}
	return nil, fmt.Errorf("dnf cannot carry out the transaction (dry run failed; see %s): %w", ws.Dir+"/"+logName, err)
}

// installCommand is dnf's command for op's pins: install moves a package
// to the pinned version; reinstall (-replace) puts the installed version
// back, which install would leave alone.
func installCommand(op *plan.PackagesOp) string {
	if op.Reinstall {
		return "reinstall"
	}
	return "install"
}

func pinSpecs(op *plan.PackagesOp) []string {
	var s []string
	for _, p := range op.Install {
		s = append(s, p.Name+"-"+p.Version)
	}
	return s
}

// dnfManager carries out dnf transactions; held packages are dnf's
// versionlocks.
type dnfManager struct{ *HostExecutor }

var _ packageManager = dnfManager{}

func (x dnfManager) waitLock(ctx context.Context, ws *Workspace) error {
	return x.waitDnfLock(ctx, ws, time.Now().Add(x.lockTimeout()))
}

// pinPending does nothing: dnf's pins are exact when planned.
func (dnfManager) pinPending(context.Context, *Workspace, *plan.PackagesOp) error { return nil }

func (x dnfManager) readPrior(ctx context.Context, ws *Workspace, op *plan.PackagesOp, _ *PackagesInverse) (priorState, error) {
	before, err := x.readRPM(ctx, ws)
	if err != nil {
		return nil, err
	}
	locks, err := x.readVersionlocks(ctx, ws)
	if err != nil {
		return nil, err
	}
	if !locks.present && len(op.Hold)+len(op.Unhold) > 0 {
		return nil, fmt.Errorf("cannot hold or release %s: dnf's versionlock plugin is not installed or not enabled (install python3-dnf-plugin-versionlock, or leave holds out of the spec)",
			strings.Join(slices.Concat(op.Hold, op.Unhold), ", "))
	}
	return &dnfPrior{x: x, before: before, locks: locks}, nil
}

// dnfPrior is the RPM database and dnf's versionlocks before a dnf
// transaction.
type dnfPrior struct {
	x      dnfManager
	before map[string][]rpmPkg
	locks  versionlocks
	// releasing is set when the transaction releases a lock on a package
	// it pins.
	releasing bool
	// saved are the package files saveAll kept, by NEVRA.
	saved map[string]savedFile
}

var _ batchSaver = (*dnfPrior)(nil)

// saveAll keeps the package files of every installed instance of the
// packages the transaction changes with one dnf download: each dnf run
// spends seconds starting. When it fails, nothing is lost: prior saves
// each package on its own, and says which one no repository has.
func (d *dnfPrior) saveAll(ctx context.Context, ws *Workspace, seq int, names []string) error {
	var pkgs []rpmPkg
	for _, n := range names {
		pkgs = append(pkgs, d.before[n]...)
	}
	if len(pkgs) < 2 {
		return nil
	}
	saved, err := d.x.saveRPMs(ctx, ws, seq, pkgs)
	if err != nil {
		fmt.Fprintf(ws.Log, "gpuenv: saving the package files at once failed (%v); saving them one by one\n", err)
		return nil
	}
	d.saved = saved
	return nil
}

func (d *dnfPrior) direct(op *plan.PackagesOp) (affected, changes []string, err error) {
	affected = slices.Concat(op.Remove, op.Hold, op.Unhold)
	for _, p := range op.Install {
		affected = append(affected, p.Name)
		cur := evrs(d.before[p.Name])
		if len(cur) > 0 && (op.Reinstall || !(len(cur) == 1 && normEVR(cur[0]) == normEVR(p.Version))) {
			changes = append(changes, p.Name)
			// A versionlock admits the locked version, which is all a
			// reinstall puts back.
			if !op.Reinstall && d.locks.locked(d.before[p.Name], p.Name) {
				if !slices.Contains(op.Unhold, p.Name) && !slices.Contains(op.Hold, p.Name) {
					return nil, nil, fmt.Errorf("package %s is locked at %s (dnf versionlock) and the plan does not release it", p.Name, strings.Join(cur, ", "))
				}
				d.releasing = true
			}
		}
	}
	for _, r := range op.Remove {
		if len(d.before[r]) > 0 {
			changes = append(changes, r)
		}
	}
	return affected, changes, nil
}

func (d *dnfPrior) simulate(ctx context.Context, ws *Workspace, op *plan.PackagesOp) ([]string, error) {
	var listed []string
	if len(op.Remove) > 0 {
		l, err := d.x.dnfDryRun(ctx, ws, slices.Concat([]string{dnfOffline, "remove", "--"}, op.Remove))
		if err != nil {
			return nil, err
		}
		listed = append(listed, l...)
	}
	if len(op.Install) > 0 {
		sub := installCommand(op)
		args := []string{sub, "--"}
		if d.releasing {
			// The locks the plan releases are released before the real
			// transaction; with them in place dnf would not see the
			// pinned version at all.
			args = []string{"--disableplugin=versionlock", sub, "--"}
		}
		l, err := d.x.dnfDryRun(ctx, ws, slices.Concat(args, pinSpecs(op)))
		if err != nil {
			return nil, err
		}
		listed = append(listed, l...)
	}
	return listed, nil
}

func (d *dnfPrior) changes(name string) bool { return len(d.before[name]) > 0 }

// prior records each installed version of a package (an interrupted
// transaction may leave two), or its absence.
func (d *dnfPrior) prior(ctx context.Context, ws *Workspace, seq int, name string, changed bool) ([]PriorPackage, error) {
	if len(d.before[name]) == 0 {
		return []PriorPackage{{Name: name}}, nil
	}
	held := d.locks.locked(d.before[name], name)
	var out []PriorPackage
	for _, p := range d.before[name] {
		pp := PriorPackage{Name: name, Version: p.EVR, Status: p.Arch, Held: held}
		if changed {
			saved, ok := d.saved[p.nevra()]
			if !ok {
				var err error
				if saved, err = d.x.saveRPM(ctx, ws, seq, p); err != nil {
					return nil, err
				}
			}
			pp.Saved, pp.SHA256, pp.Size = saved.path, saved.sha256, saved.size
		}
		out = append(out, pp)
	}
	return out, nil
}

func (d *dnfPrior) finish(*PackagesInverse, map[string]bool) {}

// check does nothing: undo checks a dnf transaction, comparing each
// package with its prior versions.
func (dnfManager) check(context.Context, *Workspace, []Expectation) error { return nil }

// saveRPM keeps an installed package as its .rpm in the generation,
// downloaded from the repositories by its exact NEVRA. The package cache
// is not relied on (images clean it; keepcache is off by default), and an
// RPM cannot be rebuilt faithfully from installed files with the tools a
// host has (rpmrebuild is not in the distributions' base repositories):
// when no repository has the version any more, the transaction is
// refused rather than made impossible to roll back offline.
func (x dnfManager) saveRPM(ctx context.Context, ws *Workspace, seq int, p rpmPkg) (savedFile, error) {
	sub := path.Join(packagesDir, strconv.Itoa(seq)+"-"+p.Name)
	dir := filepath.Join(ws.Path, sub)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return savedFile{}, err
	}
	inRoot := path.Join(ws.Dir, sub)
	file := rpmFileName(p)
	argv := []string{"dnf", "--setopt=exit_on_lock=True", "download", "--destdir", inRoot, "--", p.nevra()}
	if err := x.dnfRun(ctx, ws, time.Now().Add(x.lockTimeout()), argv); err != nil {
		return savedFile{}, fmt.Errorf("cannot save %s %s for rollback: dnf download failed (see %s; the enabled repositories may not carry that version any more), and a package removed or replaced without its file could not be restored offline. Enable a repository that still carries it, or change the package by hand: %w",
			p.Name, p.EVR, ws.Dir+"/"+logName, err)
	}
	sum, size, err := fileDigest(filepath.Join(dir, file))
	if err != nil {
		return savedFile{}, fmt.Errorf("cannot save %s %s for rollback: dnf download wrote no %s: %w", p.Name, p.EVR, file, err)
	}
	return savedFile{path.Join(inRoot, file), sum, size}, syncDir(dir)
}

// checkSavedRPM checks p's saved file against the digest recorded when
// it was saved, before undo installs anything, and returns p with Saved
// the file to install. A file that is not the one saved is downloaded
// again from the repositories (dnf checks it against their metadata);
// where none has the version, the error names the file. A missing file
// is left, as before, to dnf to install from the repositories by name; a
// file saved before digests were recorded is used as it is.
func (x dnfManager) checkSavedRPM(ctx context.Context, ws *Workspace, p PriorPackage) (PriorPackage, error) {
	if p.Saved == "" || p.Version == "" {
		return p, nil
	}
	local, err := x.Host.Resolve(p.Saved)
	if err != nil {
		return p, fmt.Errorf("the package file saved for %s %s, %s: %w", p.Name, p.Version, p.Saved, err)
	}
	vd := judgeSaved("dnf", p, local, "", nil)
	switch {
	case vd.ok:
		if vd.note != "" {
			fmt.Fprintf(ws.Log, "gpuenv: using %s: %s\n", p.Saved, vd.note)
		}
		return p, nil
	case vd.bad.Missing:
		return p, nil
	}
	f, err := x.saveRPM(ctx, ws, refetchSeq, rpmPkg{Name: p.Name, EVR: p.Version, Arch: p.Status})
	if err != nil {
		vd.bad.Refetch = fmt.Sprintf("dnf download %s failed (see %s)", rpmPkg{Name: p.Name, EVR: p.Version, Arch: p.Status}.nevra(), ws.Dir+"/"+logName)
		return p, vd.bad
	}
	ws.say("%s: downloaded it again from the repositories as %s (SHA-256 %s)", vd.bad.problem(), f.path, f.sha256)
	p.Saved, p.SHA256, p.Size = f.path, f.sha256, f.size
	return p, nil
}

// saveRPMs keeps the installed packages pkgs as their .rpm files in the
// generation, each where saveRPM would put it, with one dnf download into
// a directory of the generation's from which they are moved. It returns
// the files in the root by NEVRA.
func (x dnfManager) saveRPMs(ctx context.Context, ws *Workspace, seq int, pkgs []rpmPkg) (map[string]savedFile, error) {
	staging := path.Join(packagesDir, strconv.Itoa(seq)+"-download")
	if err := os.MkdirAll(filepath.Join(ws.Path, staging), 0o700); err != nil {
		return nil, err
	}
	defer os.RemoveAll(filepath.Join(ws.Path, staging))
	argv := []string{"dnf", "--setopt=exit_on_lock=True", "download", "--destdir", path.Join(ws.Dir, staging), "--"}
	for _, p := range pkgs {
		argv = append(argv, p.nevra())
	}
	if err := x.dnfRun(ctx, ws, time.Now().Add(x.lockTimeout()), argv); err != nil {
		return nil, err
	}
	saved := map[string]savedFile{}
	for _, p := range pkgs {
		sub := path.Join(packagesDir, strconv.Itoa(seq)+"-"+p.Name)
		file := rpmFileName(p)
		dir := filepath.Join(ws.Path, sub)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		if err := os.Rename(filepath.Join(ws.Path, staging, file), filepath.Join(dir, file)); err != nil {
			return nil, fmt.Errorf("dnf download wrote no %s: %w", file, err)
		}
		sum, size, err := fileDigest(filepath.Join(dir, file))
		if err != nil {
			return nil, err
		}
		if err := syncDir(dir); err != nil {
			return nil, err
		}
		saved[p.nevra()] = savedFile{path.Join(ws.Dir, sub, file), sum, size}
	}
	return saved, nil
}

// rpmFileName is the file dnf download writes for p:
// name-version-release.arch.rpm, without the epoch.
func rpmFileName(p rpmPkg) string {
	_, vr, ok := strings.Cut(p.EVR, ":")
	if !ok {
		vr = p.EVR
	}
	return p.Name + "-" + vr + "." + p.Arch + ".rpm"
}

// waitDnfLock waits, up to deadline, for another dnf (dnf-automatic, a
// dnf in another terminal) to release the RPM database, saying who holds
// it.
func (x dnfManager) waitDnfLock(ctx context.Context, ws *Workspace, deadline time.Time) error {
	return waitForLock(ctx, ws, deadline,
		func() (int, bool, error) {
			pid := x.dnfLockHolder()
			return pid, pid != 0, nil
		},
		func(holder string) {
			ws.say("waiting up to %s for dnf's lock %s, held by %s", time.Until(deadline).Round(time.Second), dnfRpmdbLock, holder)
		},
		func(pid int) error {
			return fmt.Errorf("dnf's lock %s is still held by process %d after %s; another package manager (dnf-automatic?) is running", dnfRpmdbLock, pid, x.lockTimeout())
		})
}

// dnfLockHolder is the pid of the live process holding dnf's lock, 0
// when none does. The process is looked for on this machine: a dnf
// running in a chroot is one of its processes too.
func (x dnfManager) dnfLockHolder() int {
	data, err := x.Host.ReadFile(dnfRpmdbLock)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return 0
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d/stat", pid)); errors.Is(err, fs.ErrNotExist) {
		return 0
	}
	return pid
}

// dnfRun runs a dnf command with its output in the log. dnf runs with
// exit_on_lock, so a lock taken between the wait and its start makes it
// exit at once; it is then run again after another wait, until deadline.
func (x dnfManager) dnfRun(ctx context.Context, ws *Workspace, deadline time.Time, argv []string) error {
	_, err := x.dnfLoop(ctx, ws, deadline, argv, nil)
	return err
}

// dnfOn runs dnf with args on pkgs, given after a "--" so that no name is
// read as an option; with no pkgs it runs nothing.
func (x dnfManager) dnfOn(ctx context.Context, ws *Workspace, deadline time.Time, pkgs []string, args ...string) error {
	if len(pkgs) == 0 {
		return nil
	}
	return x.dnfRun(ctx, ws, deadline, slices.Concat(dnfBase, args, []string{"--"}, pkgs))
}

// dnfOutput runs argv once the lock is free and returns its output.
func (x dnfManager) dnfOutput(ctx context.Context, ws *Workspace, argv []string) ([]byte, error) {
	var out bytes.Buffer
	_, err := x.dnfLoop(ctx, ws, time.Now().Add(x.lockTimeout()), argv, &out)
	return out.Bytes(), err
}

func (x dnfManager) dnfLoop(ctx context.Context, ws *Workspace, deadline time.Time, argv []string, capture *bytes.Buffer) (int, error) {
	for try := 1; ; try++ {
		if err := x.waitDnfLock(ctx, ws, deadline); err != nil {
			return try, err
		}
		// dnf says a lock is held at the end of what it prints.
		var seen childproc.Tail
		w := io.MultiWriter(ws.Log, &seen)
		if capture != nil {
			capture.Reset()
			w = io.MultiWriter(ws.Log, &seen, capture)
		}
		fmt.Fprintf(ws.Log, "$ %s\n", strings.Join(argv, " "))
		err := x.Host.Run(ctx, hostCommand(argv, dnfEnv, w, w))
		if err == nil {
			return try, nil
		}
		fmt.Fprintf(ws.Log, "gpuenv: %v\n", err)
		if !strings.Contains(string(seen.Bytes()), "already locked by") || time.Now().After(deadline) {
			return try, err
		}
	}
}

func (x dnfManager) run(ctx context.Context, ws *Workspace, op *plan.PackagesOp) error {
	deadline := time.Now().Add(x.lockTimeout())
	if err := x.waitDnfLock(ctx, ws, deadline); err != nil {
		return err
	}
	before, err := x.readRPM(ctx, ws)
	if err != nil {
		return err
	}
	if len(op.Hold)+len(op.Unhold) > 0 || len(op.Install) > 0 {
		locks, err := x.readVersionlocks(ctx, ws)
		if err != nil {
			return err
		}
		// A pin of a locked package is released first and locked again
		// after, when the plan holds it.
		var unlock []string
		for _, n := range op.Unhold {
			if locks.locked(before[n], n) {
				unlock = append(unlock, n)
			}
		}
		for _, p := range op.Install {
			cur := evrs(before[p.Name])
			if len(cur) == 1 && normEVR(cur[0]) == normEVR(p.Version) {
				// Already at the pin: dnf leaves it alone, so does its
				// lock, which admits the version a reinstall puts back.
				continue
			}
			if locks.present && locks.locked(before[p.Name], p.Name) && !slices.Contains(unlock, p.Name) {
				unlock = append(unlock, p.Name)
			}
		}
		if err := x.dnfOn(ctx, ws, deadline, unlock, dnfOffline, "versionlock", "delete"); err != nil {
			return err
		}
	}
	// Removals go first: a package replaced by another that conflicts
	// with it (one driver flavour for another) must be gone before its
	// successor goes in.
	if err := x.dnfOn(ctx, ws, deadline, op.Remove, "remove"); err != nil {
		return err
	}
	// dnf install moves an installed package to the pinned version
	// whichever way it lies: upgrade or downgrade.
	if err := x.dnfOn(ctx, ws, deadline, pinSpecs(op), installCommand(op)); err != nil {
		return err
	}
	return x.dnfOn(ctx, ws, deadline, op.Hold, dnfOffline, "versionlock", "add")
}

// undo puts every package the transaction could change back to the
// versions and locks it had: saved package files are installed with
// every repository off, versions that were not there are removed, locks
// set as they were. Only what differs now is touched.
func (x dnfManager) undo(ctx context.Context, ws *Workspace, inv *PackagesInverse) error {
	deadline := time.Now().Add(x.lockTimeout())
	cur, err := x.readRPM(ctx, ws)
	if err != nil {
		return err
	}
	want := map[string][]PriorPackage{}
	var order []string
	for _, p := range inv.Packages {
		if _, ok := want[p.Name]; !ok {
			order = append(order, p.Name)
			want[p.Name] = nil
		}
		if p.Version != "" {
			want[p.Name] = append(want[p.Name], p)
		}
	}
	wanted := func(name, evr string) bool {
		return slices.ContainsFunc(want[name], func(p PriorPackage) bool { return normEVR(p.Version) == normEVR(evr) })
	}
	var files, specs, reinstall, duplicates, keep, dupNames []string
	var errs []error
	changing := map[string]bool{}
	for _, n := range order {
		extra := false
		for _, c := range cur[n] {
			if !wanted(n, c.EVR) {
				extra = true
			}
		}
		var missing []PriorPackage
		for _, p := range want[n] {
			if !slices.ContainsFunc(cur[n], func(c rpmPkg) bool { return normEVR(c.EVR) == normEVR(p.Version) }) {
				missing = append(missing, p)
			}
		}
		if extra || len(missing) > 0 {
			changing[n] = true
		}
		for _, p := range missing {
			p, err := x.checkSavedRPM(ctx, ws, p)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if _, err := x.Host.Stat(p.Saved); p.Saved == "" || err != nil {
				// Pruned by history --keep: a repository may still have it.
				ws.say("the saved package file of %s %s is gone; installing it from the repositories", p.Name, p.Version)
				specs = append(specs, p.Name+"-"+p.Version)
			} else {
				files = append(files, p.Saved)
			}
		}
		if extra && len(missing) == 0 && len(want[n]) > 0 {
			// The wanted version is there beside another: a transaction
			// interrupted between installing the new version and erasing
			// the old leaves both, the files being the new one's. The
			// other goes first (what it requires may be about to change),
			// then the wanted one is reinstalled from its file.
			for _, c := range cur[n] {
				if !wanted(n, c.EVR) {
					duplicates = append(duplicates, c.nevra())
				}
			}
			for _, p := range want[n] {
				p, err := x.checkSavedRPM(ctx, ws, p)
				if err != nil {
					errs = append(errs, err)
					continue
				}
				if _, err := x.Host.Stat(p.Saved); p.Saved != "" && err == nil {
					reinstall = append(reinstall, p.Saved)
					keep = append(keep, rpmPkg{Name: n, Arch: p.Status, EVR: p.Version}.nevra())
				}
			}
			dupNames = append(dupNames, n)
		}
	}
	// Every saved file is checked before anything is installed.
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	locks, err := x.readVersionlocks(ctx, ws)
	if err != nil {
		return err
	}
	lockDiffers := false
	for _, n := range order {
		if len(cur[n]) > 0 && locks.locked(cur[n], n) != slices.ContainsFunc(want[n], func(p PriorPackage) bool { return p.Held }) {
			lockDiffers = true
		}
	}
	if len(changing) == 0 && !lockDiffers {
		return nil
	}
	if err := x.waitDnfLock(ctx, ws, deadline); err != nil {
		return err
	}
	var unlock []string
	for n := range changing {
		if len(cur[n]) > 0 && locks.locked(cur[n], n) {
			unlock = append(unlock, n)
		}
	}
	sort.Strings(unlock)
	if err := x.dnfOn(ctx, ws, deadline, unlock, dnfOffline, "versionlock", "delete"); err != nil {
		return err
	}
	// The config files of a package installed twice hold the newer
	// instance's bytes: the interrupted transaction wrote them. Erasing
	// that instance keeps them (the wanted one owns them too), and the
	// reinstall keeps them as well, since to rpm they are the wanted
	// package's config files edited by hand. Read before the erasure, what
	// rpm recorded of each says which ones to take away for the reinstall
	// to write.
	var configs []rpmConfig
	if len(duplicates) > 0 && len(reinstall) > 0 {
		if configs, err = x.readConfigs(ctx, ws, dupNames); err != nil {
			return err
		}
	}
	if err := x.dnfOn(ctx, ws, deadline, duplicates, dnfOffline, "--noautoremove", "remove"); err != nil {
		return err
	}
	if err := x.dropInterruptedConfigs(ws, configs, duplicates, keep); err != nil {
		return err
	}
	// Old versions go back first, so that nothing left depends on a
	// package removed next. Saved files need no repository.
	if err := x.dnfOn(ctx, ws, deadline, files, dnfOffline, "install"); err != nil {
		return err
	}
	if err := x.dnfOn(ctx, ws, deadline, specs, "install"); err != nil {
		return err
	}
	if cur, err = x.readRPM(ctx, ws); err != nil {
		return err
	}
	var remove []string
	for _, n := range order {
		for _, c := range cur[n] {
			if !wanted(n, c.EVR) {
				remove = append(remove, c.nevra())
			}
		}
	}
	// --noautoremove: dependencies the removed packages pulled in are in
	// the inverse themselves; nothing else may go with them.
	if err := x.dnfOn(ctx, ws, deadline, remove, dnfOffline, "--noautoremove", "remove"); err != nil {
		return err
	}
	if err := x.dnfOn(ctx, ws, deadline, reinstall, dnfOffline, "reinstall"); err != nil {
		return err
	}
	if cur, err = x.readRPM(ctx, ws); err != nil {
		return err
	}
	if locks, err = x.readVersionlocks(ctx, ws); err != nil {
		return err
	}
	var lock, release []string
	for _, n := range order {
		if len(cur[n]) == 0 {
			// A lock added with the package outlives its removal.
			if !slices.ContainsFunc(want[n], func(p PriorPackage) bool { return p.Held }) && locks.names(n) {
				release = append(release, n)
			}
			continue
		}
		held := slices.ContainsFunc(want[n], func(p PriorPackage) bool { return p.Held })
		is := locks.locked(cur[n], n)
		if held && !is {
			lock = append(lock, n)
		} else if !held && is {
			release = append(release, n)
		}
	}
	if (len(lock) > 0 || len(release) > 0) && !locks.present {
		return fmt.Errorf("cannot restore the version locks of %s: dnf's versionlock plugin is not installed any more", strings.Join(slices.Concat(lock, release), ", "))
	}
	if err := x.dnfOn(ctx, ws, deadline, release, dnfOffline, "versionlock", "delete"); err != nil {
		return err
	}
	return x.dnfOn(ctx, ws, deadline, lock, dnfOffline, "versionlock", "add")
}

// rpmConfigQuery prints, for each installed instance of the packages
// named, one line per config file: the instance's NEVRA (epoch always
// given, as rpmPkg.nevra writes it), the digest algorithm of its files
// (rpm's number: 8 is SHA-256), the digest rpm recorded for the file
// and its path. Files that are not config files print "-" for a
// digest-less entry and are told apart by their flags.
const rpmConfigQuery = `[%{=NAME}-%{=EPOCHNUM}:%{=VERSION}-%{=RELEASE}.%{=ARCH}\t%{=FILEDIGESTALGO}\t%{FILEFLAGS:fflags}\t%{FILEDIGESTS}\t%{FILENAMES}\n]`

// rpmConfig is a config file of an installed package instance, with
// the SHA-256 digest (hex) rpm recorded for it.
type rpmConfig struct{ nevra, path, digest string }

// readConfigs lists the config files of every installed instance of the
// packages named whose digests are SHA-256, as rpm's database records
// them.
func (x dnfManager) readConfigs(ctx context.Context, ws *Workspace, names []string) ([]rpmConfig, error) {
	var out, errb bytes.Buffer
	argv := slices.Concat([]string{"rpm", "-q", "--qf", rpmConfigQuery, "--"}, names)
	fmt.Fprintf(ws.Log, "$ rpm -q --qf … -- %s\n", strings.Join(names, " "))
	if err := x.Host.Run(ctx, hostCommand(argv, dnfEnv, &out, &errb)); err != nil {
		ws.Log.Write(errb.Bytes())
		return nil, fmt.Errorf("reading the config files of %s from the RPM database: %w: %s", strings.Join(names, ", "), err, strings.TrimSpace(errb.String()))
	}
	return parseRPMConfigs(out.Bytes()), nil
}

// parseRPMConfigs reads rpmConfigQuery's output: the config files
// (flag c) with a SHA-256 digest.
func parseRPMConfigs(data []byte) []rpmConfig {
	var out []rpmConfig
	for line := range strings.Lines(string(data)) {
		f := strings.SplitN(strings.TrimSuffix(line, "\n"), "\t", 5)
		if len(f) != 5 || f[1] != "8" || !strings.Contains(f[2], "c") || len(f[3]) != 64 || !strings.HasPrefix(f[4], "/") {
			continue
		}
		out = append(out, rpmConfig{nevra: f[0], path: f[4], digest: f[3]})
	}
	return out
}

// dropInterruptedConfigs removes each config file that an erased
// duplicate instance (dups) and a kept one (keep) both own with other
// contents, where the file still holds the duplicate's bytes: the
// reinstall of the kept instance then writes its own. A file edited
// since (its bytes neither instance's) is left alone.
func (x dnfManager) dropInterruptedConfigs(ws *Workspace, configs []rpmConfig, dups, keep []string) error {
	kept := map[string]string{}
	for _, c := range configs {
		if slices.Contains(keep, c.nevra) {
			kept[c.path] = c.digest
		}
	}
	for _, c := range configs {
		k, ok := kept[c.path]
		if !slices.Contains(dups, c.nevra) || !ok || k == c.digest {
			continue
		}
		data, err := x.Host.ReadFile(c.path)
		if err != nil {
			continue
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != c.digest {
			continue
		}
		rp, err := x.real(c.path)
		if err != nil {
			return err
		}
		ws.say("%s holds the bytes %s wrote before the transaction was interrupted; removing it so that the reinstall puts back the previous version's", c.path, c.nevra)
		if err := os.Remove(rp); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing %s, the interrupted transaction's version of a config file: %w", c.path, err)
		}
		if err := syncDir(filepath.Dir(rp)); err != nil {
			return err
		}
	}
	return nil
}

// recover runs before the inverses of a dnf transaction that was
// killed. dnf has no journal to replay (no counterpart of dpkg
// --configure -a): an interrupted RPM transaction leaves at worst a
// package installed twice, old and new, which the inverse resolves. What
// dnf check finds is logged for the record; its status is not an error.
func (x dnfManager) recover(ctx context.Context, ws *Workspace) error {
	deadline := time.Now().Add(x.lockTimeout())
	if err := x.waitDnfLock(ctx, ws, deadline); err != nil {
		return err
	}
	_ = x.dnfRun(ctx, ws, deadline, []string{"dnf", "--setopt=exit_on_lock=True", dnfOffline, "check"})
	return nil
}
