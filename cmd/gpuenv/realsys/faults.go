//go:build realsystem

package realsys

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The fault matrix's packages: a repository laid out like NVIDIA's CUDA
// repository, where cuda-toolkit-12-4 depends on cuda-libraries-12-4 at
// exactly its own version and on cuda-toolkit-config-common, so that one
// apt transaction of gpuenv's touches several packages. Every maintainer
// script of theirs can be stopped at a phase (faultHook), and
// cuda-toolkit-config-common is interested in the libraries' directory
// (a file trigger, as libc-bin is in the libraries' ldconfig trigger):
// its postinst regenerates /etc/cuda/libraries.list when it runs,
// "configure" or "triggered".
const (
	faultRepoDir  = "/srv/cuda-repo"
	faultMarkers  = "/run/gpuenv-fault"
	toolkitPkg    = "cuda-toolkit-12-4"
	librariesPkg  = "cuda-libraries-12-4"
	configPkg     = "cuda-toolkit-config-common"
	faultCUDAOld  = "12.4.0"
	faultCUDANew  = "12.4.1"
	librariesList = "/etc/cuda/libraries.list"
)

// faultHook is the start of every maintainer script of the fault
// packages: when the test has made /run/gpuenv-fault/PACKAGE.SCRIPT-ARG
// (postinst-configure, prerm-remove, postrm-purge …), the script says it
// got there and waits, so that the test kills every process in the root
// at exactly that phase of dpkg's work.
func faultHook(pkg, script string) string {
	return fmt.Sprintf(`#!/bin/sh
set -e
f=%s/%s.%s-"$1"
if [ -e "$f" ]; then
	: >"$f.reached"
	while :; do sleep 1; done
fi
`, faultMarkers, pkg, script)
}

func withFaultScripts(d Deb) Deb {
	if d.Preinst == "" {
		d.Preinst = faultHook(d.Name, "preinst")
	}
	if d.Postinst == "" {
		d.Postinst = faultHook(d.Name, "postinst")
	}
	d.Prerm = faultHook(d.Name, "prerm")
	if d.Postrm == "" {
		d.Postrm = faultHook(d.Name, "postrm")
	}
	return d
}

func debVersion(cuda string) string { return cuda + "-1" }

// faultToolkit is cuda-toolkit-12-4 at CUDA release full (12.4.0, 12.4.1).
func faultToolkit(full string) Deb {
	d := cudaToolkit("12.4", full, debVersion(full))
	d.Depends = fmt.Sprintf("%s (= %s), %s", librariesPkg, debVersion(full), configPkg)
	return withFaultScripts(d)
}

// faultLibraries is cuda-libraries-12-4 at CUDA release full: a library
// and a conffile, the loader's path for it, that names the release.
func faultLibraries(full string) Deb {
	return withFaultScripts(Deb{
		Name:    librariesPkg,
		Version: debVersion(full),
		Files: map[string]string{
			"/usr/local/cuda-12.4/lib64/libcudart.so." + full: "not a library: CUDA runtime " + full + "\n",
			"/etc/ld.so.conf.d/cuda-12-4.conf":                "# CUDA " + full + " libraries\n/usr/local/cuda-12.4/lib64\n",
		},
	})
}

var faultConfigCommon = withFaultScripts(Deb{
	Name:    configPkg,
	Version: "12.4.127-1",
	Files: map[string]string{
		"/etc/ld.so.conf.d/000_cuda.conf": "/usr/local/cuda/targets/x86_64-linux/lib\n",
	},
	Triggers: "interest /usr/local/cuda-12.4/lib64\n",
	Postinst: faultHook(configPkg, "postinst") + `case "$1" in
configure|triggered)
	mkdir -p /etc/cuda
	ls /usr/local/cuda-12.4/lib64 >` + librariesList + ` 2>/dev/null || true
	;;
esac
`,
	Postrm: faultHook(configPkg, "postrm") + `if [ "$1" = purge ]; then
	rm -f ` + librariesList + `
	rmdir /etc/cuda 2>/dev/null || true
fi
`,
})

// faultRepository is every package of the fault repository.
func faultRepository() []Deb {
	return []Deb{
		faultConfigCommon,
		faultLibraries(faultCUDAOld), faultToolkit(faultCUDAOld),
		faultLibraries(faultCUDANew), faultToolkit(faultCUDANew),
	}
}

// The two specs of the matrix: the install (CUDA 12.4.0 and alice in
// video: an apt transaction and a group operation) and the upgrade from it
// (CUDA 12.4.1 in place, and a new group render with alice).
func installSpec() string {
	return cudaSpec(faultCUDAOld) + "\ngroup \"video\" {\n  members = [\"alice\"]\n}\n"
}

func upgradeSpec() string {
	return cudaSpec(faultCUDANew) + "\ngroup \"video\" {\n  members = [\"alice\"]\n}\n\ngroup \"render\" {\n  members = [\"alice\"]\n}\n"
}

const specDir = "/root/spec"

// faultRootOptions say how a cell's root is set up.
type faultRootOptions struct {
	// StateTmpfs mounts a small tmpfs at the state directory, so that
	// the faultinject gpuenv can fill it.
	StateTmpfs bool
	// HTTP serves the repository from this process over HTTP on
	// 127.0.0.1 instead of file://.
	HTTP bool
	// Packages are the repository's packages (faultRepository when nil).
	Packages []Deb
	// FakeProc gives the root an empty tmpfs as /proc instead of the
	// machine's procfs, for files the test makes (the reload cells'
	// fake kernel).
	FakeProc bool
}

// faultRoot is a cell's root: Debian 12 minbase, its own empty package
// cache (the shared archive is not mounted: nothing of the cell's may
// land there), the fault repository, cuda-toolkit-config-common installed
// by apt as a system would have it, and the user alice.
type faultRoot struct {
	*Root
	server *repoServer
}

// stateDirSize bounds the state directory's tmpfs: the saved packages of
// the test repository and a few journals fit many times over.
const stateDirSize = "8m"

func newFaultRoot(t *testing.T, opts faultRootOptions) *faultRoot {
	t.Helper()
	r := &faultRoot{Root: h.NewRoot(t, Base, Mounts{Proc: !opts.FakeProc})}
	if opts.FakeProc {
		r.mount("tmpfs", r.Path("/proc"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0755")
	}
	r.unmount(r.Path("/var/cache/apt/archives"))
	if opts.StateTmpfs {
		if err := os.MkdirAll(r.Path("/var/lib/gpuenv"), 0o711); err != nil {
			t.Fatal(err)
		}
		r.mount("tmpfs", r.Path("/var/lib/gpuenv"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size="+stateDirSize+",mode=0711,uid=0,gid=0")
	}
	pkgs := opts.Packages
	if pkgs == nil {
		pkgs = faultRepository()
	}
	r.BuildRepository(faultRepoDir, pkgs)
	uri := "file://" + faultRepoDir
	if opts.HTTP {
		r.server = serveRepository(t, r.Path(faultRepoDir))
		uri = r.server.URL
	}
	r.UseRepository("cuda-repo", uri)
	r.MustSh("apt-get install -y --no-install-recommends " + configPkg + " && useradd -m alice")
	if err := os.MkdirAll(r.Path(faultMarkers), 0o755); err != nil {
		t.Fatal(err)
	}
	return r
}

// useFaultBinary puts the faultinject gpuenv in the root in place of the
// plain one.
func (r *faultRoot) useFaultBinary() {
	r.t.Helper()
	r.copyFile(h.FaultGpuenv(r.t), r.Path("/usr/local/bin/gpuenv"), 0o755)
}

// writeSpec makes spec the root's /root/spec/gpuenv.hcl.
func (r *faultRoot) writeSpec(spec string) { r.WriteFile(specDir+"/gpuenv.hcl", spec) }

// mustApply applies spec as a cell's setup.
func (r *faultRoot) mustApply(spec string) {
	r.t.Helper()
	r.writeSpec(spec)
	if res := r.Gpuenv("apply", "--auto-approve", specDir); res.Code != 0 {
		r.t.Fatalf("setup: apply: %s", res)
	}
}

var (
	faultBuildOnce sync.Once
	faultBuildPath string
	faultBuildErr  error
)

// FaultGpuenv is gpuenv built with -tags faultinject (cmd/gpuenv's
// faulthooks.go), built the first time a cell asks for it.
func (h *Harness) FaultGpuenv(t testing.TB) string {
	t.Helper()
	faultBuildOnce.Do(func() {
		start := time.Now()
		faultBuildPath = filepath.Join(h.bin, "gpuenv-faultinject")
		faultBuildErr = h.build(faultBuildPath, "faultinject")
		if faultBuildErr == nil {
			h.Report("built gpuenv -tags faultinject in %s", since(start))
		}
	})
	if faultBuildErr != nil {
		t.Fatal(faultBuildErr)
	}
	return faultBuildPath
}

// Process is a command running inside the root in the background.
type Process struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	start          time.Time
	done           chan struct{}
	res            Result
}

// StartGpuenv starts gpuenv inside the root with extra environment
// variables, as Gpuenv runs it, without waiting for it.
func (r *Root) StartGpuenv(env []string, args ...string) *Process {
	r.t.Helper()
	argv := append([]string{"/usr/local/bin/gpuenv"}, args...)
	// Bounded as Chroot's commands are: a gpuenv that hangs fails its
	// cell instead of the run.
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	p := &Process{cmd: exec.CommandContext(ctx, "chroot", append([]string{r.Dir}, argv...)...), done: make(chan struct{})}
	p.cmd.Env = append(slices.Clone(userEnv), env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.res.Args = argv
	p.start = time.Now()
	if err := p.cmd.Start(); err != nil {
		cancel()
		r.t.Fatalf("starting %q in the root: %v", argv, err)
	}
	go func() {
		err := p.cmd.Wait()
		cancel()
		p.res.Took = since(p.start)
		p.res.Stdout, p.res.Stderr = p.stdout.String(), p.stderr.String()
		var exit *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &exit):
			p.res.Code = exit.ExitCode()
			if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				p.res.Signal = ws.Signal().String()
			}
		default:
			p.res.Code = -1
			p.res.Signal = err.Error()
		}
		close(p.done)
	}()
	return p
}

// Wait waits for the process to end.
func (p *Process) Wait() Result {
	<-p.done
	return p.res
}

// Exited says whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// RunGpuenv is Gpuenv with extra environment variables.
func (r *Root) RunGpuenv(env []string, args ...string) Result {
	r.t.Helper()
	res := r.StartGpuenv(env, args...).Wait()
	r.t.Logf("gpuenv %s: exit %d%s in %s", strings.Join(args, " "), res.Code, res.Signal, res.Took)
	return res
}

// PowerCut kills every process whose root is inside the root with
// SIGKILL, as a power cut would end them, and returns what it killed. It
// looks again until it finds none: a process not yet killed may have
// started another meanwhile.
func (r *Root) PowerCut() []string {
	var killed []string
	for pass := 0; pass < 100; pass++ {
		found := false
		for _, pid := range r.processesInside() {
			cmdline, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
			if err := unix.Kill(pid, unix.SIGKILL); err == nil {
				found = true
				killed = append(killed, fmt.Sprintf("%d %s", pid, strings.Join(strings.Fields(strings.ReplaceAll(string(cmdline), "\x00", " ")), " ")))
			}
		}
		if !found {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return killed
}

// arm makes the marker that stops the maintainer script phase
// ("cuda-libraries-12-4.preinst-upgrade").
func (r *Root) arm(phase string) {
	r.t.Helper()
	r.WriteFile(faultMarkers+"/"+phase, "")
	os.Remove(r.Path(faultMarkers + "/" + phase + ".reached"))
}

// waitReached waits until a maintainer script reports phase reached, or
// the process ends first (false), and takes the marker away, so that no
// later script stops there.
func (r *Root) waitReached(p *Process, phase string, limit time.Duration) bool {
	defer os.Remove(r.Path(faultMarkers + "/" + phase))
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(r.Path(faultMarkers + "/" + phase + ".reached")); err == nil {
			os.Remove(r.Path(faultMarkers + "/" + phase))
			return true
		}
		if p.Exited() {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// repoServer serves a repository directory over HTTP on 127.0.0.1, which
// the chroot shares with this process.
type repoServer struct {
	URL      string
	srv      *http.Server
	dir      string
	cutNext  atomic.Bool // cut the connection in the middle of the next .deb, then stop
	mu       sync.Mutex
	requests []string
	cut      string // the .deb whose download was cut
}

func serveRepository(t *testing.T, dir string) *repoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &repoServer{URL: "http://" + ln.Addr().String(), dir: dir}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln)
	t.Cleanup(s.Stop)
	return s
}

func (s *repoServer) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	name := path.Clean("/" + req.URL.Path)
	s.mu.Lock()
	s.requests = append(s.requests, req.Method+" "+name)
	s.mu.Unlock()
	if strings.HasSuffix(name, ".deb") && s.cutNext.CompareAndSwap(true, false) {
		data, err := os.ReadFile(filepath.Join(s.dir, name))
		if err == nil {
			s.mu.Lock()
			s.cut = name
			s.mu.Unlock()
			// Half the file, then the network is gone: the connection
			// drops and nothing answers any more.
			w.Header().Set("Content-Length", strconv.Itoa(len(data)))
			w.Header().Set("Content-Type", "application/vnd.debian.binary-package")
			w.WriteHeader(http.StatusOK)
			w.Write(data[:len(data)/2])
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
			go s.Stop()
			panic(http.ErrAbortHandler)
		}
	}
	http.FileServer(http.Dir(s.dir)).ServeHTTP(w, req)
}

// Stop stops serving: connections are closed and new ones refused.
func (s *repoServer) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if s.srv.Shutdown(ctx) != nil {
		s.srv.Close()
	}
}

func (s *repoServer) log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.requests, "\n")
}

// cellOutcome is one cell's line in the matrix.
type cellOutcome struct {
	name   string
	ok     bool
	took   time.Duration
	detail string
}

// matrix collects the cells' outcomes for the summary.
type matrix struct {
	mu    sync.Mutex
	cells []cellOutcome
}

func (m *matrix) add(c cellOutcome) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cells = append(m.cells, c)
}

// cell is one run of the matrix: it keeps what happened, for the matrix
// line and for the failure's evidence.
type cell struct {
	t     *testing.T
	r     *faultRoot
	steps []string // "apply killed", "force-unlock 0", "rollback 3" …
	why   []string // why it failed, first reason first
}

func (c *cell) step(format string, args ...any) {
	c.steps = append(c.steps, fmt.Sprintf(format, args...))
}

// fail records a reason the cell fails and logs its evidence.
func (c *cell) fail(reason, evidence string) {
	c.t.Helper()
	c.why = append(c.why, reason)
	if evidence != "" {
		c.t.Errorf("%s\n%s", reason, evidence)
	} else {
		c.t.Error(reason)
	}
}

func (c *cell) detail() string {
	s := strings.Join(c.steps, "; ")
	if len(c.why) > 0 {
		first := c.why[0]
		if i := strings.IndexByte(first, '\n'); i >= 0 {
			first = first[:i]
		}
		if len(first) > 160 {
			first = first[:160] + "…"
		}
		s += " — " + first
	}
	return s
}

// gpuenv runs gpuenv with args in the cell's root as the step named step;
// when it does not exit 0 the cell fails, the failure called failure.
func (c *cell) gpuenv(step, failure string, args ...string) Result {
	c.t.Helper()
	res := c.r.Gpuenv(args...)
	c.step("%s %s", step, describe(res))
	if res.Code != 0 {
		c.fail(fmt.Sprintf("%s: %s: %s", failure, describe(res), lastLine(res.Stderr+res.Stdout)), res.String())
	}
	return res
}

// faultedBy says how a faulted gpuenv command ended, for finish.
type faultedBy int

const (
	faultedApply faultedBy = iota
	faultedRollback
)

// describe is how a result ended, for the matrix line.
func describe(res Result) string {
	if res.Signal != "" {
		return "killed"
	}
	return "exit " + strconv.Itoa(res.Code)
}

// finish ends a cell as the matrix requires: force-unlock where the holder
// died (or left its lock), at most one `gpuenv rollback --auto-approve`
// where the faulted command left the host changed or unfinished, then the
// host compared with before, and dpkg --audit empty.
func (c *cell) finish(before hostState, kind faultedBy, res Result) {
	c.t.Helper()
	r := c.r
	if res.Code == 0 && res.Signal == "" {
		c.checkStatus(fmt.Sprintf("after the faulted %s exited 0", res.Args[1]))
	}
	_, lockErr := os.Stat(r.Path("/var/lib/gpuenv/lock"))
	if res.Signal != "" || lockErr == nil {
		un := r.Gpuenv("force-unlock")
		c.step("force-unlock %s", describe(un))
		if un.Code != 0 {
			c.fail("force-unlock failed", un.String())
		}
	}
	// An apply that exits 0 changed the host on purpose: rolling it
	// back is the way to before. One that exits 1 says it reverted
	// fully: the host must be as before with no rollback (a plain
	// rollback would undo the apply before it). Anything else left
	// work unfinished.
	rollback := res.Code != 0
	if kind == faultedApply {
		rollback = res.Code != 1
	}
	if res.Signal != "" {
		rollback = true
	}
	if rollback {
		c.gpuenv("rollback", "rollback after the fault", "rollback", "--auto-approve")
	}
	c.compare(before)
}

// compare checks the host against before and that gpuenv sees nothing
// unfinished.
func (c *cell) compare(before hostState) {
	c.t.Helper()
	r := c.r
	if diff := before.diffNow(r.Root); len(diff) > 0 {
		c.fail(fmt.Sprintf("the host differs from before in %d ways: %s", len(diff), diff[0]),
			strings.Join(diff, "\n")+"\n"+before.evidence(r))
	}
	c.checkStatus("at the end")
}

// hostState is a root's state as a cell takes it before the fault: a
// Debian root's Snapshot or an RPM root's RPMSnapshot.
type hostState interface {
	// diffNow says how r differs now from the state.
	diffNow(r *Root) []string
	// evidence is what the package manager and gpuenv say, for a
	// failure's report.
	evidence(r *faultRoot) string
}

func (s *Snapshot) diffNow(r *Root) []string        { return s.Diff(r.Snapshot()) }
func (s *Snapshot) evidence(r *faultRoot) string    { return r.dpkgEvidence() }
func (s *RPMSnapshot) diffNow(r *Root) []string     { return s.Diff(r.RPMSnapshot()) }
func (s *RPMSnapshot) evidence(r *faultRoot) string { return r.rpmEvidence() }

// checkStatus fails the cell when gpuenv's last word was that its run
// finished (or the recovery is over) but the next apply refuses because a
// generation is unfinished: status.json, which apply reads first, was left
// behind. The apply runs without --auto-approve and without a terminal,
// so it changes nothing: it refuses at once, or plans and stops.
func (c *cell) checkStatus(when string) {
	c.t.Helper()
	r := c.r
	st, err := os.ReadFile(r.Path("/var/lib/gpuenv/status.json"))
	if err != nil || !bytes.Contains(st, []byte(`"unfinished": true`)) {
		return
	}
	next := r.Gpuenv("apply", specDir)
	if !strings.Contains(next.Stderr+next.Stdout, "unfinished") {
		return
	}
	hist := r.Gpuenv("history")
	// A plain rollback, without a terminal, shows what it would undo
	// and refuses: what a user told to run it would get.
	rb := r.Gpuenv("rollback")
	c.fail(fmt.Sprintf("%s, the next apply is refused: %s", when, firstErrorLine(next.Stderr+next.Stdout)),
		"status.json:\n"+string(st)+"\n--- gpuenv history:\n"+hist.Stdout+hist.Stderr+
			"\n--- gpuenv rollback (no terminal, not approved):\n"+rb.Stdout+rb.Stderr+"\n--- the next apply:\n"+next.String())
}

// firstErrorLine is the first line of out that reads as a warning or an
// error, else its last line.
func firstErrorLine(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "Error") || strings.HasPrefix(l, "Warning") {
			return strings.TrimSpace(l)
		}
	}
	return lastLine(out)
}

// dpkgEvidence is what dpkg and gpuenv's history say about the cell's
// packages, and the newest generation's package-manager log and saved
// files, for a failure's report.
func (r *faultRoot) dpkgEvidence() string {
	res := r.Sh(`dpkg -l 'cuda-*' 'libcuda1' 'libnvidia-ml1' 'nvidia-smi' 2>&1 | grep '^[a-zA-Z][a-zA-Z]' | tail -n +2
echo '--- tail of /var/log/dpkg.log:'; tail -n 25 /var/log/dpkg.log
echo "--- saved package files"; find /var/lib/gpuenv/generations -path '*/packages/*' -type f -printf '%M %s %p\n' 2>&1 | sort -k3
for gen in $(ls /var/lib/gpuenv/generations 2>/dev/null | sort -n | tail -n 2); do
	echo "--- generation $gen: tail of its log"; tail -n 30 /var/lib/gpuenv/generations/$gen/log 2>&1
done`)
	hist := r.Gpuenv("history")
	return res.Stdout + res.Stderr + "--- gpuenv history:\n" + hist.Stdout + hist.Stderr
}

// dpkgStates is the fault packages' state as dpkg reports it, one line.
func (r *Root) dpkgStates(names ...string) string {
	res := r.Sh(`dpkg-query -W -f='${Package} ${Version} ${db:Status-Abbrev}${db:Status-Eflag}\n' ` + strings.Join(names, " ") + ` 2>&1 || true`)
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(res.Stdout), "\n") {
		out = append(out, strings.Join(strings.Fields(line), " "))
	}
	return strings.Join(out, ", ")
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" && !strings.HasPrefix(l, "Log:") {
			return l
		}
	}
	return ""
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// journalLines counts the whole records of the newest generation's
// journal, gives the file's size after each, and says whether something
// follows the last whole record (a torn one).
func (r *Root) journalLines() (gen, n int, ends []int, torn bool) {
	r.t.Helper()
	ents, err := os.ReadDir(r.Path("/var/lib/gpuenv/generations"))
	if err != nil {
		r.t.Fatal(err)
	}
	for _, e := range ents {
		if id, err := strconv.Atoi(e.Name()); err == nil && id > gen {
			gen = id
		}
	}
	f, err := os.Open(r.Path(fmt.Sprintf("/var/lib/gpuenv/generations/%d/journal", gen)))
	if err != nil {
		r.t.Fatal(err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		r.t.Fatal(err)
	}
	for i, b := range data {
		if b == '\n' {
			ends = append(ends, i+1)
		}
	}
	torn = len(data) > 0 && data[len(data)-1] != '\n'
	return gen, len(ends), ends, torn
}

// damagedSavedPackages lists the package files saved in the generations
// that dpkg-deb cannot read.
func (r *Root) damagedSavedPackages() []string {
	debs, _ := filepath.Glob(r.Path("/var/lib/gpuenv/generations/*/packages/*/*.deb"))
	var bad []string
	for _, d := range debs {
		if err := exec.Command("dpkg-deb", "--info", d).Run(); err != nil {
			fi, _ := os.Stat(d)
			bad = append(bad, fmt.Sprintf("%s (%d bytes)", strings.TrimPrefix(d, r.Path("/var/lib/gpuenv/generations")+"/"), fi.Size()))
		}
	}
	return bad
}
