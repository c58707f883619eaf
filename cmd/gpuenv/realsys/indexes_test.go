//go:build realsystem

package realsys

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The package indexes as facts, in a real root: the local repository laid
// out like NVIDIA's has the driver and the CUDA toolkit at two versions
// each, and apt's own lists of it and of Debian's archive are what plan
// reads.

// nvidiaDriver is NVIDIA's driver meta package for the 550 branch on
// Debian 12 (cuda-drivers-550) at version v, which depends on its part
// nvidia-driver-cuda at exactly its own version, as NVIDIA's meta
// packages pin their parts. Neither ships a library: NVML stays absent.
func nvidiaDriver(v string) []Deb {
	return []Deb{
		{Name: "cuda-drivers-550", Version: v, Depends: "nvidia-driver-cuda (= " + v + ")",
			Files: map[string]string{"/usr/share/doc/cuda-drivers-550/version": v + "\n"}},
		{Name: "nvidia-driver-cuda", Version: v,
			Files: map[string]string{"/usr/share/doc/nvidia-driver-cuda/version": v + "\n"}},
	}
}

const (
	nvidiaDriverOld = "550.54.15-1"
	nvidiaDriverNew = "550.90.07-1"
)

// nvidiaRepository is the local repository: the 550 driver at two
// versions, cuda-toolkit-12-4 at two versions and cuda-toolkit-12-6.
func nvidiaRepository() []Deb {
	return append(append(nvidiaDriver(nvidiaDriverOld), nvidiaDriver(nvidiaDriverNew)...),
		cudaToolkit("12.4", "12.4.0", "12.4.0-1"),
		cudaToolkit("12.4", "12.4.1", "12.4.1-1"),
		cudaToolkit("12.6", "12.6.3", "12.6.3-1"),
	)
}

// nvidiaSpec is the driver and the toolkit from NVIDIA's repository, or
// with source left out.
func nvidiaSpec(driver, cuda string, source bool) string {
	driverSrc, cudaSrc := "  source            = \"nvidia\"\n", "  source  = \"nvidia\"\n"
	if !source {
		driverSrc, cudaSrc = "", ""
	}
	return fmt.Sprintf("driver {\n  version           = %q\n%s  kernel_modules    = \"proprietary\"\n  blacklist_nouveau = false\n}\n\ncuda {\n  version = %q\n%s}\n",
		driver, driverSrc, cuda, cudaSrc)
}

// execs runs gpuenv inside the root under strace and returns every
// program it started, chroot's own start and gpuenv's left out.
func (r *Root) execs(args ...string) (Result, []string) {
	r.t.Helper()
	trace := filepath.Join(r.t.TempDir(), "execve")
	argv := append([]string{"-f", "-qq", "-e", "trace=execve", "-e", "signal=none", "-o", trace, "chroot", r.Dir, "/usr/local/bin/gpuenv"}, args...)
	cmd := exec.Command("strace", argv...)
	cmd.Env = userEnv
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	res := Result{Args: args, Stdout: out.String(), Stderr: errb.String()}
	if exit, ok := err.(*exec.ExitError); ok {
		res.Code = exit.ExitCode()
	} else if err != nil {
		r.t.Fatalf("strace: %v\n%s", err, errb.String())
	}
	data, err := os.ReadFile(trace)
	if err != nil {
		r.t.Fatal(err)
	}
	var started []string
	for _, line := range strings.Split(string(data), "\n") {
		_, call, ok := strings.Cut(line, "execve(\"")
		if !ok {
			continue
		}
		prog, _, _ := strings.Cut(call, "\"")
		if strings.HasSuffix(prog, "/chroot") || prog == "/usr/local/bin/gpuenv" {
			continue
		}
		started = append(started, strings.TrimSpace(line))
	}
	return res, started
}

// The local NVIDIA-style repository: plan starts no process, converged or
// not; a version the archive lacks fails at plan time naming the versions
// it has; apply installs, upgrades and rolls back the driver and the
// toolkit, pinning the driver's part from the indexes and fetching the old
// package files with one download.
func TestNvidiaRepositoryFromIndexes(t *testing.T) {
	if _, err := exec.LookPath("strace"); err != nil {
		t.Fatalf("this test needs strace (apt-get install strace): %v", err)
	}
	r := h.NewRoot(t, Base, Mounts{Proc: true})
	r.AddRepository(cudaRepo, nvidiaRepository())
	r.WriteFile("/root/nvidia/gpuenv.hcl", nvidiaSpec("550.54.*", "12.4", true))

	res, started := r.execs("plan", "--detailed-exitcode", "/root/nvidia")
	if res.Code != 2 || !strings.Contains(res.Stdout, "cuda-drivers-550="+nvidiaDriverOld) || !strings.Contains(res.Stdout, "cuda-toolkit-12-4=12.4.1-1") {
		t.Fatalf("plan: want cuda-drivers-550=%s and cuda-toolkit-12-4=12.4.1-1; %s", nvidiaDriverOld, res)
	}
	if len(started) > 0 {
		t.Errorf("plan started processes:\n%s", strings.Join(started, "\n"))
	}

	// Versions the archive lacks: each error names what it has.
	for _, tc := range []struct{ spec, want string }{
		// The local repository lists packages only NVIDIA publishes, so
		// it is NVIDIA's repository for planning (a mirror under another
		// name), and the error names what it offers.
		{nvidiaSpec("550.100.*", "12.4", true), `from NVIDIA's repository (file:///srv/cuda-repo), which offers cuda-drivers-550 ` + nvidiaDriverNew + ", " + nvidiaDriverOld + "."},
		{nvidiaSpec("550.54.*", "12.6.2", true), `from NVIDIA's repository (file:///srv/cuda-repo), which offers cuda-toolkit-12-4 12.4.1-1, 12.4.0-1; cuda-toolkit-12-6 12.6.3-1.`},
	} {
		r.WriteFile("/root/lacking/gpuenv.hcl", tc.spec)
		res, started := r.execs("plan", "/root/lacking")
		if res.Code != 1 || !strings.Contains(strings.Join(strings.Fields(res.Stderr), " "), tc.want) {
			t.Errorf("plan of a version the archive lacks: want exit 1 saying %q; %s", tc.want, res)
		}
		if len(started) > 0 {
			t.Errorf("plan of a version the archive lacks started processes:\n%s", strings.Join(started, "\n"))
		}
	}

	if res := r.Gpuenv("apply", "--auto-approve", "/root/nvidia"); res.Code != 0 {
		t.Fatalf("apply: %s", res)
	}
	r.checkNvidiaDriver(nvidiaDriverOld)
	r.checkToolkits(map[string]string{"12.4": "12.4.1"})
	res, started = r.execs("plan", "--detailed-exitcode", "/root/nvidia")
	if res.Code != 0 || !strings.Contains(res.Stdout, "No changes") {
		t.Errorf("plan after apply: want no changes; %s", res)
	}
	if len(started) > 0 {
		t.Errorf("plan of a converged host started processes:\n%s", strings.Join(started, "\n"))
	}

	// What is installed came from NVIDIA's repository and satisfies the
	// spec: with the source left out, it keeps its origin.
	r.WriteFile("/root/nosource/gpuenv.hcl", nvidiaSpec("550.54.*", "12.4", false))
	if res := r.Gpuenv("plan", "--detailed-exitcode", "/root/nosource"); res.Code != 0 || !strings.Contains(res.Stdout, "No changes") {
		t.Errorf("plan without source after apply: want no changes (the origin kept; needs the source inference); %s", res)
	}

	// The upgrade: the driver's part is pinned from the indexes, and the
	// old package files come from one apt-get download (a file:
	// repository's packages never reach the package cache).
	r.WriteFile("/root/nvidia/gpuenv.hcl", nvidiaSpec("550.90.*", "12.4", true))
	if res := r.Gpuenv("apply", "--auto-approve", "/root/nvidia"); res.Code != 0 {
		t.Fatalf("apply of the upgrade: %s", res)
	}
	r.checkNvidiaDriver(nvidiaDriverNew)
	log := r.generationLog(2)
	if n := strings.Count(log, "$ apt-cache"); n != 0 {
		t.Errorf("the upgrade asked apt-cache %d times:\n%s", n, log)
	}
	if n := strings.Count(log, " download -- "); n != 1 {
		t.Errorf("the upgrade ran apt-get download %d times, want once:\n%s", n, log)
	}
	for _, want := range []string{"cuda-drivers-550_" + nvidiaDriverOld + "_", "nvidia-driver-cuda_" + nvidiaDriverOld + "_"} {
		if !containsPrefix(r.savedPackages(), want) {
			t.Errorf("the generation saved no %s…; saved: %v", want, r.savedPackages())
		}
	}
	if res := r.Gpuenv("rollback", "--auto-approve"); res.Code != 0 {
		t.Fatalf("rollback: %s", res)
	}
	r.checkNvidiaDriver(nvidiaDriverOld)
}

// checkNvidiaDriver asserts that dpkg has the driver and its part at
// version, installed.
func (r *Root) checkNvidiaDriver(version string) {
	r.t.Helper()
	pkgs := r.Dpkg()
	for _, name := range []string{"cuda-drivers-550", "nvidia-driver-cuda"} {
		if p := pkgs[name]; p.Version != version || p.Status != "installed" {
			r.t.Errorf("dpkg: %s %+v, want %s installed", name, p, version)
		}
	}
}

// generationLog is the package managers' log of generation n.
func (r *Root) generationLog(n int) string {
	r.t.Helper()
	data, err := os.ReadFile(r.Path(fmt.Sprintf("/var/lib/gpuenv/generations/%d/log", n)))
	if err != nil {
		r.t.Fatal(err)
	}
	return string(data)
}

// An image before its first apt-get update: no list on disk at all. plan
// starts no process, fetches the lists as its first step and shows the
// version as known after apply; apply fetches them, pins the version from
// them and journals it; the host then matches the spec.
func TestEmptyIndexesRefreshFirst(t *testing.T) {
	if _, err := exec.LookPath("strace"); err != nil {
		t.Fatalf("this test needs strace (apt-get install strace): %v", err)
	}
	r := h.NewRoot(t, Base, Mounts{Proc: true})
	r.AddRepository(cudaRepo, nvidiaRepository())
	r.MustSh("rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin")
	r.WriteFile("/root/cuda/gpuenv.hcl", cudaSpec("12.4"))

	res, started := r.execs("plan", "--detailed-exitcode", "/root/cuda")
	if res.Code != 2 || !strings.Contains(res.Stdout, "~ index.apt") || !strings.Contains(res.Stdout, "cuda-toolkit-12-4=(known after apply)") {
		t.Fatalf("plan: want the refresh first and the version known after apply; %s", res)
	}
	if len(started) > 0 {
		t.Errorf("plan started processes:\n%s", strings.Join(started, "\n"))
	}
	res = r.Gpuenv("apply", "--auto-approve", "/root/cuda")
	// A slow mirror adds "… still running" lines between the operation
	// and its end; the refresh is the first operation and ends done.
	if res.Code != 0 || !regexp.MustCompile(`\[1/2\] index\.apt: fetching apt's package indexes …(\s+… still running \(\d+s\))* done`).MatchString(res.Stdout) ||
		!strings.Contains(res.Stdout, "apt: pinned cuda-toolkit-12-4=12.4.1-1") || !strings.Contains(res.Stdout, "The host now matches the spec.") {
		t.Fatalf("apply: want the refresh, then the pin 12.4.1-1; %s", res)
	}
	journal, err := os.ReadFile(r.Path("/var/lib/gpuenv/generations/1/journal"))
	if err != nil || !strings.Contains(string(journal), `"name":"cuda-toolkit-12-4","version":"12.4.1-1"`) {
		t.Errorf("the journal does not record the pin (%v):\n%s", err, journal)
	}
	r.checkToolkits(map[string]string{"12.4": "12.4.1"})
	if res := r.Gpuenv("plan", "--detailed-exitcode", "/root/cuda"); res.Code != 0 || !strings.Contains(res.Stdout, "No changes") {
		t.Errorf("plan after apply: want no changes; %s", res)
	}
	if res := r.Gpuenv("rollback", "--auto-approve"); res.Code != 0 {
		t.Fatalf("rollback: %s", res)
	}
	r.checkToolkits(map[string]string{})
}
