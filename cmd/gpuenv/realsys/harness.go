//go:build realsystem

// Package realsys is gpuenv's real-system test tier (design "Testing tiers",
// tier 4). Its tests build a real Debian 12 root with mmdebstrap, copy the
// gpuenv binary into it and run gpuenv inside it with chroot, exactly as a
// user would, against real apt, dpkg and Debian's NVIDIA packages. They need
// root, mmdebstrap and the Debian archive, so they sit behind the build tag
// "realsystem" and `go test ./...` never builds them. docs/development.md ("Real-system tests") says
// how to run them.
package realsys

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpuenv/gpuenv/planner/facts"
)

// Sources are the root's apt sources: the NVIDIA packages live in non-free
// and depend on contrib; the newer driver comes from bookworm-security.
var Sources = []string{
	"deb http://deb.debian.org/debian bookworm main contrib non-free",
	"deb http://deb.debian.org/debian bookworm-updates main contrib non-free",
	"deb http://deb.debian.org/debian-security bookworm-security main contrib non-free",
}

// Layer is one cached root tarball: Debian 12 minbase built by mmdebstrap
// (Parent nil), or its parent with more packages installed by apt inside
// it. Scenarios that need the same large packages share a layer, so that
// apt unpacks them once per run instead of once per scenario.
type Layer struct {
	Name    string
	Parent  *Layer
	Include []string
}

// key names the layer's tarball after everything it is built from, so that
// a cache directory kept between runs never serves a root built from an
// older definition.
func (l *Layer) key() string {
	sum := sha256.New()
	for p := l; p != nil; p = p.Parent {
		fmt.Fprintf(sum, "%s|%s|", p.Name, strings.Join(p.Include, ","))
	}
	fmt.Fprint(sum, strings.Join(Sources, "|"))
	return l.Name + "-" + hex.EncodeToString(sum.Sum(nil))[:12]
}

var (
	// Base is a plain Debian 12 minbase with the three sources and their
	// package lists (kept, so that a scenario's apt does not fetch them
	// again).
	Base = &Layer{Name: "bookworm-minbase"}
	// Torch adds Debian's CPU-only python3-torch (about 240 MB of
	// packages with its dependencies, 1 GB installed).
	Torch = &Layer{Name: "bookworm-torch", Parent: Base, Include: []string{"python3-torch"}}
	// Venv adds python3-venv, whose ensurepip gives a new venv its pip.
	Venv = &Layer{Name: "bookworm-venv", Parent: Base, Include: []string{"python3-venv"}}
	// Systemd adds systemd (its systemd-analyze, and deb-systemd-helper
	// from init-system-helpers) and man-db, for installing gpuenv's own
	// package: its units are verified, and their Documentation= needs man.
	Systemd = &Layer{Name: "bookworm-systemd", Parent: Base, Include: []string{"systemd", "man-db"}}
)

// Harness holds what all tests of one run share: the cache directory, the
// gpuenv binary built from this tree, the apt archive of downloaded .debs,
// and the layers built so far.
type Harness struct {
	Dir      string // cache directory
	Gpuenv   string // the binary copied into every root
	Archives string // bind-mounted as every root's /var/cache/apt/archives

	bin     string // this run's directory for the binary
	repo    string // the module gpuenv is built from
	mu      sync.Mutex
	layers  map[string]*layerBuild
	reports []string
}

type layerBuild struct {
	once    sync.Once
	tarball string
	err     error
}

// NewHarness prepares dir (created if missing) and builds gpuenv from the
// module at repo.
func NewHarness(dir, repo string) (*Harness, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the real-system tier needs root: it runs mmdebstrap, mount and chroot")
	}
	for _, tool := range []string{"mmdebstrap", "chroot", "tar", "dpkg-deb", "dpkg-scanpackages"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("the real-system tier needs %s (see docs/development.md's \"Real-system tests\"): %w", tool, err)
		}
	}
	h := &Harness{Dir: dir, Archives: filepath.Join(dir, "archives"), repo: repo, layers: map[string]*layerBuild{}}
	if err := os.MkdirAll(filepath.Join(h.Archives, "partial"), 0o755); err != nil {
		return nil, err
	}
	// The binary is this run's own: runs sharing a cache directory must
	// not test each other's builds.
	bin, err := os.MkdirTemp(dir, "gpuenv-")
	if err != nil {
		return nil, err
	}
	h.bin = bin
	h.Gpuenv = filepath.Join(bin, "gpuenv")
	start := time.Now()
	if err := h.build(h.Gpuenv); err != nil {
		os.RemoveAll(bin)
		return nil, err
	}
	h.Report("built gpuenv in %s", since(start))
	return h, nil
}

// build builds gpuenv from the module into out, with the given build tags.
func (h *Harness) build(out string, tags ...string) error {
	return h.buildLinked(out, "", tags...)
}

// buildLinked is build with linker flags (-X settings of a tagged
// build's test hooks).
func (h *Harness) buildLinked(out, ldflags string, tags ...string) error {
	args := []string{"build", "-o", out}
	if ldflags != "" {
		args = append(args, "-ldflags", ldflags)
	}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	build := exec.Command("go", append(args, "./cmd/gpuenv")...)
	build.Dir = h.repo
	// go-nvml's header marks old calls deprecated; the warnings are not
	// gpuenv's to fix and would bury a real error.
	build.Env = append(os.Environ(), "CGO_ENABLED=1", "CGO_CFLAGS=-O2 -g -Wno-deprecated-declarations")
	if b, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building gpuenv %v: %v\n%s", tags, err, b)
	}
	return nil
}

// Close removes this run's binary; the layers and .debs stay for the
// next run when the directory is kept.
func (h *Harness) Close() error { return os.RemoveAll(h.bin) }

// Report records a line for the summary printed after all tests.
func (h *Harness) Report(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reports = append(h.reports, fmt.Sprintf(format, args...))
}

// Reports are the recorded lines, in order.
func (h *Harness) Reports() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.reports)
}

func since(t time.Time) time.Duration { return time.Since(t).Round(100 * time.Millisecond) }

// Tarball returns layer l's tarball, building it (and its parents) the
// first time a test asks for it.
func (h *Harness) Tarball(t testing.TB, l *Layer) string {
	t.Helper()
	h.mu.Lock()
	b := h.layers[l.key()]
	if b == nil {
		b = &layerBuild{}
		h.layers[l.key()] = b
	}
	h.mu.Unlock()
	b.once.Do(func() {
		// A t.Fatal inside the build ends this goroutine with Once done
		// and nothing recorded; later tests must not take that as success.
		b.err = fmt.Errorf("the build stopped in %s; see its failure", t.Name())
		b.tarball, b.err = h.buildLayer(t, l)
	})
	if b.err != nil {
		t.Fatalf("layer %s: %v", l.Name, b.err)
	}
	return b.tarball
}

func (h *Harness) buildLayer(t testing.TB, l *Layer) (string, error) {
	out := filepath.Join(h.Dir, l.key()+".tar")
	if fi, err := os.Stat(out); err == nil {
		h.Report("layer %s: reused %s (%s)", l.Name, out, mib(fi.Size()))
		return out, nil
	}
	before := dirBytes(h.Archives)
	start := time.Now()
	// A unique partial name: two runs sharing a cache directory may
	// build the same layer at once, and the later rename wins.
	f, err := os.CreateTemp(h.Dir, l.key()+".*.partial")
	if err != nil {
		return "", err
	}
	f.Close()
	tmp := f.Name()
	if l.Parent == nil {
		err = h.mmdebstrap(l, tmp)
	} else {
		err = h.extend(t, l, tmp)
	}
	if err != nil {
		os.Remove(tmp)
		return "", err
	}
	if err := os.Rename(tmp, out); err != nil {
		return "", err
	}
	fi, _ := os.Stat(out)
	h.Report("layer %s: built in %s, tarball %s, downloaded %s of .debs",
		l.Name, since(start), mib(fi.Size()), mib(dirBytes(h.Archives)-before))
	return out, nil
}

// mmdebstrap builds the base root. Its downloads go through the shared
// archive directory (sync-in before, sync-out after), so that a kept cache
// directory serves them again and their size can be reported.
func (h *Harness) mmdebstrap(l *Layer, out string) error {
	args := []string{
		"--mode=root", "--variant=minbase", "--format=tar",
		"--components=main,contrib,non-free",
		"--aptopt=Acquire::Retries \"3\"",
		// The package lists stay in the root: every scenario would
		// otherwise start with an apt-get update of all three suites.
		"--skip=cleanup/apt/lists",
		"--skip=essential/unlink",
		"--setup-hook=mkdir -p \"$1\"/var/cache/apt/archives/",
		"--setup-hook=sync-in " + h.Archives + " /var/cache/apt/archives/",
		"--customize-hook=sync-out /var/cache/apt/archives " + h.Archives,
	}
	if len(l.Include) > 0 {
		args = append(args, "--include="+strings.Join(l.Include, ","))
	}
	args = append(args, "bookworm", out)
	args = append(args, Sources...)
	cmd := exec.Command("mmdebstrap", args...)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("mmdebstrap: %v\n%s", err, log.Bytes())
	}
	return nil
}

// extend installs l.Include into a fresh copy of its parent and packs the
// result.
func (h *Harness) extend(t testing.TB, l *Layer, out string) error {
	r := h.root(t, l.Parent, Mounts{Proc: true})
	// The copy is only needed until it is packed; the test that asked
	// for the layer gets its own root next.
	defer r.teardown()
	res := r.Sh("apt-get install -y --no-install-recommends " + strings.Join(l.Include, " "))
	if res.Code != 0 {
		return fmt.Errorf("installing %v: %s", l.Include, res)
	}
	return r.Pack(out)
}

// Mounts says which kernel filesystems a root gets. /dev is never the
// host's: as root, NVML creates /dev/nvidiactl when it is missing, and it
// must create it in the test root, not on the machine running the tests.
// The root's own /dev holds the static nodes mmdebstrap made.
type Mounts struct {
	Proc bool
	Sys  bool
}

// Root is one scenario's Debian root: a tmpfs holding a fresh copy of a
// layer, with gpuenv at /usr/local/bin/gpuenv.
type Root struct {
	Dir    string
	t      testing.TB
	h      *Harness
	mounts []string
}

// NewRoot gives the test a fresh root from layer l. Everything it mounts is
// unmounted when the test ends, passed or failed.
func (h *Harness) NewRoot(t testing.TB, l *Layer, m Mounts) *Root {
	t.Helper()
	return h.root(t, l, m)
}

func (h *Harness) root(t testing.TB, l *Layer, m Mounts) *Root {
	t.Helper()
	tarball := h.Tarball(t, l)
	start := time.Now()
	dir := filepath.Join(t.TempDir(), "root")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r := &Root{Dir: dir, t: t, h: h}
	t.Cleanup(r.teardown)
	// A tmpfs makes the copy fast and its removal certain: unmounting
	// it drops every file, whatever the scenario left behind.
	r.mount("tmpfs", dir, "tmpfs", 0, "mode=0755")
	r.host("tar", "-C", dir, "--numeric-owner", "-xpf", tarball)
	resolv := filepath.Join(dir, "etc/resolv.conf")
	os.Remove(resolv)
	r.copyFile("/etc/resolv.conf", resolv, 0o644)
	r.copyFile(h.Gpuenv, filepath.Join(dir, "usr/local/bin/gpuenv"), 0o755)
	archives := filepath.Join(dir, "var/cache/apt/archives")
	if err := os.MkdirAll(archives, 0o755); err != nil {
		t.Fatal(err)
	}
	r.mount(h.Archives, archives, "", unix.MS_BIND, "")
	if m.Proc {
		r.mount("proc", filepath.Join(dir, "proc"), "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
	}
	if m.Sys {
		r.mount("sysfs", filepath.Join(dir, "sys"), "sysfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
	}
	t.Logf("root %s from %s ready in %s", dir, l.Name, since(start))
	return r
}

func (r *Root) mount(source, target, fstype string, flags uintptr, data string) {
	r.t.Helper()
	if err := unix.Mount(source, target, fstype, flags, data); err != nil {
		r.t.Fatalf("mount %s on %s: %v", source, target, err)
	}
	r.mounts = append(r.mounts, target)
}

// teardown ends the processes left running inside the root (all started
// by this test), unmounts everything newest first and checks that
// /proc/mounts no longer shows anything under the root.
func (r *Root) teardown() {
	r.killInside()
	for i := len(r.mounts) - 1; i >= 0; i-- {
		m := r.mounts[i]
		if err := unmountRetry(m); err != nil {
			r.t.Errorf("unmount %s: %v; detaching it", m, err)
			unix.Unmount(m, unix.MNT_DETACH)
		}
	}
	r.mounts = nil
	if left := mountsUnder(r.Dir); len(left) > 0 {
		r.t.Errorf("still mounted after the test: %v", left)
	}
}

// unmountRetry unmounts target, waiting a little while it is busy: a
// process killed a moment ago may still hold it.
func unmountRetry(target string) error {
	var err error
	for try := 0; try < 10; try++ {
		if err = unix.Unmount(target, 0); err == nil || !errors.Is(err, unix.EBUSY) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
	return err
}

// killInside kills the processes whose root directory is inside r.Dir.
func (r *Root) killInside() {
	for _, pid := range r.processesInside() {
		r.t.Logf("killing process %d left running inside the root", pid)
		unix.Kill(pid, unix.SIGKILL)
	}
}

// processesInside lists the processes whose root directory is r.Dir or
// below it: the ones a command run in the root started.
func (r *Root) processesInside() []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		root, err := os.Readlink(filepath.Join("/proc", e.Name(), "root"))
		if err != nil || (root != r.Dir && !strings.HasPrefix(root, r.Dir+"/")) {
			continue
		}
		out = append(out, pid)
	}
	return out
}

// mountsUnder lists the mount points at or under dir.
func mountsUnder(dir string) []string {
	data, err := os.ReadFile("/proc/mounts")
	if err != nil {
		return []string{"/proc/mounts: " + err.Error()}
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		// /proc/mounts escapes spaces as \040; the roots have none.
		if f[1] == dir || strings.HasPrefix(f[1], dir+"/") {
			out = append(out, f[1])
		}
	}
	return out
}

// Pack writes the root, less the bind-mounted archive and the kernel
// filesystems, as a tarball.
func (r *Root) Pack(out string) error {
	cmd := exec.Command("tar", "-C", r.Dir, "--numeric-owner", "--one-file-system",
		"--exclude=./var/cache/apt/archives/*", "--exclude=./proc/*", "--exclude=./sys/*", "-cf", out, ".")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("tar: %v\n%s", err, b)
	}
	return nil
}

func (r *Root) host(name string, args ...string) {
	r.t.Helper()
	if b, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		r.t.Fatalf("%s %v: %v\n%s", name, args, err, b)
	}
}

func (r *Root) copyFile(from, to string, mode fs.FileMode) {
	r.t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(to, data, mode); err != nil {
		r.t.Fatal(err)
	}
	if err := os.Chmod(to, mode); err != nil {
		r.t.Fatal(err)
	}
}

// Path is p, a path inside the root, on this machine.
func (r *Root) Path(p string) string { return filepath.Join(r.Dir, p) }

// WriteFile writes a file inside the root, creating its directory.
func (r *Root) WriteFile(p, content string) {
	r.t.Helper()
	if err := os.MkdirAll(filepath.Dir(r.Path(p)), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(r.Path(p), []byte(content), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

// Result is one finished command.
type Result struct {
	Args           []string
	Stdout, Stderr string
	Code           int
	Signal         string // set, with Code -1, when a signal ended it
	Took           time.Duration
}

func (res Result) String() string {
	how := fmt.Sprintf("exited %d", res.Code)
	if res.Signal != "" {
		how = "was killed (" + res.Signal + ")"
	}
	return fmt.Sprintf("%q %s after %s\nstdout:\n%s\nstderr:\n%s", res.Args, how, res.Took, res.Stdout, res.Stderr)
}

// userEnv is the environment of a root login shell: what gpuenv meets when
// a user runs it with sudo.
var userEnv = []string{
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOME=/root",
	"LANG=C.UTF-8",
	"USER=root",
	"LOGNAME=root",
}

// commandTimeout bounds one command: a hung apt or gpuenv fails its test
// instead of the whole run.
const commandTimeout = 20 * time.Minute

// Chroot runs argv inside the root.
func (r *Root) Chroot(env []string, argv ...string) Result {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "chroot", append([]string{r.Dir}, argv...)...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	res := Result{Args: argv, Stdout: stdout.String(), Stderr: stderr.String(), Took: since(start)}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit) && exit.Exited():
		res.Code = exit.ExitCode()
	default:
		r.t.Fatalf("running %q in the root: %v\n%s", argv, err, stderr.Bytes())
	}
	return res
}

// Gpuenv runs gpuenv inside the root as a user would.
func (r *Root) Gpuenv(args ...string) Result {
	r.t.Helper()
	res := r.Chroot(userEnv, append([]string{"/usr/local/bin/gpuenv"}, args...)...)
	r.t.Logf("gpuenv %s: exit %d in %s", strings.Join(args, " "), res.Code, res.Took)
	return res
}

// Sh runs a shell script inside the root, for setting a scenario up and
// checking it afterwards; apt runs without questions.
func (r *Root) Sh(script string) Result {
	r.t.Helper()
	return r.Chroot(append(slices.Clone(userEnv), "DEBIAN_FRONTEND=noninteractive"), "/bin/sh", "-ec", script)
}

// MustSh is Sh that fails the test unless the script succeeds, returning
// its output.
func (r *Root) MustSh(script string) string {
	r.t.Helper()
	res := r.Sh(script)
	if res.Code != 0 {
		r.t.Fatalf("setup failed: %s", res)
	}
	return res.Stdout
}

// Observe runs `gpuenv observe --json` and decodes the document.
func (r *Root) Observe(args ...string) *facts.Observation {
	r.t.Helper()
	res := r.Gpuenv(append([]string{"observe", "--json"}, args...)...)
	if res.Code != 0 {
		r.t.Fatalf("observe failed: %s", res)
	}
	var obs facts.Observation
	if err := json.Unmarshal([]byte(res.Stdout), &obs); err != nil {
		r.t.Fatalf("observe --json printed no observation: %v\n%s", err, res.Stdout)
	}
	return &obs
}

// DpkgPackage is one package as dpkg-query reports it inside the root.
type DpkgPackage struct {
	Name, Version string
	Want          string // "install", "hold", "deinstall", "purge"
	Status        string // "installed", "config-files", …
}

// Dpkg asks the root's dpkg for every package it knows.
func (r *Root) Dpkg() map[string]DpkgPackage {
	r.t.Helper()
	out := r.MustSh(`dpkg-query -W -f='${Package}\t${Version}\t${db:Status-Want}\t${db:Status-Status}\n'`)
	pkgs := map[string]DpkgPackage{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 4 {
			r.t.Fatalf("dpkg-query printed %q", line)
		}
		pkgs[f[0]] = DpkgPackage{Name: f[0], Version: f[1], Want: f[2], Status: f[3]}
	}
	return pkgs
}

// dirBytes is the size of the regular files directly in dir.
func dirBytes(dir string) int64 {
	ents, _ := os.ReadDir(dir)
	var n int64
	for _, e := range ents {
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
	}
	return n
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
