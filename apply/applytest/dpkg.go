package applytest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/tools/txtar"
	"pault.ag/go/debian/version"

	"github.com/gpuenv/gpuenv/providers/host/pkgdb"
)

// A fake .deb is an ar archive, as a real one is, with the members a
// real one has — debian-binary, control.tar, data.tar — so that apply's
// check of a saved package file's structure applies to it; but control.tar
// holds the control paragraph as text and data.tar a txtar archive of the
// files, installed at their paths (relative to /).

// Deb is a fake package.
type Deb struct {
	Name, Version, Arch string
	// Depends are "name" or "name (= version)", comma-separated.
	Depends string
	Files   map[string]string
}

// Bytes is the fake .deb file.
func (d Deb) Bytes() []byte {
	arch := d.Arch
	if arch == "" {
		arch = "amd64"
	}
	ctl := fmt.Sprintf("Package: %s\nVersion: %s\nArchitecture: %s\n", d.Name, d.Version, arch)
	if d.Depends != "" {
		ctl += "Depends: " + d.Depends + "\n"
	}
	ctl += fmt.Sprintf("Description: %s (gpuenv test package)\n", d.Name)
	var b bytes.Buffer
	b.WriteString("!<arch>\n")
	for _, m := range []struct {
		name string
		data []byte
	}{{"debian-binary", []byte("2.0\n")}, {"control.tar", []byte(ctl)}, {"data.tar", filesTxtar("", d.Files)}} {
		fmt.Fprintf(&b, "%-16s%-12d%-6d%-6d%-8s%-10d`\n", m.name, 0, 0, 0, "100644", len(m.data))
		b.Write(m.data)
		if len(m.data)%2 == 1 {
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

// arMembers splits an ar archive into its members' data by name.
func arMembers(data []byte) (map[string][]byte, error) {
	if !bytes.HasPrefix(data, []byte("!<arch>\n")) {
		return nil, errors.New("not an ar archive")
	}
	out := map[string][]byte{}
	for off := 8; off < len(data); {
		if off+60 > len(data) {
			return nil, errors.New("cut member header")
		}
		hdr := data[off : off+60]
		size, err := strconv.Atoi(strings.TrimSpace(string(hdr[48:58])))
		if err != nil || off+60+size > len(data) {
			return nil, errors.New("cut member")
		}
		out[strings.TrimSpace(string(hdr[0:16]))] = data[off+60 : off+60+size]
		off += 60 + size + size%2
	}
	return out, nil
}

// FileName is the name apt gives the package file.
func (d Deb) FileName() string {
	arch := d.Arch
	if arch == "" {
		arch = "amd64"
	}
	return fmt.Sprintf("%s_%s_%s.deb", d.Name, strings.ReplaceAll(d.Version, ":", "%3a"), arch)
}

// WriteArchive puts debs into dir, the archive EnvArchive names.
func WriteArchive(dir string, debs ...Deb) error { return writePackages(dir, debs) }

type debFile struct {
	control paragraph
	files   []txtar.File
	data    []byte
}

func parseDeb(data []byte) (*debFile, error) {
	members, err := arMembers(data)
	if err != nil {
		return nil, fmt.Errorf("not a package file: %w", err)
	}
	ar := txtar.Parse(members["data.tar"])
	ctl := parseParagraphs(members["control.tar"])
	if len(ctl) != 1 || ctl[0].get("Package") == "" || ctl[0].get("Version") == "" {
		return nil, errors.New("not a package file (no control paragraph)")
	}
	return &debFile{control: ctl[0], files: ar.Files, data: data}, nil
}

// paragraph is a control paragraph, fields in order.
type paragraph [][2]string

func (p paragraph) get(k string) string {
	for _, f := range p {
		if f[0] == k {
			return f[1]
		}
	}
	return ""
}

func (p paragraph) set(k, v string) paragraph {
	for i, f := range p {
		if f[0] == k {
			p[i][1] = v
			return p
		}
	}
	return append(p, [2]string{k, v})
}

func parseParagraphs(data []byte) []paragraph {
	var out []paragraph
	var cur paragraph
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			if cur != nil {
				out = append(out, cur)
			}
			cur = nil
			continue
		}
		if strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t") {
			if len(cur) > 0 {
				cur[len(cur)-1][1] += "\n" + line
			}
			continue
		}
		k, v, _ := strings.Cut(line, ":")
		cur = append(cur, [2]string{k, strings.TrimSpace(v)})
	}
	if cur != nil {
		out = append(out, cur)
	}
	return out
}

func formatParagraph(p paragraph) string {
	var b strings.Builder
	for _, f := range p {
		fmt.Fprintf(&b, "%s: %s\n", f[0], f[1])
	}
	return b.String()
}

const statusPath = "/var/lib/dpkg/status"

// db is the fake root's dpkg database.
type db struct {
	c     *Call
	pkgs  map[string]paragraph
	order []string
}

func openDB(c *Call) (*db, error) {
	d := &db{c: c, pkgs: map[string]paragraph{}}
	data, err := c.readFile(statusPath)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	for _, p := range parseParagraphs(data) {
		name := p.get("Package")
		if _, ok := d.pkgs[name]; !ok {
			d.order = append(d.order, name)
		}
		d.pkgs[name] = p
	}
	return d, nil
}

// status words of a package: selection, flag, state.
func (d *db) status(name string) (string, string, string) {
	p, ok := d.pkgs[name]
	if !ok {
		return "unknown", "ok", "not-installed"
	}
	f := strings.Fields(p.get("Status"))
	if len(f) != 3 {
		return "unknown", "ok", "not-installed"
	}
	return f[0], f[1], f[2]
}

func (d *db) installedVersion(name string) string {
	if _, _, st := d.status(name); st == "not-installed" || st == "config-files" {
		return ""
	}
	return d.pkgs[name].get("Version")
}

// save writes the database as dpkg does: the old one kept as status-old,
// paragraphs in name order.
func (d *db) save() error {
	if old, err := d.c.readFile(statusPath); err == nil {
		if err := d.c.writeFile(statusPath+"-old", old, 0o644); err != nil {
			return err
		}
	}
	var b strings.Builder
	for i, n := range slices.Sorted(maps.Keys(d.pkgs)) {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString(formatParagraph(d.pkgs[n]))
	}
	return d.c.writeFile(statusPath, []byte(b.String()), 0o644)
}

func listPath(name string) string { return "/var/lib/dpkg/info/" + name + ".list" }

func (d *db) files(name string) []string {
	data, err := d.c.readFile(listPath(name))
	if err != nil {
		return nil
	}
	return strings.Fields(string(data))
}

// install unpacks deb over whatever version is installed, keeping the
// selection (a held package stays held).
func (d *db) install(deb *debFile, state string) error {
	name := deb.control.get("Package")
	sel, _, _ := d.status(name)
	if sel != "hold" {
		sel = "install"
	}
	newFiles := map[string]bool{}
	var list []string
	for _, f := range deb.files {
		p := "/" + f.Name
		newFiles[p] = true
		list = append(list, p)
		if err := d.c.writeFile(p, f.Data, 0o644); err != nil {
			return err
		}
	}
	for _, old := range d.files(name) {
		if !newFiles[old] {
			os.Remove(d.c.path(old))
		}
	}
	sort.Strings(list)
	if err := d.c.writeFile(listPath(name), []byte(strings.Join(list, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	var p paragraph
	for _, f := range deb.control {
		p = append(p, f)
		if f[0] == "Package" {
			p = append(p, [2]string{"Status", sel + " ok " + state})
		}
	}
	d.pkgs[name] = p
	return nil
}

func (d *db) remove(name string) {
	for _, f := range d.files(name) {
		os.Remove(d.c.path(f))
		// Directories the package made go when empty, as dpkg does.
		for dir := path.Dir(f); dir != "/"; dir = path.Dir(dir) {
			if os.Remove(d.c.path(dir)) != nil {
				break
			}
		}
	}
	os.Remove(d.c.path(listPath(name)))
	delete(d.pkgs, name)
}

// archive is the fake apt archive, by package name, oldest first.
func archive(c *Call) (map[string][]*debFile, error) {
	return readPackages(c.Env(EnvArchive), "*.deb", parseDeb,
		func(d *debFile) string { return d.control.get("Package") },
		func(d *debFile) string { return d.control.get("Version") })
}

// aptState is what apt works from: the archive and dpkg's database.
func aptState(c *Call) (map[string][]*debFile, *db, error) {
	arch, err := archive(c)
	if err != nil {
		return nil, nil, err
	}
	d, err := openDB(c)
	return arch, d, err
}

// pickDeb is the newest package called name in the archive at version
// ver, or at any version when ver is empty; nil when there is none.
func pickDeb(arch map[string][]*debFile, name, ver string) *debFile {
	var pick *debFile
	for _, cand := range arch[name] {
		if ver == "" || cand.control.get("Version") == ver {
			pick = cand
		}
	}
	return pick
}

func compareVersions(a, b string) int {
	va, err1 := version.Parse(a)
	vb, err2 := version.Parse(b)
	if err1 != nil || err2 != nil {
		return strings.Compare(a, b)
	}
	return version.Compare(va, vb)
}

func fakeAptGet(c *Call) int {
	var opts = map[string]bool{}
	var pos []string
	for i := 0; i < len(c.Args); i++ {
		a := c.Args[i]
		switch {
		case a == "-o":
			i++
		case strings.HasPrefix(a, "-"):
			opts[a] = true
		default:
			pos = append(pos, a)
		}
	}
	if len(pos) == 0 {
		return c.errorf(100, "E: Invalid operation")
	}
	sub, args := pos[0], pos[1:]
	arch, d, err := aptState(c)
	if err != nil {
		return c.errorf(100, "E: %v", err)
	}
	switch sub {
	case "update":
		// The fake archive is a directory: there is no index to fetch.
		fmt.Fprintln(c.Stdout, "Reading package lists... Done")
		return 0
	case "download":
		status := c.aptStatusFd()
		for i, a := range args {
			name, ver, _ := strings.Cut(a, "=")
			found := pickDeb(arch, name, ver)
			if found == nil {
				return c.errorf(100, "E: Can't find a source to download version '%s' of '%s:amd64'", ver, name)
			}
			fn := Deb{Name: name, Version: found.control.get("Version"), Arch: found.control.get("Architecture")}.FileName()
			data := found.data
			if _, empty := c.shouldFail("empty"); empty {
				// The disk was full: the file is created and nothing
				// written to it, and apt-get still exits 0.
				data = nil
			}
			if err := c.writeFile(path.Join(c.Dir, fn), data, 0o644); err != nil {
				return c.errorf(100, "E: %v", err)
			}
			fmt.Fprintf(c.Stdout, "Get:1 fake %s %s [%d B]\n", name, found.control.get("Version"), len(found.data))
			c.step()
			status.dlstatus(i+1, len(args), float64(i+1)/float64(len(args))*100)
		}
		return 0
	case "install", "remove", "purge":
	default:
		return c.errorf(100, "E: Invalid operation %s", sub)
	}
	for _, n := range d.order {
		if _, flag, _ := d.status(n); flag == "reinstreq" {
			// What apt says of a package a power cut left half-unpacked.
			return c.errorf(100, "E: The package %s needs to be reinstalled, but I can't find an archive for it.", n)
		}
	}
	type change struct {
		name string
		deb  *debFile // nil: removal
	}
	var changes []change
	planned := map[string]bool{}
	explicit := map[string]*debFile{}
	local := map[string]bool{} // given as package files, not fetched
	var order []*debFile
	var add func(deb *debFile) error
	add = func(deb *debFile) error {
		name := deb.control.get("Package")
		if planned[name] {
			return nil
		}
		planned[name] = true
		changes = append(changes, change{name, deb})
		for _, dep := range strings.Split(deb.control.get("Depends"), ",") {
			dep = strings.TrimSpace(dep)
			if dep == "" {
				continue
			}
			dn, rest, _ := strings.Cut(dep, " ")
			want := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(rest), "(= "), ")")
			cur := d.installedVersion(dn)
			if explicit[dn] != nil {
				// Given on the same command line: it satisfies the
				// dependency or the transaction fails.
				cur = explicit[dn].control.get("Version")
			}
			if (want == "" && cur != "") || (want != "" && cur == want) {
				continue
			}
			pick := pickDeb(arch, dn, want)
			if pick == nil {
				return fmt.Errorf("E: Unable to satisfy dependency %s of %s", dep, name)
			}
			if err := add(pick); err != nil {
				return err
			}
		}
		return nil
	}
	for _, a := range args {
		switch {
		case sub != "install" || strings.HasSuffix(a, "-") && !strings.Contains(a, "="):
			name := strings.TrimSuffix(a, "-")
			if sub != "install" {
				name = a
			}
			if d.installedVersion(name) == "" {
				fmt.Fprintf(c.Stdout, "Package '%s' is not installed, so not removed\n", name)
				continue
			}
			planned[name] = true
			changes = append(changes, change{name, nil})
		case strings.HasSuffix(a, ".deb") || strings.Contains(a, "/"):
			data, err := c.readFile(a)
			if err != nil {
				return c.errorf(100, "E: Unsupported file %s given on commandline", a)
			}
			deb, err := parseDeb(data)
			if err != nil {
				return c.errorf(100, "E: %s: %v", a, err)
			}
			explicit[deb.control.get("Package")] = deb
			local[deb.control.get("Package")] = true
			order = append(order, deb)
		default:
			name, ver, _ := strings.Cut(a, "=")
			pick := pickDeb(arch, name, ver)
			if pick == nil {
				if len(arch[name]) == 0 {
					return c.errorf(100, "E: Unable to locate package %s", name)
				}
				return c.errorf(100, "E: Version '%s' for '%s' was not found", ver, name)
			}
			explicit[name] = pick
			order = append(order, pick)
		}
	}
	for _, deb := range order {
		if err := add(deb); err != nil {
			return c.errorf(100, "%v", err)
		}
	}
	for _, ch := range changes {
		cur := d.installedVersion(ch.name)
		sel, _, _ := d.status(ch.name)
		if ch.deb == nil {
			if sel == "hold" && !opts["--allow-change-held-packages"] {
				return c.errorf(100, "E: Held packages were changed and -y was used without --allow-change-held-packages.")
			}
			continue
		}
		nv := ch.deb.control.get("Version")
		if cur != "" && cur != nv && sel == "hold" && !opts["--allow-change-held-packages"] {
			return c.errorf(100, "E: Held packages were changed and -y was used without --allow-change-held-packages.")
		}
		if cur != "" && compareVersions(nv, cur) < 0 && !opts["--allow-downgrades"] {
			return c.errorf(100, "E: Packages were downgraded and -y was used without --allow-downgrades.")
		}
	}
	if opts["--trivial-only"] {
		// apt refuses, before it fetches or changes anything, to
		// install more than it was given, to remove, or to downgrade.
		for _, ch := range changes {
			cur := d.installedVersion(ch.name)
			switch {
			case ch.deb == nil:
			case cur == ch.deb.control.get("Version"):
				continue
			case explicit[ch.name] != nil && (cur == "" || compareVersions(ch.deb.control.get("Version"), cur) > 0):
				continue
			}
			return c.errorf(100, "E: Trivial Only specified but this is not a trivial operation.")
		}
	}
	// same is a package already at the version the change installs,
	// which apt leaves alone unless --reinstall names it.
	same := func(ch change) bool {
		return d.installedVersion(ch.name) == ch.deb.control.get("Version") && !(opts["--reinstall"] && explicit[ch.name] != nil)
	}
	if opts["-s"] || opts["--simulate"] || opts["--dry-run"] {
		for _, ch := range changes {
			cur := d.installedVersion(ch.name)
			old := ""
			if cur != "" {
				old = "[" + cur + "] "
			}
			if ch.deb == nil {
				fmt.Fprintf(c.Stdout, "Remv %s %s\n", ch.name, strings.TrimSpace(old))
				continue
			}
			if same(ch) {
				continue
			}
			fmt.Fprintf(c.Stdout, "Inst %s %s(%s fake [amd64])\n", ch.name, old, ch.deb.control.get("Version"))
		}
		return 0
	}
	if !opts["-y"] {
		return c.errorf(1, "Do you want to continue? [Y/n] Abort.")
	}
	// "@half": the last package's postinst fails, leaving it
	// half-configured, and apt-get exits non-zero; "@quiet": the same,
	// but apt-get exits 0, as it does when a trigger fails after the
	// transaction; "@reinstreq": the power is cut while dpkg unpacks the
	// last package, which stays half-installed and needing reinstallation
	// (at its old version on an upgrade), and apt-get dies.
	_, half := c.shouldFail("half")
	_, quiet := c.shouldFail("quiet")
	_, cut := c.shouldFail("reinstreq")
	status := c.aptStatusFd()
	steps := &aptSteps{c: c, out: status}
	var fetch []*debFile
	trigger := false // initramfs-tools' trigger runs, once (below)
	for _, ch := range changes {
		switch {
		case ch.deb == nil:
			steps.total += 3
		case !same(ch):
			steps.total += 6
			trigger = trigger || strings.HasSuffix(ch.name, "-dkms")
			if !local[ch.name] {
				fetch = append(fetch, ch.deb)
			}
		}
	}
	if trigger {
		steps.total++
	}
	fetched, err := c.download(status, fetch)
	defer func() {
		for _, f := range fetched {
			os.Remove(c.path(f))
		}
	}()
	if err != nil {
		return c.errorf(100, "E: %v", err)
	}
	if steps.total > 0 {
		status.pmstatus("dpkg-exec", 0, "Running dpkg")
	}
	for i, ch := range changes {
		last := i == len(changes)-1
		pkg := ch.name + " (amd64)"
		if ch.deb == nil {
			steps.report(ch.name, "Preparing for removal of "+pkg)
			fmt.Fprintf(c.Stdout, "Removing %s (%s) ...\n", ch.name, d.installedVersion(ch.name))
			steps.report(ch.name, "Removing "+pkg)
			steps.report(ch.name, "Removing "+pkg)
			d.remove(ch.name)
			continue
		}
		if same(ch) {
			continue
		}
		steps.report(ch.name, "Preparing "+pkg)
		steps.report(ch.name, "Unpacking "+pkg)
		if cut && last {
			fmt.Fprintf(c.Stdout, "Unpacking %s (%s) ...\n", ch.name, ch.deb.control.get("Version"))
			old, had := d.pkgs[ch.name]
			if err := d.install(ch.deb, "half-installed"); err != nil {
				return c.errorf(100, "E: %v", err)
			}
			p := d.pkgs[ch.name]
			if had {
				p = p.set("Version", old.get("Version"))
			}
			sel, _, _ := d.status(ch.name)
			d.pkgs[ch.name] = p.set("Status", sel+" reinstreq half-installed")
			if err := d.save(); err != nil {
				return c.errorf(100, "E: %v", err)
			}
			return c.errorf(137, "Killed")
		}
		steps.report(ch.name, "Installing "+pkg)
		state := "installed"
		if (half || quiet) && last {
			state = "half-configured"
		}
		steps.report(ch.name, "Preparing to configure "+pkg)
		steps.report(ch.name, "Configuring "+pkg)
		fmt.Fprintf(c.Stdout, "Setting up %s (%s) ...\n", ch.name, ch.deb.control.get("Version"))
		if strings.HasSuffix(ch.name, "-dkms") {
			c.buildModule(ch.name, ch.deb.control.get("Version"))
		}
		if err := d.install(ch.deb, state); err != nil {
			return c.errorf(100, "E: %v", err)
		}
		if state != "installed" {
			steps.fail(ch.name, "installed "+ch.name+" package post-installation script subprocess returned error exit status 1")
			continue
		}
		steps.report(ch.name, "Installed "+pkg)
	}
	if trigger {
		// A module built into /lib/modules activates initramfs-tools'
		// trigger, which rebuilds the initramfs after the packages.
		steps.report("initramfs-tools", "Running post-installation trigger initramfs-tools")
		fmt.Fprintln(c.Stdout, "Processing triggers for initramfs-tools (0.142) ...")
		c.step()
		fmt.Fprintln(c.Stdout, "update-initramfs: Generating /boot/initrd.img-6.1.0-28-amd64")
		// Compressing the image is most of the rebuild.
		c.step()
		c.step()
	}
	if err := d.save(); err != nil {
		return c.errorf(100, "E: %v", err)
	}
	if half {
		return c.errorf(100, "E: Sub-process /usr/bin/dpkg returned an error code (1)")
	}
	return 0
}

func fakeAptMark(c *Call) int {
	if len(c.Args) == 0 {
		return c.errorf(1, "E: No operation given")
	}
	d, err := openDB(c)
	if err != nil {
		return c.errorf(100, "E: %v", err)
	}
	switch c.Args[0] {
	case "showhold":
		for _, n := range d.order {
			if sel, _, _ := d.status(n); sel == "hold" {
				fmt.Fprintln(c.Stdout, n)
			}
		}
		return 0
	case "hold", "unhold":
		sel := "hold"
		if c.Args[0] == "unhold" {
			sel = "install"
		}
		for _, n := range c.Args[1:] {
			if n == "--" {
				continue
			}
			p, ok := d.pkgs[n]
			if !ok {
				return c.errorf(100, "E: Unable to locate package %s", n)
			}
			_, flag, st := d.status(n)
			d.pkgs[n] = p.set("Status", sel+" "+flag+" "+st)
			if sel == "hold" {
				fmt.Fprintf(c.Stdout, "%s set on hold.\n", n)
			} else {
				fmt.Fprintf(c.Stdout, "Canceled hold on %s.\n", n)
			}
		}
		if err := d.save(); err != nil {
			return c.errorf(100, "E: %v", err)
		}
		return 0
	}
	return c.errorf(1, "E: Invalid operation %s", c.Args[0])
}

// dpkgArgs splits a dpkg command line into its action, its --force
// options and its operands ("--" ends the options).
func dpkgArgs(args []string) (action string, force map[string]bool, operands []string) {
	force = map[string]bool{}
	for i, a := range args {
		switch {
		case a == "--":
			return action, force, append(operands, args[i+1:]...)
		case strings.HasPrefix(a, "--force-"):
			force[strings.TrimPrefix(a, "--force-")] = true
		case strings.HasPrefix(a, "-") && action == "":
			action = a
		case strings.HasPrefix(a, "-"):
		default:
			operands = append(operands, a)
		}
	}
	return action, force, operands
}

func fakeDpkg(c *Call) int {
	d, err := openDB(c)
	if err != nil {
		return c.errorf(2, "dpkg: error: %v", err)
	}
	status, args := c.cutDpkgStatusFd(c.Args)
	action, force, operands := dpkgArgs(args)
	switch action {
	case "":
		return c.errorf(2, "dpkg: error: need an action option")
	case "--audit", "-C":
		bad := 0
		for _, n := range d.order {
			if _, flag, st := d.status(n); flag != "ok" || st != "installed" && st != "config-files" && st != "not-installed" {
				fmt.Fprintf(c.Stdout, " %s  (%s)\n", n, st)
				bad++
			}
		}
		if bad > 0 {
			return 1
		}
		return 0
	case "--configure":
		failed := false
		for _, n := range d.order {
			sel, flag, st := d.status(n)
			if flag == "reinstreq" {
				fmt.Fprintf(c.Stderr, "dpkg: error processing package %s (--configure):\n package is in a very bad inconsistent state; you should\n reinstall it before attempting configuration\n", n)
				failed = true
				continue
			}
			if st == "half-configured" || st == "unpacked" || st == "triggers-pending" || st == "triggers-awaited" {
				status.processing("configure", n)
				status.status(n, "half-configured")
				c.step()
				d.pkgs[n] = d.pkgs[n].set("Status", sel+" "+flag+" installed")
				fmt.Fprintf(c.Stdout, "Setting up %s (%s) ...\n", n, d.pkgs[n].get("Version"))
				status.status(n, "installed")
			}
		}
		if err := d.save(); err != nil {
			return c.errorf(2, "dpkg: error: %v", err)
		}
		if failed {
			return 1
		}
		return 0
	case "-i", "--install":
		for _, f := range operands {
			data, err := c.readFile(f)
			if err != nil {
				return c.errorf(2, "dpkg: error: cannot access archive '%s'", f)
			}
			deb, err := parseDeb(data)
			if err != nil {
				return c.errorf(2, "dpkg: error: %s: %v", f, err)
			}
			name := deb.control.get("Package")
			stage := "install"
			if d.installedVersion(name) != "" {
				stage = "upgrade"
			}
			status.processing(stage, name)
			status.status(name, "half-installed")
			c.step()
			status.status(name, "unpacked")
			status.processing("configure", name)
			status.status(name, "half-configured")
			c.step()
			if err := d.install(deb, "installed"); err != nil {
				return c.errorf(2, "dpkg: error: %v", err)
			}
			status.status(name, "installed")
			// A reinstall clears what an interrupted dpkg left.
			sel, _, st := d.status(deb.control.get("Package"))
			d.pkgs[deb.control.get("Package")] = d.pkgs[deb.control.get("Package")].set("Status", sel+" ok "+st)
		}
		if err := d.save(); err != nil {
			return c.errorf(2, "dpkg: error: %v", err)
		}
		return 0
	case "-r", "--remove", "-P", "--purge":
		for _, n := range operands {
			_, flag, st := d.status(n)
			if st == "not-installed" {
				fmt.Fprintf(c.Stderr, "dpkg: warning: ignoring request to remove %s which isn't installed\n", n)
				continue
			}
			if flag == "reinstreq" && !force["remove-reinstreq"] {
				return c.errorf(1, "dpkg: error processing package %s (%s):\n package is in a very bad inconsistent state; you should\n reinstall it before attempting a removal", n, action)
			}
			stage, left := "remove", "config-files"
			if action == "-P" || action == "--purge" {
				stage, left = "purge", "not-installed"
			}
			status.processing(stage, n)
			status.status(n, "half-configured")
			c.step()
			fmt.Fprintf(c.Stdout, "Removing %s (%s) ...\n", n, d.pkgs[n].get("Version"))
			d.remove(n)
			status.status(n, left)
		}
		if err := d.save(); err != nil {
			return c.errorf(2, "dpkg: error: %v", err)
		}
		return 0
	}
	return c.errorf(2, "dpkg: error: unknown option %s", action)
}

// fakeDpkgDeb builds a package from a tree as `dpkg-deb --build TREE DIR`
// does: the control file from TREE/DEBIAN, every other file as a
// member, written as DIR/NAME_VERSION_ARCH.deb.
func fakeDpkgDeb(c *Call) int {
	var operands []string
	build := false
	for _, a := range c.Args {
		switch {
		case a == "--build" || a == "-b":
			build = true
		case strings.HasPrefix(a, "-"):
		default:
			operands = append(operands, a)
		}
	}
	if !build || len(operands) != 2 {
		return c.errorf(2, "dpkg-deb: error: only --build TREE DIR is faked")
	}
	tree, dir := operands[0], operands[1]
	ctl, err := c.readFile(path.Join(tree, "DEBIAN/control"))
	if err != nil {
		return c.errorf(2, "dpkg-deb: error: %v", err)
	}
	p, err := pkgdb.Paragraphs(ctl)
	if err != nil || len(p) != 1 {
		return c.errorf(2, "dpkg-deb: error: bad control file")
	}
	v := p[0].Values
	deb := Deb{Name: v["Package"], Version: v["Version"], Arch: v["Architecture"], Depends: v["Depends"], Files: map[string]string{}}
	root := c.path(tree)
	err = filepath.WalkDir(root, func(f string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(root, f)
		if strings.HasPrefix(rel, "DEBIAN") {
			return nil
		}
		data, err := os.ReadFile(f)
		deb.Files["/"+filepath.ToSlash(rel)] = string(data)
		return err
	})
	if err != nil {
		return c.errorf(2, "dpkg-deb: error: %v", err)
	}
	if err := c.writeFile(path.Join(dir, deb.FileName()), deb.Bytes(), 0o644); err != nil {
		return c.errorf(2, "dpkg-deb: error: %v", err)
	}
	fmt.Fprintf(c.Stdout, "dpkg-deb: building package '%s' in '%s'.\n", deb.Name, path.Join(dir, deb.FileName()))
	return 0
}
