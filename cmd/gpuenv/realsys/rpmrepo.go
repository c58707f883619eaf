//go:build realsystem

package realsys

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The RPM tier runs Debian 12's own dnf 4 and rpm 4.18 in a root that
// gpuenv observes as Rocky Linux 9: a Debian root with dnf, rpm and dnf's
// plugins (versionlock among them) installed by apt, its os-release
// replaced, and an RPM database of its own at /var/lib/rpm, as RHEL keeps
// it. The RPM database starts empty: every RPM the root has is one the
// test built, from a repository laid out like NVIDIA's rhel9/x86_64.
// gpuenv runs dnf and rpm inside the root as it runs them on a real RHEL
// host; the root's Debian packages are dpkg's, which gpuenv does not read
// on an RPM-family host.
var DNF = &Layer{Name: "bookworm-dnf", Parent: Base, Include: []string{"dnf", "dnf-plugins-core", "rpm"}}

// RPM is a small binary package built with rpmbuild: named, versioned and
// laid out as NVIDIA's RHEL repository has it, with files whose bytes the
// tests check and scriptlets that can be stopped at their phase.
type RPM struct {
	Name             string
	Epoch            int
	Version, Release string
	Arch             string            // "x86_64" when empty, or "noarch"
	Files            map[string]string // absolute path → content; /etc/ files are %config(noreplace)
	Symlinks         map[string]string // absolute path → target
	Dirs             []string          // directories the package owns (%dir), removed with it
	Requires         []string          // "name = epoch:version-release", as a spec writes them
	Provides         []string
	// Scriptlet bodies (sh), by scriptlet: "pre", "post", "preun",
	// "postun", "pretrans", "posttrans".
	Scriptlets map[string]string
}

func (p RPM) arch() string {
	if p.Arch == "" {
		return "x86_64"
	}
	return p.Arch
}

// EVR is the version as rpm -qa and dnf print it: the epoch left out when 0.
func (p RPM) EVR() string {
	vr := p.Version + "-" + p.Release
	if p.Epoch != 0 {
		return strconv.Itoa(p.Epoch) + ":" + vr
	}
	return vr
}

// FileName is the package file's name as NVIDIA's repository has it.
func (p RPM) FileName() string {
	return p.Name + "-" + p.Version + "-" + p.Release + "." + p.arch() + ".rpm"
}

// specFile is the package's spec: the files are copied into the build
// root from tree; nothing is compiled, stripped or post-processed, so that
// the package holds exactly the bytes the test wrote.
func (p RPM) specFile(tree string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Name: %s\n", p.Name)
	if p.Epoch != 0 {
		fmt.Fprintf(&b, "Epoch: %d\n", p.Epoch)
	}
	fmt.Fprintf(&b, "Version: %s\nRelease: %s\nSummary: %s test package, laid out like NVIDIA's\nLicense: NVIDIA Proprietary\n", p.Version, p.Release, p.Name)
	if p.Arch == "noarch" {
		b.WriteString("BuildArch: noarch\n")
	}
	for _, r := range p.Requires {
		fmt.Fprintf(&b, "Requires: %s\n", r)
	}
	for _, r := range p.Provides {
		fmt.Fprintf(&b, "Provides: %s\n", r)
	}
	// No automatic dependencies (the files are not real ELF objects or
	// scripts rpm should read) and no post-processing of the build root.
	b.WriteString("AutoReqProv: no\n%global __os_install_post %{nil}\n%global _build_id_links none\n%global debug_package %{nil}\n")
	fmt.Fprintf(&b, "\n%%description\n%s, built by gpuenv's real-system tests.\n", p.Name)
	fmt.Fprintf(&b, "\n%%install\nmkdir -p %%{buildroot}\ncp -a %s/. %%{buildroot}/\n", tree)
	for _, s := range []string{"pretrans", "pre", "post", "preun", "postun", "posttrans"} {
		if body := p.Scriptlets[s]; body != "" {
			fmt.Fprintf(&b, "\n%%%s\n%s\n", s, strings.TrimRight(body, "\n"))
		}
	}
	b.WriteString("\n%files\n")
	for _, d := range slices.Sorted(slices.Values(p.Dirs)) {
		fmt.Fprintf(&b, "%%dir %s\n", d)
	}
	for _, f := range slices.Sorted(maps.Keys(p.Files)) {
		if strings.HasPrefix(f, "/etc/") {
			fmt.Fprintf(&b, "%%config(noreplace) %s\n", f)
		} else {
			fmt.Fprintf(&b, "%s\n", f)
		}
	}
	for _, f := range slices.Sorted(maps.Keys(p.Symlinks)) {
		fmt.Fprintf(&b, "%s\n", f)
	}
	return b.String()
}

// Build writes the package file into dir (on this machine) and returns its
// path.
func (p RPM) Build(t testing.TB, dir string) string {
	t.Helper()
	work := t.TempDir()
	tree := filepath.Join(work, "tree")
	for _, d := range append([]string{"/"}, p.Dirs...) {
		if err := os.MkdirAll(filepath.Join(tree, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for f, content := range p.Files {
		full := filepath.Join(tree, f)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if strings.HasPrefix(content, "#!") {
			mode = 0o755
		}
		if err := os.WriteFile(full, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	for f, target := range p.Symlinks {
		full := filepath.Join(tree, f)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, full); err != nil {
			t.Fatal(err)
		}
	}
	spec := filepath.Join(work, p.Name+".spec")
	if err := os.WriteFile(spec, []byte(p.specFile(tree)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("rpmbuild", "-bb", "--quiet",
		"--define", "_topdir "+filepath.Join(work, "top"),
		"--define", "_rpmdir "+dir,
		"--define", "_rpmfilename %{NAME}-%{VERSION}-%{RELEASE}.%{ARCH}.rpm",
		// The host's rpm database is not the root's; the packages
		// declare no build dependencies anyway.
		"--nodeps",
		spec)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("rpmbuild %s: %v\n%s\nspec:\n%s", p.Name, err, b, p.specFile(tree))
	}
	return filepath.Join(dir, p.FileName())
}

// BuildRPMRepository builds rpms into a repository at dir inside the
// root, one directory as NVIDIA's rhel9/x86_64 is, indexed by createrepo_c;
// with modules (a modules.yaml document), the module streams' metadata is
// added to repodata with modifyrepo_c, as NVIDIA's repository carries it.
func (r *Root) BuildRPMRepository(dir string, rpms []RPM, modules string) {
	r.t.Helper()
	out := r.Path(dir)
	// rpmbuild spends its time waiting on its own shell steps: a few at
	// once keep the build short on two cores.
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for _, p := range rpms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			p.Build(r.t, out)
		}()
	}
	wg.Wait()
	if r.t.Failed() {
		r.t.FailNow()
	}
	if b, err := exec.Command("createrepo_c", "--quiet", "--no-database", out).CombinedOutput(); err != nil {
		r.t.Fatalf("createrepo_c %s: %v\n%s", out, err, b)
	}
	if modules != "" {
		yaml := filepath.Join(r.t.TempDir(), "modules.yaml")
		if err := os.WriteFile(yaml, []byte(modules), 0o644); err != nil {
			r.t.Fatal(err)
		}
		if b, err := exec.Command("modifyrepo_c", "--mdtype=modules", yaml, filepath.Join(out, "repodata")).CombinedOutput(); err != nil {
			r.t.Fatalf("modifyrepo_c %s: %v\n%s", out, err, b)
		}
	}
}

// UseRPMRepository lists the repository at uri in the root's
// /etc/yum.repos.d as id (unsigned: gpgcheck=0, the test trusts its own
// packages) and fills dnf's metadata cache for it, as `dnf makecache`
// does on a host.
func (r *Root) UseRPMRepository(id, uri string) {
	r.t.Helper()
	r.WriteFile("/etc/yum.repos.d/"+id+".repo", fmt.Sprintf("[%s]\nname=%s\nbaseurl=%s\nenabled=1\ngpgcheck=0\nmetadata_expire=never\n", id, id, uri))
	r.MustSh("dnf -q makecache")
}

// rpmBase stands for what a RHEL base system's packages provide that the
// test packages need: bash's /bin/sh, which every scriptlet requires. The
// root has /bin/sh (Debian's dash); rpm's database has to know it.
var rpmBase = RPM{Name: "gpuenv-test-base", Version: "9.4", Release: "1.el9", Arch: "noarch", Provides: []string{"/bin/sh"}}

// rockyOSRelease is Rocky Linux 9.4's /etc/os-release, as the rhel9
// fixture root has it.
const rockyOSRelease = `NAME="Rocky Linux"
VERSION="9.4 (Blue Onyx)"
ID="rocky"
ID_LIKE="rhel centos fedora"
VERSION_ID="9.4"
PLATFORM_ID="platform:el9"
PRETTY_NAME="Rocky Linux 9.4 (Blue Onyx)"
`

// NewRPMRoot gives the test a fresh root of the DNF layer made to look
// like Rocky Linux 9 to gpuenv and to dnf: the os-release, the RPM
// database at /var/lib/rpm (Debian's rpm keeps it in ~/.rpmdb), dnf's
// $releasever (which dnf would read from the release package, which an
// RPM database holding only test packages lacks) and platform, the
// versionlock plugin on. The Debian archive is not mounted: dnf keeps its
// own cache.
func (h *Harness) NewRPMRoot(t testing.TB) *Root {
	t.Helper()
	r := h.NewRoot(t, DNF, Mounts{Proc: true})
	r.unmount(r.Path("/var/cache/apt/archives"))
	if err := os.Remove(r.Path("/etc/os-release")); err != nil {
		t.Fatal(err)
	}
	r.WriteFile("/etc/os-release", rockyOSRelease)
	r.WriteFile("/etc/rpm/macros.dbpath", "%_dbpath /var/lib/rpm\n")
	r.WriteFile("/etc/dnf/vars/releasever", "9\n")
	r.WriteFile("/etc/dnf/plugins/versionlock.conf", "[main]\nenabled = 1\nlocklist = /etc/dnf/plugins/versionlock.list\n")
	// Debian enables dnf-plugins-core's local plugin, which RHEL ships
	// apart and does not install: its repository of every installed
	// package would be a second, GPG-checked source of each.
	r.WriteFile("/etc/dnf/plugins/local.conf", "[main]\nenabled = 0\n")
	// The directories RHEL's own packages (filesystem, dracut, kmod)
	// own: an RPM that puts a file there leaves them behind when it goes.
	r.MustSh("mkdir -p /etc/dracut.conf.d /usr/lib/modprobe.d /usr/lib64 /usr/src /usr/include && rpm --initdb && test -e /var/lib/rpm/rpmdb.sqlite")
	rpmBase.Build(t, r.Path("/root/base"))
	r.MustSh("rpm -i /root/base/" + rpmBase.FileName() + " && rm -r /root/base")
	return r
}

// RPMs asks the root's rpm for every installed package: name → its
// installed instances, "epoch:version-release.arch" (the epoch left out
// when 0), sorted.
func (r *Root) RPMs() map[string][]string {
	r.t.Helper()
	out := r.MustSh(`rpm -qa --qf '%{NAME}\t%{EPOCHNUM}:%{VERSION}-%{RELEASE}.%{ARCH}\n'`)
	pkgs := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		name, v, ok := strings.Cut(line, "\t")
		if !ok {
			r.t.Fatalf("rpm -qa printed %q", line)
		}
		pkgs[name] = append(pkgs[name], strings.TrimPrefix(v, "0:"))
	}
	for _, l := range pkgs {
		slices.Sort(l)
	}
	return pkgs
}

// Versionlocks is the versionlock plugin's list in the root: its entries,
// without the comments dnf writes above each.
func (r *Root) Versionlocks() []string {
	r.t.Helper()
	data, err := os.ReadFile(r.Path("/etc/dnf/plugins/versionlock.list"))
	if err != nil && !os.IsNotExist(err) {
		r.t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	slices.Sort(out)
	return out
}

// rpmSnapshotTrees are the trees whose files an RPMSnapshot compares: the
// configuration, and where the tier's packages put files.
var rpmSnapshotTrees = []string{"/etc", "/usr/local", "/usr/bin", "/usr/lib64", "/usr/src", "/usr/include", "/usr/lib/modprobe.d"}

// RPMSnapshot is what "the root is as it was" means for an RPM root:
// every package rpm has installed, each instance with its
// epoch:version-release.arch; the versionlock list's entries; every file
// of rpmSnapshotTrees with its bytes, mode, owner and symlink target; and
// what `rpm -Va` says of the installed packages' files against rpm's
// database (nothing, when each file is as its package has it).
type RPMSnapshot struct {
	Packages map[string]string // name → its instances, ", "-joined
	Locks    string
	Files    map[string]FileState
	Verify   string
}

// RPMSnapshot records the root's state. It runs rpm -qa and rpm -Va
// inside the root.
func (r *Root) RPMSnapshot() *RPMSnapshot {
	r.t.Helper()
	s := &RPMSnapshot{Packages: map[string]string{}, Files: map[string]FileState{}}
	for name, l := range r.RPMs() {
		s.Packages[name] = strings.Join(l, ", ")
	}
	s.Locks = strings.Join(r.Versionlocks(), "\n")
	r.snapshotFiles(rpmSnapshotTrees, s.Files)
	// The plugin writes a dated comment above each entry it adds: a lock
	// restored by `dnf versionlock add` is the same lock at another
	// time. The entries are compared, as Locks.
	delete(s.Files, "/etc/dnf/plugins/versionlock.list")
	res := r.Sh("rpm -Va 2>&1")
	s.Verify = strings.TrimSpace(res.Stdout)
	if res.Code != 0 && s.Verify == "" {
		s.Verify = fmt.Sprintf("rpm -Va exited %d", res.Code)
	}
	return s
}

// Diff says how after differs from s, one line (or a few) per
// difference; nothing when they are the same.
func (s *RPMSnapshot) Diff(after *RPMSnapshot) []string {
	out := differences(s.Packages, after.Packages,
		func(name, b string) string { return fmt.Sprintf("package %s: was %s, now absent", name, b) },
		func(name, a string) string { return fmt.Sprintf("package %s: was absent, now %s", name, a) },
		func(name, b, a string) string { return fmt.Sprintf("package %s: was %s, now %s", name, b, a) })
	if s.Locks != after.Locks {
		out = append(out, "versionlock list changed:\n"+indent(lineDiff(s.Locks, after.Locks)))
	}
	out = append(out, differences(s.Files, after.Files,
		func(p string, b FileState) string { return fmt.Sprintf("file %s: was %s, now absent", p, b) },
		func(p string, a FileState) string { return fmt.Sprintf("file %s: was absent, now %s", p, a) },
		func(p string, b, a FileState) string {
			line := fmt.Sprintf("file %s: was %s, now %s", p, b, a)
			if a.Sum != b.Sum && (a.Text != "" || b.Text != "") {
				line += "\n" + indent(lineDiff(b.Text, a.Text))
			}
			return line
		})...)
	if after.Verify != s.Verify {
		out = append(out, "rpm -Va:\n"+indent(after.Verify))
	}
	return out
}
