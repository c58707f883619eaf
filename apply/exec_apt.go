package apply

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/gpuenv/gpuenv/providers/repository"
	"github.com/gpuenv/gpuenv/spec/version"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpuenv/gpuenv/planner"
)

// Where dpkg keeps its database and the lock apt front-ends take.
const (
	dpkgStatus       = "/var/lib/dpkg/status"
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

// readDpkg reads every package's version and status from the root's dpkg
// database. Packages of a foreign architecture are keyed name:arch.
func (x *HostExecutor) readDpkg() (map[string]debState, error) {
	data, err := x.Host.ReadFile(dpkgStatus)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]debState{}, nil
	}
	if err != nil {
		return nil, err
	}
	return parseDpkgStatus(data), nil
}

func parseDpkgStatus(data []byte) map[string]debState {
	out := make(map[string]debState)
	var name, arch string
	var st debState
	flush := func() {
		if name != "" {
			k := name
			if _, dup := out[k]; dup && arch != "" {
				k = name + ":" + arch
			}
			out[k] = st
		}
		name, arch, st = "", "", debState{}
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			flush()
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok || strings.HasPrefix(line, " ") {
			continue
		}
		v = strings.TrimSpace(v)
		switch k {
		case "Package":
			name = v
		case "Architecture":
			arch = v
		case "Version":
			st.Version = v
		case "Status":
			st.Status = v
		}
	}
	flush()
	return out
}

// simLine matches what apt-get -s prints for each package it would change.
var simLine = regexp.MustCompile(`^(Inst|Remv|Purg) (\S+)`)

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

func (x *HostExecutor) prepareApt(ctx context.Context, ws *Workspace, seq int, op *planner.PackagesOp) (*PackagesInverse, error) {
	// Another package manager at work would change the state read here;
	// waiting for it now also fails a long wait before anything began.
	if err := x.waitDpkgLock(ctx, ws); err != nil {
		return nil, err
	}
	if err := x.pinPending(ctx, ws, op); err != nil {
		return nil, err
	}
	x.pinExactDependencies(ctx, ws, op)
	before, err := x.readDpkg()
	if err != nil {
		return nil, err
	}
	affected := map[string]bool{}
	for _, p := range op.Install {
		affected[p.Name] = true
	}
	for _, n := range slices.Concat(op.Remove, op.Hold, op.Unhold) {
		affected[n] = true
	}
	changes := map[string]bool{} // packages whose installed version goes
	for _, p := range op.Install {
		if s, ok := before[p.Name]; ok && s.installed() && s.Version != p.Version {
			changes[p.Name] = true
		}
		if s := before[p.Name]; s.held() && !slices.Contains(op.Unhold, p.Name) && !slices.Contains(op.Hold, p.Name) {
			return nil, fmt.Errorf("package %s is held at %s and the plan does not release it", p.Name, s.Version)
		}
	}
	for _, r := range op.Remove {
		if s, ok := before[r]; ok && s.installed() {
			changes[r] = true
		}
	}
	if len(op.Install) > 0 || len(op.Remove) > 0 {
		// The dry run names what apt will change besides the pins:
		// dependencies installed, upgraded or removed with them.
		argv := aptTransaction(op, true)
		for _, p := range op.Install {
			if before[p.Name].held() {
				// Released before the real transaction (checked above);
				// the dry run runs while the hold is still there.
				argv = slices.Insert(argv, 2, "--allow-change-held-packages")
				break
			}
		}
		out, err := x.output(ctx, ws, aptEnv, argv...)
		if err != nil {
			return nil, fmt.Errorf("apt-get cannot carry out the transaction (dry run failed; see %s): %w", ws.Dir+"/"+logName, err)
		}
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			if m := simLine.FindStringSubmatch(sc.Text()); m != nil {
				name := strings.TrimSuffix(m[2], ":"+hostArch(before, m[2]))
				affected[name] = true
				if s, ok := before[name]; ok && s.installed() {
					changes[name] = true
				}
			}
		}
	}
	inv := &PackagesInverse{Manager: "apt"}
	names := make([]string, 0, len(affected))
	for n := range affected {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		s := before[n]
		pp := PriorPackage{Name: n, Status: s.Status, Held: s.held()}
		if s.installed() {
			pp.Version = s.Version
		}
		if changes[n] {
			saved, err := x.saveDeb(ctx, ws, seq, n, s.Version)
			if err != nil {
				return nil, err
			}
			pp.Saved = saved
		}
		inv.Packages = append(inv.Packages, pp)
	}
	return inv, nil
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
func (x *HostExecutor) saveDeb(ctx context.Context, ws *Workspace, seq int, name, version string) (string, error) {
	sub := path.Join(packagesDir, strconv.Itoa(seq)+"-"+name)
	dir := filepath.Join(ws.Path, sub)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	inRoot := path.Join(ws.Dir, sub)
	find := func() string {
		m, _ := filepath.Glob(filepath.Join(dir, "*.deb"))
		if len(m) == 1 {
			return path.Join(inRoot, filepath.Base(m[0]))
		}
		return ""
	}
	// apt-get download and dpkg-repack write into the working directory;
	// env -C sets it without a shell.
	if err := x.run(ctx, ws, aptEnv, "env", "-C", inRoot, "apt-get", "download", name+"="+version); err == nil {
		if f := find(); f != "" {
			return f, syncDir(dir)
		}
	}
	ws.say("%s %s is not in the archive any more: rebuilding it from the installed files with dpkg-repack", name, version)
	if err := x.run(ctx, ws, aptEnv, "env", "-C", inRoot, "dpkg-repack", name); err != nil {
		return "", fmt.Errorf("cannot save %s %s for rollback (apt-get download and dpkg-repack failed; see %s): %w", name, version, ws.Dir+"/"+logName, err)
	}
	f := find()
	if f == "" {
		return "", fmt.Errorf("cannot save %s %s for rollback: dpkg-repack wrote no package file", name, version)
	}
	return f, syncDir(dir)
}

// waitDpkgLock waits, up to the timeout, for another package manager
// (unattended-upgrades, an apt run in another terminal) to release dpkg's
// front-end lock, saying who holds it. apt-get is also given the same
// timeout, so a lock taken again between the check and its start is
// waited for too.
func (x *HostExecutor) waitDpkgLock(ctx context.Context, ws *Workspace) error {
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
	deadline := time.Now().Add(timeout)
	said := false
	for {
		lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0}
		if err := unix.FcntlFlock(f.Fd(), unix.F_GETLK, &lk); err != nil {
			return fmt.Errorf("checking dpkg's lock %s: %w", dpkgLockFrontend, err)
		}
		if lk.Type == unix.F_UNLCK {
			return nil
		}
		if !said {
			holder := "another process"
			if lk.Pid > 0 {
				holder = "process " + strconv.Itoa(int(lk.Pid))
				if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", lk.Pid)); err == nil {
					holder += " (" + strings.TrimSpace(string(comm)) + ")"
				}
			}
			ws.say("waiting up to %s for dpkg's lock %s, held by %s", timeout, dpkgLockFrontend, holder)
			said = true
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("dpkg's lock %s is still held after %s; another package manager (unattended-upgrades?) is running", dpkgLockFrontend, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (x *HostExecutor) lockTimeout() time.Duration {
	if x.PackageLockTimeout > 0 {
		return x.PackageLockTimeout
	}
	return DefaultPackageLockTimeout
}

func (x *HostExecutor) aptLockOption() []string {
	return []string{"-o", fmt.Sprintf("DPkg::Lock::Timeout=%d", int(x.lockTimeout().Seconds()))}
}

func (x *HostExecutor) runApt(ctx context.Context, ws *Workspace, op *planner.PackagesOp) error {
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
		if err := x.run(ctx, ws, aptEnv, append([]string{"apt-mark", "unhold"}, unhold...)...); err != nil {
			return err
		}
	}
	if len(op.Install) > 0 || len(op.Remove) > 0 {
		argv := aptTransaction(op, false)
		argv = slices.Insert(argv, 1, x.aptLockOption()...)
		if err := x.run(ctx, ws, aptEnv, argv...); err != nil {
			return err
		}
	}
	if len(op.Hold) > 0 {
		return x.run(ctx, ws, aptEnv, append([]string{"apt-mark", "hold"}, op.Hold...)...)
	}
	return nil
}

// undoApt puts every package the transaction could change back to its
// version, presence and hold from before: saved package files are
// installed (offline), packages that were absent are removed, holds set
// as they were. Only what differs now is touched.
func (x *HostExecutor) undoApt(ctx context.Context, ws *Workspace, inv *PackagesInverse) error {
	cur, err := x.readDpkg()
	if err != nil {
		return err
	}
	var debs, remove, purge, unhold []string
	for _, p := range inv.Packages {
		c := cur[p.Name]
		switch {
		case p.Version == "" && c.installed():
			if strings.HasSuffix(p.Status, "config-files") {
				remove = append(remove, p.Name)
			} else {
				purge = append(purge, p.Name)
			}
		case p.Version != "" && (!c.installed() || c.Version != p.Version):
			if _, err := x.Host.Stat(p.Saved); p.Saved == "" || err != nil {
				// Pruned by history --keep: the archive may still have it.
				ws.say("the saved package file of %s %s is gone; installing it from the archive", p.Name, p.Version)
				debs = append(debs, p.Name+"="+p.Version)
			} else {
				debs = append(debs, p.Saved)
			}
		default:
			continue
		}
		if c.held() {
			unhold = append(unhold, p.Name)
		}
	}
	holdsDiffer := false
	for _, p := range inv.Packages {
		if c := cur[p.Name]; c.installed() && p.Held != c.held() {
			holdsDiffer = true
		}
	}
	if len(debs)+len(remove)+len(purge) == 0 && !holdsDiffer {
		// Already as it was: nothing to wait for or run.
		return nil
	}
	if err := x.waitDpkgLock(ctx, ws); err != nil {
		return err
	}
	if len(unhold) > 0 {
		if err := x.run(ctx, ws, aptEnv, append([]string{"apt-mark", "unhold"}, unhold...)...); err != nil {
			return err
		}
	}
	// Old versions go back first, so that nothing left depends on a
	// package removed next.
	if len(debs) > 0 {
		argv := append([]string{"apt-get"}, x.aptLockOption()...)
		argv = append(argv, "-y", "-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold",
			"install", "--no-install-recommends", "--allow-downgrades", "--allow-change-held-packages")
		if err := x.run(ctx, ws, aptEnv, append(argv, debs...)...); err != nil {
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
		argv = append(argv, "-y", set.verb)
		if err := x.run(ctx, ws, aptEnv, append(argv, set.names...)...); err != nil {
			return err
		}
	}
	cur, err = x.readDpkg()
	if err != nil {
		return err
	}
	var hold []string
	unhold = nil
	for _, p := range inv.Packages {
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
		if err := x.run(ctx, ws, aptEnv, append([]string{"apt-mark", "unhold"}, unhold...)...); err != nil {
			return err
		}
	}
	if len(hold) > 0 {
		return x.run(ctx, ws, aptEnv, append([]string{"apt-mark", "hold"}, hold...)...)
	}
	return nil
}

// pinPending fixes the versions the plan could only learn after apply: the
// repositories its earlier steps configured are in place now, so apt lists
// their packages. Each pin gets the newest listed version that satisfies
// its constraint; the journal then records that exact version.
func (x *HostExecutor) pinPending(ctx context.Context, ws *Workspace, op *planner.PackagesOp) error {
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
	policies, err := repository.ParseAptPolicy(out)
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
func (x *HostExecutor) pinExactDependencies(ctx context.Context, ws *Workspace, op *planner.PackagesOp) {
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
