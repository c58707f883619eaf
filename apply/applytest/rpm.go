package applytest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"sort"
	"strings"

	"golang.org/x/tools/txtar"
)

// The RPM side of the fake host. A fake .rpm is a txtar archive like a
// fake .deb: the comment holds "Tag: value" header lines (Name, Epoch,
// Version, Release, Arch, Requires), the files are installed at their
// paths.
//
// The fake RPM database is the text file RPMDBPath inside the root, one
// line per installed package, lines sorted, seven tab-separated fields:
//
//	name  epoch  version  release  arch  requires  files
//
// requires is comma-separated ("libnvidia-ml = 3:550.54.15-1.el9,
// cuda-cudart-12-4"), files space-separated absolute paths. A name may
// have several lines (a transaction interrupted between installing the
// new version and erasing the old leaves both, as rpm does). The fake
// rpm reads it for "rpm -qa --qf FORMAT"; the fake dnf changes it.

// RPMDBPath is the fake RPM database inside the root.
const RPMDBPath = "/var/lib/rpm/gpuenv-fake-rpmdb"

// EnvRPMRepo is the directory of fake .rpm files that the fake dnf's one
// enabled repository holds.
const EnvRPMRepo = "GPUENV_FAKE_RPMREPO"

// RPM is a fake package.
type RPM struct {
	Name, Epoch, Version, Release, Arch string
	// Requires are "name" or "name = evr", comma-separated.
	Requires string
	Files    map[string]string
}

func (r RPM) arch() string {
	if r.Arch == "" {
		return "x86_64"
	}
	return r.Arch
}

func (r RPM) epoch() string {
	if r.Epoch == "" {
		return "0"
	}
	return r.Epoch
}

// EVR is epoch:version-release, the epoch left out when 0, as dnf list
// prints it.
func (r RPM) EVR() string {
	vr := r.Version + "-" + r.Release
	if r.epoch() != "0" {
		return r.epoch() + ":" + vr
	}
	return vr
}

// NEVRA is name-epoch:version-release.arch, the epoch always there.
func (r RPM) NEVRA() string {
	return r.Name + "-" + r.epoch() + ":" + r.Version + "-" + r.Release + "." + r.arch()
}

// FileName is the name dnf download gives the package file.
func (r RPM) FileName() string {
	return r.Name + "-" + r.Version + "-" + r.Release + "." + r.arch() + ".rpm"
}

// Bytes is the fake .rpm file.
func (r RPM) Bytes() []byte {
	hdr := fmt.Sprintf("Name: %s\nEpoch: %s\nVersion: %s\nRelease: %s\nArch: %s\nRequires: %s\n", r.Name, r.epoch(), r.Version, r.Release, r.arch(), r.Requires)
	return filesTxtar(hdr, r.Files)
}

// WriteRPMRepo puts rpms into dir, the repository EnvRPMRepo names.
func WriteRPMRepo(dir string, rpms ...RPM) error { return writePackages(dir, rpms) }

// rpmFile is a parsed fake .rpm with its contents.
type rpmFile struct {
	RPM
	data []byte
}

func parseRPM(data []byte) (*rpmFile, error) {
	ar := txtar.Parse(data)
	r := &rpmFile{data: data, RPM: RPM{Files: map[string]string{}}}
	tags := map[string]*string{"Name": &r.Name, "Epoch": &r.Epoch, "Version": &r.Version, "Release": &r.Release, "Arch": &r.Arch, "Requires": &r.Requires}
	for _, line := range strings.Split(string(ar.Comment), "\n") {
		k, v, _ := strings.Cut(line, ":")
		if p, ok := tags[k]; ok {
			*p = strings.TrimSpace(v)
		}
	}
	if r.Name == "" || r.Version == "" || r.Release == "" {
		return nil, errors.New("not an RPM package file (no header)")
	}
	for _, f := range ar.Files {
		r.Files["/"+f.Name] = string(f.Data)
	}
	return r, nil
}

// rpmInst is one installed package in the fake database.
type rpmInst struct {
	RPM
	files []string
}

type rpmDB struct {
	c    *Call
	pkgs []*rpmInst
}

func openRPMDB(c *Call) (*rpmDB, error) {
	d := &rpmDB{c: c}
	data, err := c.readFile(RPMDBPath)
	if errors.Is(err, fs.ErrNotExist) {
		return d, nil
	}
	if err != nil {
		return nil, err
	}
	for n, line := range strings.Split(string(data), "\n") {
		if line == "" {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 7 {
			return nil, fmt.Errorf("%s line %d: %d fields, want 7", RPMDBPath, n+1, len(f))
		}
		d.pkgs = append(d.pkgs, &rpmInst{RPM: RPM{Name: f[0], Epoch: f[1], Version: f[2], Release: f[3], Arch: f[4], Requires: f[5]}, files: strings.Fields(f[6])})
	}
	return d, nil
}

func (d *rpmDB) save() error {
	var lines []string
	for _, p := range d.pkgs {
		lines = append(lines, strings.Join([]string{p.Name, p.epoch(), p.Version, p.Release, p.arch(), p.Requires, strings.Join(p.files, " ")}, "\t"))
	}
	sort.Strings(lines)
	return d.c.writeFile(RPMDBPath, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}

func (d *rpmDB) named(name string) []*rpmInst {
	var out []*rpmInst
	for _, p := range d.pkgs {
		if p.Name == name {
			out = append(out, p)
		}
	}
	return out
}

// owned reports whether a package other than except owns file p.
func (d *rpmDB) owned(p string, except *rpmInst) bool {
	for _, q := range d.pkgs {
		if q != except && slices.Contains(q.files, p) {
			return true
		}
	}
	return false
}

// add installs r's files and records it, beside any other version.
func (d *rpmDB) add(r *rpmFile) error {
	inst := &rpmInst{RPM: r.RPM}
	inst.Files = nil
	for p, content := range r.Files {
		if err := d.c.writeFile(p, []byte(content), 0o644); err != nil {
			return err
		}
		inst.files = append(inst.files, p)
	}
	sort.Strings(inst.files)
	d.pkgs = append(d.pkgs, inst)
	return nil
}

// erase removes one installed package and the files no other package
// owns, and the directories it leaves empty.
func (d *rpmDB) erase(p *rpmInst) {
	for _, f := range p.files {
		if d.owned(f, p) {
			continue
		}
		os.Remove(d.c.path(f))
		for dir := path.Dir(f); dir != "/"; dir = path.Dir(dir) {
			if os.Remove(d.c.path(dir)) != nil {
				break
			}
		}
	}
	for i, q := range d.pkgs {
		if q == p {
			d.pkgs = append(d.pkgs[:i], d.pkgs[i+1:]...)
			break
		}
	}
}

// fakeRPM answers the queries gpuenv makes: "rpm -qa --qf FORMAT" and
// "rpm -q NAME…".
func fakeRPM(c *Call) int {
	d, err := openRPMDB(c)
	if err != nil {
		return c.errorf(1, "error: cannot open Packages database: %v", err)
	}
	format := "%{NAME}-%{VERSION}-%{RELEASE}.%{ARCH}\n"
	var names []string
	all := false
	for i := 0; i < len(c.Args); i++ {
		switch a := c.Args[i]; {
		case a == "-qa":
			all = true
		case a == "-q":
		case a == "--":
			names = append(names, c.Args[i+1:]...)
			i = len(c.Args)
		case a == "--qf" || a == "--queryformat":
			if i+1 >= len(c.Args) {
				return c.errorf(1, "rpm: option requires an argument -- 'qf'")
			}
			format = rpmUnescape(c.Args[i+1])
			i++
		case strings.HasPrefix(a, "-"):
			return c.errorf(1, "rpm: unknown option %s", a)
		default:
			names = append(names, a)
		}
	}
	show := func(p *rpmInst) {
		tags := strings.NewReplacer("%{=", "%{").Replace(format)
		header := strings.NewReplacer("%{NAME}", p.Name, "%{EPOCHNUM}", p.epoch(), "%{VERSION}", p.Version,
			"%{RELEASE}", p.Release, "%{ARCH}", p.arch(), "%{SOURCERPM}", p.Name+"-"+p.Version+"-"+p.Release+".src.rpm",
			"%{FILEDIGESTALGO}", "8")
		inner, array := strings.CutPrefix(tags, "[")
		if inner, ok := strings.CutSuffix(inner, "]"); array && ok {
			// An array format: a line per file. The fake's files are
			// plain files (no flags: none is a config file) without a
			// recorded digest.
			for _, f := range p.files {
				fmt.Fprint(c.Stdout, strings.NewReplacer("%{FILENAMES}", f, "%{FILEFLAGS:fflags}", "", "%{FILEDIGESTS}", "").Replace(header.Replace(inner)))
			}
			return
		}
		fmt.Fprint(c.Stdout, header.Replace(tags))
	}
	if all {
		for _, p := range d.pkgs {
			show(p)
		}
		return 0
	}
	code := 0
	for _, n := range names {
		l := d.named(n)
		if len(l) == 0 {
			fmt.Fprintf(c.Stdout, "package %s is not installed\n", n)
			code = 1
		}
		for _, p := range l {
			show(p)
		}
	}
	return code
}

// lockEntryName is the package name of a lock entry
// "name-epoch:version-release.arch", "" for another form.
func lockEntryName(e string) string {
	i := strings.LastIndexByte(e, '-')
	if i < 0 {
		return ""
	}
	j := strings.LastIndexByte(e[:i], '-')
	if j <= 0 {
		return ""
	}
	return e[:j]
}

// rpmUnescape turns the backslash escapes rpm reads in a query format
// into the characters.
func rpmUnescape(s string) string {
	return strings.NewReplacer(`\t`, "\t", `\n`, "\n", `\\`, `\`).Replace(s)
}

// RPMState is the fake host's packages as "the same host" compares them:
// each name's installed versions ("3:550.54.15-1.el9.x86_64") and
// whether a version lock holds it. The lock list is compared by its
// entries, not its bytes: dnf versionlock add writes a dated comment.
func RPMState(root string) (map[string]string, error) {
	c := &Call{Root: root, Dir: "/"}
	h, err := hostFor(root)
	if err != nil {
		return nil, err
	}
	c.h = h
	d, err := openRPMDB(c)
	if err != nil {
		return nil, err
	}
	locks := readLocklist(c, locklistPath(c))
	out := map[string]string{}
	for _, p := range d.pkgs {
		v := out[p.Name]
		if v != "" {
			v += " "
		}
		out[p.Name] = v + p.EVR() + "." + p.arch()
	}
	for n := range out {
		if lockedBy(locks, d.named(n)) {
			out[n] += " held"
		}
	}
	// A lock left behind on a package that is not installed is a
	// difference too.
	for _, e := range locks {
		if n := lockEntryName(e); n != "" && out[n] == "" {
			out[n] = "(absent) held"
		}
	}
	return out, nil
}

// SnapshotRPM is Snapshot for a host whose packages are RPMs: the
// database and the version lock list are compared as packages.
func SnapshotRPM(root string, extra ...string) (*State, error) {
	st, err := Snapshot(root, append(extra, RPMDBPath, DefaultLocklist)...)
	if err != nil {
		return nil, err
	}
	st.Packages, err = RPMState(root)
	return st, err
}
