package applytest

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpuenv/gpuenv/providers/host"
)

// The fake dnf (dnf 4's command line as gpuenv uses it): install
// (upgrades and downgrades to the version given, and installs local
// .rpm files), remove (with the installed packages that require what is
// removed), reinstall, download --destdir, check, --assumeno dry runs
// printing dnf's transaction table, and the versionlock plugin's add,
// delete and list, present when /etc/dnf/plugins/versionlock.conf says
// enabled. Its one repository is EnvRPMRepo's directory; --disablerepo=*
// turns it off. The RPM database lock /var/lib/dnf/rpmdb_lock.pid is
// honoured the way dnf does: a live pid in it is a held lock, which
// --setopt=exit_on_lock=True turns into exit status 200.
//
// Failing on demand: besides the "dnf" and "dnf:SUB" entries every fake
// takes (failing before anything, dry runs included), "dnf:SUB@run"
// fails the first real (not dry-run) run of SUB before it changes
// anything, where SUB is install, remove, reinstall, versionlock-add or
// versionlock-delete, and "dnf:SUB:PKG@run" the first such run whose
// arguments name PKG; "dnf:install@half" leaves the last package of an
// install installed beside the version it replaces, as a killed RPM
// transaction does, and fails.
//
// Not modelled: weak dependencies, obsoletes, install-only packages, and
// the removal of dependencies nothing needs any more
// (clean_requirements_on_remove), since the fixtures mark none as
// such.

// DefaultLocklist is where the versionlock plugin keeps its list.
const DefaultLocklist = "/etc/dnf/plugins/versionlock.list"

// VersionlockConf is the plugin's configuration; the fake plugin is
// present when it exists and says enabled = 1.
const VersionlockConf = "/etc/dnf/plugins/versionlock.conf"

// DnfLockPath is dnf's RPM database lock, a pid file.
const DnfLockPath = "/var/lib/dnf/rpmdb_lock.pid"

func init() {
	Programs["dnf"] = fakeDnf
	Programs["rpm"] = fakeRPM
}

func hostFor(root string) (*host.Host, error) { return host.New(root) }

type dnfOpts struct {
	yes, assumeno, quiet, offline, noLockPlugin, exitOnLock bool
	destdir                                                 string
	cmd                                                     string
	args                                                    []string
}

func parseDnfArgs(args []string) (*dnfOpts, error) {
	o := &dnfOpts{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			// As argparse: what follows is arguments, whatever it
			// looks like; one that looks like an option is refused
			// by the command's own parser.
			for _, a := range args[i+1:] {
				if strings.HasPrefix(a, "-") {
					return nil, fmt.Errorf("unrecognized arguments: %s", a)
				}
				if o.cmd == "" {
					o.cmd = a
				} else {
					o.args = append(o.args, a)
				}
			}
			return o, nil
		case a == "-y" || a == "--assumeyes":
			o.yes = true
		case a == "--assumeno":
			o.assumeno = true
		case a == "-q" || a == "--quiet":
			o.quiet = true
		case a == "--noautoremove" || a == "--allowerasing" || a == "--nogpgcheck" || a == "-C" || a == "--cacheonly":
		case a == "--disablerepo=*":
			o.offline = true
		case a == "--disableplugin=versionlock":
			o.noLockPlugin = true
		case strings.HasPrefix(a, "--setopt="):
			kv := strings.TrimPrefix(a, "--setopt=")
			if strings.EqualFold(kv, "exit_on_lock=True") || kv == "exit_on_lock=1" {
				o.exitOnLock = true
			}
		case a == "--destdir":
			if i+1 >= len(args) {
				return nil, fmt.Errorf("argument --destdir: expected one argument")
			}
			o.destdir = args[i+1]
			i++
		case strings.HasPrefix(a, "--destdir="):
			o.destdir = strings.TrimPrefix(a, "--destdir=")
		case strings.HasPrefix(a, "-"):
			return nil, fmt.Errorf("unrecognized arguments: %s", a)
		case o.cmd == "":
			o.cmd = a
		default:
			o.args = append(o.args, a)
		}
	}
	return o, nil
}

// rpmRepo is the fake repository, by name, oldest first.
func rpmRepo(c *Call, o *dnfOpts) (map[string][]*rpmFile, error) {
	dir := c.Env(EnvRPMRepo)
	if o.offline {
		dir = ""
	}
	return readPackages(dir, "*.rpm", parseRPM,
		func(r *rpmFile) string { return r.Name },
		func(r *rpmFile) string { return r.EVR() })
}

// specForms are the spellings of a package that a dnf argument may
// match.
func specForms(r RPM) []string {
	vr := r.Version + "-" + r.Release
	e := r.epoch()
	return []string{
		r.Name, r.Name + "." + r.arch(),
		r.Name + "-" + r.Version,
		r.Name + "-" + vr, r.Name + "-" + e + ":" + vr,
		r.Name + "-" + vr + "." + r.arch(), r.Name + "-" + e + ":" + vr + "." + r.arch(),
	}
}

func matchSpec(spec string, r RPM) bool {
	for _, f := range specForms(r) {
		if ok, _ := path.Match(spec, f); ok {
			return true
		}
	}
	return false
}

// versionlockConf is the value of key in the versionlock plugin's
// configuration; ok is false where it is not set (or there is no
// configuration: the plugin is not installed).
func versionlockConf(c *Call, key string) (string, bool) {
	data, err := c.readFile(VersionlockConf)
	if err != nil {
		return "", false
	}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

func locklistPath(c *Call) string {
	if p, ok := versionlockConf(c, "locklist"); ok {
		return p
	}
	return DefaultLocklist
}

func lockPluginEnabled(c *Call) bool {
	v, _ := versionlockConf(c, "enabled")
	v = strings.ToLower(v)
	return v == "1" || v == "true" || v == "yes"
}

// readLocklist is the list's entries, as the plugin reads them: comment
// and blank lines left out.
func readLocklist(c *Call, p string) []string {
	data, err := c.readFile(p)
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
			continue
		}
		out = append(out, strings.TrimSpace(line))
	}
	return out
}

func lockedBy(entries []string, insts []*rpmInst) bool {
	for _, e := range entries {
		if strings.HasPrefix(e, "!") {
			continue
		}
		for _, p := range insts {
			if matchSpec(e, p.RPM) {
				return true
			}
		}
	}
	return false
}

// failRun is the fake's own on-demand failure of a real run of sub:
// "dnf:SUB@MODE", or "dnf:SUB:PKG@MODE" for a run whose arguments name
// PKG (one operation among several of the same kind).
func failRun(c *Call, sub, mode string, args ...string) bool {
	for i, e := range strings.Split(c.Env(EnvFail), ",") {
		name, m, _ := strings.Cut(strings.TrimSpace(e), "@")
		if m != mode || (name != "dnf:"+sub && !strings.HasPrefix(name, "dnf:"+sub+":")) {
			continue
		}
		if pkg, ok := strings.CutPrefix(name, "dnf:"+sub+":"); ok && !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, pkg) }) {
			continue
		}
		marker := fmt.Sprintf("%s.fake-failed-%d", filepath.Clean(c.Root), i)
		if _, err := os.Stat(marker); err == nil {
			continue
		}
		os.WriteFile(marker, nil, 0o644)
		fmt.Fprintf(c.Stderr, "fake dnf: failing on demand (%s=%s)\n", EnvFail, e)
		return true
	}
	return false
}

// lockHeld is the live pid in dnf's lock file, 0 when none.
func lockHeld(c *Call) int {
	data, err := c.readFile(DnfLockPath)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return 0
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d/stat", pid)); err != nil {
		return 0
	}
	return pid
}

func fakeDnf(c *Call) int {
	o, err := parseDnfArgs(c.Args)
	if err != nil {
		return c.errorf(2, "dnf: error: %v", err)
	}
	d, err := openRPMDB(c)
	if err != nil {
		return c.errorf(1, "Error: rpmdb open failed: %v", err)
	}
	repo, err := rpmRepo(c, o)
	if err != nil {
		return c.errorf(1, "Error: %v", err)
	}
	plugin := lockPluginEnabled(c) && !o.noLockPlugin
	locklist := locklistPath(c)
	// takeLock stands for dnf's RPM database lock around a transaction.
	takeLock := func() int {
		pid := lockHeld(c)
		if pid == 0 {
			return 0
		}
		if o.exitOnLock {
			fmt.Fprintf(c.Stderr, "RPMDB already locked by %d\nThe application with PID %d is: fake\n", pid, pid)
			return 200
		}
		fmt.Fprintf(c.Stderr, "Waiting for process with pid %d to finish.\nfake dnf: would wait for ever\n", pid)
		return 1
	}
	switch o.cmd {
	case "":
		return c.errorf(1, "Error: No command given")
	case "versionlock":
		if !plugin {
			return c.errorf(1, "No such command: versionlock. Please use /usr/bin/dnf --help\nIt could be a DNF plugin command, try: \"dnf install 'dnf-command(versionlock)'\"")
		}
		return fakeVersionlock(c, o, d, repo, locklist)
	case "download":
		for _, spec := range o.args {
			var found *rpmFile
			for _, r := range repo[specName(spec, repo)] {
				if matchSpec(spec, r.RPM) {
					found = r
				}
			}
			if found == nil {
				fmt.Fprintf(c.Stderr, "No package %s available.\n", spec)
				return c.errorf(1, "Error: No packages available.")
			}
			dir := o.destdir
			if dir == "" {
				dir = c.Dir
			}
			if err := c.writeFile(path.Join(dir, found.FileName()), found.data, 0o644); err != nil {
				return c.errorf(1, "Error: %v", err)
			}
			fmt.Fprintf(c.Stdout, "%s  %d B\n", found.FileName(), len(found.data))
		}
		return 0
	case "check":
		bad := 0
		seen := map[string]*rpmInst{}
		for _, p := range d.pkgs {
			if q := seen[p.Name]; q != nil {
				fmt.Fprintf(c.Stdout, "%s is a duplicate with %s\n", p.NEVRA(), q.NEVRA())
				bad++
			}
			seen[p.Name] = p
		}
		if bad > 0 {
			return c.errorf(1, "Error: Check discovered %d problem(s)", bad)
		}
		return 0
	case "install", "reinstall", "remove", "erase":
	default:
		return c.errorf(1, "No such command: %s. Please use /usr/bin/dnf --help", o.cmd)
	}

	// The transaction: what goes in (replacing the installed versions of
	// its name) and what is erased.
	var changes []*dnfChange
	planned := map[string]*dnfChange{}
	locks := []string(nil)
	if plugin {
		locks = readLocklist(c, locklist)
	}
	var problems []string
	addIn := func(r *rpmFile, section string) {
		if planned[r.Name] != nil {
			return
		}
		ch := &dnfChange{in: r, out: d.named(r.Name), section: section}
		if section == "" {
			switch {
			case len(ch.out) == 0:
				ch.section = "Installing"
			case compareVersions(r.EVR(), ch.out[len(ch.out)-1].EVR()) < 0:
				ch.section = "Downgrading"
			case r.EVR() == ch.out[len(ch.out)-1].EVR():
				ch.section = "Reinstalling"
			default:
				ch.section = "Upgrading"
			}
		}
		planned[r.Name] = ch
		changes = append(changes, ch)
	}
	// candidates is the repository's versions of name minus those a
	// version lock excludes.
	candidates := func(name string) []*rpmFile {
		l := repo[name]
		insts := d.named(name)
		if len(locks) == 0 || !lockedBy(locks, insts) {
			return l
		}
		var keep []*rpmFile
		for _, r := range l {
			for _, e := range locks {
				if matchSpec(e, r.RPM) {
					keep = append(keep, r)
					break
				}
			}
		}
		return keep
	}
	switch o.cmd {
	case "install", "reinstall":
		for _, a := range o.args {
			if strings.HasSuffix(a, ".rpm") || strings.Contains(a, "/") {
				data, err := c.readFile(a)
				if err != nil {
					return c.errorf(1, "Can not load RPM file: %s.\nError: Could not open: %s", a, a)
				}
				r, err := parseRPM(data)
				if err != nil {
					return c.errorf(1, "Error: %s: %v", a, err)
				}
				cur := d.named(r.Name)
				if o.cmd == "install" && len(cur) == 1 && cur[0].EVR() == r.EVR() {
					fmt.Fprintf(c.Stdout, "Package %s is already installed.\n", r.NEVRA())
					continue
				}
				addIn(r, "")
				continue
			}
			name := specName(a, repo)
			var pick *rpmFile
			all := repo[name]
			for _, r := range candidates(name) {
				if matchSpec(a, r.RPM) {
					pick = r
				}
			}
			if pick == nil {
				for _, r := range all {
					if matchSpec(a, r.RPM) {
						fmt.Fprintf(c.Stdout, "All matches were filtered out by exclude filtering for argument: %s\n", a)
						break
					}
				}
				return c.errorf(1, "Error: Unable to find a match: %s", a)
			}
			cur := d.named(pick.Name)
			if o.cmd == "install" && len(cur) == 1 && cur[0].EVR() == pick.EVR() {
				fmt.Fprintf(c.Stdout, "Package %s is already installed.\n", pick.NEVRA())
				continue
			}
			addIn(pick, "")
		}
		// Dependencies, from the repository, newest allowed first.
		for i := 0; i < len(changes); i++ {
			for _, req := range splitReqs(changes[i].in.Requires) {
				dn, want := req[0], req[1]
				if ch := planned[dn]; ch != nil {
					if want != "" && ch.in.EVR() != want {
						problems = append(problems, fmt.Sprintf("package %s requires %s = %s, but %s is being installed", changes[i].in.NEVRA(), dn, want, ch.in.EVR()))
					}
					continue
				}
				if satisfied(d.named(dn), want) {
					continue
				}
				var pick *rpmFile
				for _, r := range candidates(dn) {
					if want == "" || r.EVR() == want {
						pick = r
					}
				}
				if pick == nil {
					problems = append(problems, fmt.Sprintf("package %s requires %s, but none of the providers can be installed", changes[i].in.NEVRA(), strings.TrimSpace(dn+" = "+want)))
					continue
				}
				section := "Installing dependencies"
				if len(d.named(dn)) > 0 {
					section = ""
				}
				addIn(pick, section)
			}
		}
	case "remove", "erase":
		matched := false
		var queue []*rpmInst
		for _, a := range o.args {
			found := false
			for _, p := range d.pkgs {
				if matchSpec(a, p.RPM) {
					queue = append(queue, p)
					found = true
				}
			}
			if !found {
				fmt.Fprintf(c.Stdout, "No match for argument: %s\n", a)
			}
			matched = matched || found
		}
		removing := map[*rpmInst]string{}
		for _, p := range queue {
			removing[p] = "Removing"
		}
		// Installed packages that require a removed one go with it.
		for grew := true; grew; {
			grew = false
			for _, p := range d.pkgs {
				if removing[p] != "" {
					continue
				}
				for _, req := range splitReqs(p.Requires) {
					var left []*rpmInst
					for _, q := range d.named(req[0]) {
						if removing[q] == "" {
							left = append(left, q)
						}
					}
					if !satisfied(left, req[1]) {
						removing[p] = "Removing dependent packages"
						queue = append(queue, p)
						grew = true
						break
					}
				}
			}
		}
		if !matched {
			fmt.Fprintln(c.Stdout, "No packages marked for removal.")
		}
		for _, p := range queue {
			changes = append(changes, &dnfChange{section: removing[p], out: []*rpmInst{p}})
		}
	}
	if len(problems) > 0 {
		fmt.Fprintln(c.Stdout, "Error: ")
		for _, p := range problems {
			fmt.Fprintf(c.Stdout, " Problem: %s\n", p)
		}
		return 1
	}
	// The state after must satisfy every installed package's requires.
	after := func(name string) []*rpmInst {
		var l []*rpmInst
		for _, p := range d.named(name) {
			gone := false
			for _, ch := range changes {
				if ch.in != nil && ch.in.Name == name || contains2(ch.out, p) {
					gone = true
				}
			}
			if !gone {
				l = append(l, p)
			}
		}
		for _, ch := range changes {
			if ch.in != nil && ch.in.Name == name {
				l = append(l, &rpmInst{RPM: ch.in.RPM})
			}
		}
		return l
	}
	for _, p := range d.pkgs {
		if planned[p.Name] != nil || removedIn(changes, p) {
			continue
		}
		for _, req := range splitReqs(p.Requires) {
			if !satisfied(after(req[0]), req[1]) {
				fmt.Fprintf(c.Stdout, "Error: \n Problem: package %s requires %s, but none of the providers can be installed\n", p.NEVRA(), strings.TrimSpace(req[0]+" = "+req[1]))
				return 1
			}
		}
	}
	if len(changes) == 0 {
		fmt.Fprintln(c.Stdout, "Dependencies resolved.\nNothing to do.\nComplete!")
		return 0
	}
	printTable(c, changes)
	if o.assumeno || !o.yes {
		return c.errorf(1, "Operation aborted.")
	}
	sub := o.cmd
	if sub == "erase" {
		sub = "remove"
	}
	if failRun(c, sub, "run", o.args...) {
		return c.errorf(1, "Error: Transaction failed")
	}
	if code := takeLock(); code != 0 {
		return code
	}
	half := sub == "install" && failRun(c, "install", "half")
	fmt.Fprintln(c.Stdout, "Running transaction")
	for i, ch := range changes {
		if ch.in != nil {
			if err := d.add(ch.in); err != nil {
				return c.errorf(1, "Error: %v", err)
			}
			fmt.Fprintf(c.Stdout, "  %-17s: %s\n", strings.TrimSuffix(ch.section, " dependencies"), ch.in.NEVRA())
			if half && i == len(changes)-1 {
				// Killed here: the old version is still in the database.
				if err := d.save(); err != nil {
					return c.errorf(1, "Error: %v", err)
				}
				return c.errorf(1, "error: %s: erase skipped: transaction interrupted\nError: Transaction failed", ch.in.NEVRA())
			}
		}
		for _, p := range ch.out {
			if ch.in != nil && p.EVR() == ch.in.EVR() && p.arch() == ch.in.arch() {
				// Reinstalled: the new record replaces the old one,
				// whose files are now the new one's.
				for j, q := range d.pkgs {
					if q == p {
						d.pkgs = append(d.pkgs[:j], d.pkgs[j+1:]...)
						break
					}
				}
				continue
			}
			fmt.Fprintf(c.Stdout, "  Erasing          : %s\n", p.NEVRA())
			d.erase(p)
		}
	}
	if err := d.save(); err != nil {
		return c.errorf(1, "Error: %v", err)
	}
	fmt.Fprintln(c.Stdout, "Complete!")
	return 0
}

func contains2(l []*rpmInst, p *rpmInst) bool {
	for _, q := range l {
		if q == p {
			return true
		}
	}
	return false
}

// dnfChange is one package of a transaction: what goes in (nil for a
// removal) and the installed packages it erases.
type dnfChange struct {
	section string
	in      *rpmFile
	out     []*rpmInst
}

func removedIn(changes []*dnfChange, p *rpmInst) bool {
	for _, ch := range changes {
		if contains2(ch.out, p) {
			return true
		}
	}
	return false
}

// specName is the package name a spec means: the longest name in the
// repository or database it starts with.
func specName(spec string, repo map[string][]*rpmFile) string {
	best := ""
	for n := range repo {
		if (spec == n || strings.HasPrefix(spec, n+"-") || strings.HasPrefix(spec, n+".")) && len(n) > len(best) {
			best = n
		}
	}
	if best == "" {
		return spec
	}
	return best
}

// splitReqs reads "a = 1.0-1, b" into {{"a", "1.0-1"}, {"b", ""}}.
func splitReqs(s string) [][2]string {
	var out [][2]string
	for _, r := range strings.Split(s, ",") {
		r = strings.TrimSpace(r)
		if r == "" {
			continue
		}
		n, v, _ := strings.Cut(r, "=")
		out = append(out, [2]string{strings.TrimSpace(n), strings.TrimSpace(v)})
	}
	return out
}

func satisfied(insts []*rpmInst, want string) bool {
	for _, p := range insts {
		if want == "" || p.EVR() == want || p.epoch()+":"+p.Version+"-"+p.Release == want {
			return true
		}
	}
	return false
}

type row struct {
	section string
	r       RPM
	repo    string
}

func changeRows(changes []*dnfChange) []row {
	var rows []row
	for _, ch := range changes {
		if ch.in != nil {
			rows = append(rows, row{ch.section, ch.in.RPM, "fake"})
			continue
		}
		for _, p := range ch.out {
			rows = append(rows, row{ch.section, p.RPM, "@System"})
		}
	}
	return rows
}

// printTable prints a transaction as dnf 4 does: sections in dnf's
// order, the name column as wide as the longest name, the header's
// last column wrapped when the table grows past 80 columns.
func printTable(c *Call, changes []*dnfChange) {
	rows := changeRows(changes)
	w := 30
	for _, r := range rows {
		w = max(w, len(r.r.Name))
	}
	fmt.Fprintln(c.Stdout, "Dependencies resolved.")
	bar := strings.Repeat("=", 80)
	if w > 30 {
		bar = strings.Repeat("=", 80+w-30)
		fmt.Fprintf(c.Stdout, "%s\n %-*s %-8s %-20s %-10s\n%*s\n%s\n", bar, w, "Package", "Arch", "Version", "Repository", len(bar)-4, "Size", bar)
	} else {
		fmt.Fprintf(c.Stdout, "%s\n %-*s %-8s %-20s %-10s %s\n%s\n", bar, w, "Package", "Arch", "Version", "Repository", "Size", bar)
	}
	order := []string{"Installing", "Upgrading", "Reinstalling", "Removing", "Downgrading", "Installing dependencies", "Removing dependent packages"}
	for _, sec := range order {
		first := true
		for _, r := range rows {
			if r.section != sec {
				continue
			}
			if first {
				fmt.Fprintf(c.Stdout, "%s:\n", sec)
				first = false
			}
			fmt.Fprintf(c.Stdout, " %-*s %-8s %-20s %-10s %s\n", w, r.r.Name, r.r.arch(), r.r.EVR(), r.repo, "6.0 k")
		}
	}
	fmt.Fprintf(c.Stdout, "\nTransaction Summary\n%s\n\n", bar)
}

// fakeVersionlock is the versionlock plugin: add locks the installed
// (else the newest available) version of each spec, appending a dated
// comment and "name-epoch:version-release.*"; delete rewrites the list
// without the matching entries (and without comments, as the plugin
// does); list prints the entries.
func fakeVersionlock(c *Call, o *dnfOpts, d *rpmDB, repo map[string][]*rpmFile, locklist string) int {
	sub := "list"
	args := o.args
	if len(args) > 0 {
		sub, args = args[0], args[1:]
	}
	entries := readLocklist(c, locklist)
	switch sub {
	case "list":
		for _, e := range entries {
			fmt.Fprintln(c.Stdout, e)
		}
		return 0
	case "add":
		if failRun(c, "versionlock-add", "run") {
			return c.errorf(1, "Error: cannot write the lock list")
		}
		var add []string
		for _, a := range args {
			var found []RPM
			for _, p := range d.pkgs {
				if matchSpec(a, p.RPM) {
					found = append(found, p.RPM)
				}
			}
			if len(found) == 0 {
				if l := repo[specName(a, repo)]; len(l) > 0 {
					found = append(found, l[len(l)-1].RPM)
				}
			}
			if len(found) == 0 {
				fmt.Fprintf(c.Stdout, "No package found for: %s\n", a)
				continue
			}
			for _, r := range found {
				e := r.Name + "-" + r.epoch() + ":" + r.Version + "-" + r.Release + ".*"
				if slices.Contains(entries, e) || slices.Contains(add, e) {
					fmt.Fprintf(c.Stdout, "Package already locked in equivalent form: %s\n", e)
					continue
				}
				fmt.Fprintf(c.Stdout, "Adding versionlock on: %s\n", e)
				add = append(add, e)
			}
		}
		if len(add) == 0 {
			return 0
		}
		old, _ := c.readFile(locklist)
		text := string(old) + "\n# Added lock on " + time.Now().Format("Mon Jan  2 15:04:05 2006") + "\n" + strings.Join(add, "\n") + "\n"
		if err := c.writeFile(locklist, []byte(text), 0o644); err != nil {
			return c.errorf(1, "Error: %v", err)
		}
		return 0
	case "delete":
		if failRun(c, "versionlock-delete", "run") {
			return c.errorf(1, "Error: cannot write the lock list")
		}
		var keep []string
		count := 0
		for _, e := range entries {
			hit := false
			for _, a := range args {
				if e == a || lockEntryMatches(e, a) {
					hit = true
				}
			}
			if hit {
				fmt.Fprintf(c.Stdout, "Deleting versionlock for: %s\n", e)
				count++
				continue
			}
			keep = append(keep, e)
		}
		if count == 0 {
			return 0
		}
		text := ""
		for _, e := range keep {
			text += e + "\n"
		}
		if err := c.writeFile(locklist, []byte(text), 0o644); err != nil {
			return c.errorf(1, "Error: %v", err)
		}
		return 0
	}
	return c.errorf(1, "Error: unknown versionlock command %s", sub)
}

// lockEntryMatches is the plugin's _match: the entry, split as a NEVRA,
// in any of its spellings, matched by the pattern.
func lockEntryMatches(entry, pat string) bool {
	e := strings.TrimPrefix(entry, "!")
	// name-epoch:version-release.arch: the last two dashes end the name.
	i := strings.LastIndexByte(e, '-')
	if i < 0 {
		return false
	}
	j := strings.LastIndexByte(e[:i], '-')
	if j < 0 {
		return false
	}
	name, ev, ra := e[:j], e[j+1:i], e[i+1:]
	epoch, ver, ok := strings.Cut(ev, ":")
	if !ok {
		epoch, ver = "0", ev
	}
	rel, arch := ra, ""
	if k := strings.LastIndexByte(ra, '.'); k >= 0 {
		rel, arch = ra[:k], ra[k+1:]
	}
	r := RPM{Name: name, Epoch: epoch, Version: ver, Release: rel, Arch: arch}
	if arch == "*" || arch == "" {
		return pat == name || matchSpec(pat, RPM{Name: name, Epoch: epoch, Version: ver, Release: rel, Arch: "*"})
	}
	return matchSpec(pat, r)
}
