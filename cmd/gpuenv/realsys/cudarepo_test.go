//go:build realsystem

package realsys

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner/facts"
)

const cudaRepo = "/srv/cuda-repo"

func cudaSpec(version string) string {
	return fmt.Sprintf(`cuda {
  version = %q
  source  = "nvidia"
}
`, version)
}

// libcudnn is a package like NVIDIA's libcudnn9-cuda-12, with the header
// that names cuDNN's version.
var libcudnn = Deb{
	Name:    "libcudnn9-cuda-12",
	Version: "9.1.0.70-1",
	Files: map[string]string{
		"/usr/include/x86_64-linux-gnu/cudnn_version.h": `#ifndef CUDNN_VERSION_H_
#define CUDNN_VERSION_H_

#define CUDNN_MAJOR 9
#define CUDNN_MINOR 1
#define CUDNN_PATCHLEVEL 0

#define CUDNN_VERSION (CUDNN_MAJOR * 10000 + CUDNN_MINOR * 100 + CUDNN_PATCHLEVEL)

#endif
`,
	},
}

// Scenario 6: a local repository laid out like NVIDIA's CUDA repository.
// apply installs CUDA 12.4, upgrades to 12.6 (installed beside it, as
// NVIDIA's versioned toolkits are), and rollback removes 12.6 again; dpkg
// and observe agree at every step.
func TestNvidiaRepositoryLayout(t *testing.T) {
	r := h.NewRoot(t, Base, Mounts{Proc: true})
	r.AddRepository(cudaRepo, []Deb{
		cudaToolkit("12.4", "12.4.1", "12.4.1-1"),
		cudaToolkit("12.6", "12.6.3", "12.6.3-1"),
		libcudnn,
	})

	// cuDNN from the same repository, installed by apt: observe reads
	// its version from the header and the package that owns it.
	r.MustSh("apt-get install -y --no-install-recommends libcudnn9-cuda-12")
	obs := r.Observe()
	if !slices.ContainsFunc(obs.CuDNN.Installs, func(c facts.CuDNNInstall) bool {
		return c.Version == "9.1.0" && c.Package == "libcudnn9-cuda-12" && c.PackageVersion == "9.1.0.70-1" && c.CUDAMajor == "12"
	}) {
		t.Errorf("observe: cuDNN %+v, want 9.1.0 from libcudnn9-cuda-12 9.1.0.70-1 for CUDA 12", obs.CuDNN.Installs)
	}

	r.WriteFile("/root/cuda/gpuenv.hcl", cudaSpec("12.4.1"))
	res := r.Gpuenv("plan", "--detailed-exitcode", "/root/cuda")
	if res.Code != 2 || !strings.Contains(res.Stdout, "cuda-toolkit-12-4=12.4.1-1") {
		t.Fatalf("plan: want cuda-toolkit-12-4=12.4.1-1 installed; %s", res)
	}
	if res := r.Gpuenv("apply", "--auto-approve", "/root/cuda"); res.Code != 0 {
		t.Fatalf("apply 12.4: %s", res)
	}
	r.checkToolkits(map[string]string{"12.4": "12.4.1"})
	if res := r.Gpuenv("plan", "--detailed-exitcode", "/root/cuda"); res.Code != 0 || !strings.Contains(res.Stdout, "No changes") {
		t.Errorf("plan after apply: want no changes; %s", res)
	}

	r.WriteFile("/root/cuda/gpuenv.hcl", cudaSpec("12.6.3"))
	if res := r.Gpuenv("apply", "--auto-approve", "/root/cuda"); res.Code != 0 {
		t.Fatalf("apply 12.6: %s", res)
	}
	r.checkToolkits(map[string]string{"12.4": "12.4.1", "12.6": "12.6.3"})

	if res := r.Gpuenv("rollback", "--auto-approve"); res.Code != 0 {
		t.Fatalf("rollback: %s", res)
	}
	r.checkToolkits(map[string]string{"12.4": "12.4.1"})
	if _, err := os.Stat(r.Path("/usr/local/cuda-12.6")); err == nil {
		t.Errorf("/usr/local/cuda-12.6 is still there after rollback")
	}
}

// Scenario 7: a package whose postinst fails in the middle of a real apt
// transaction. apply stops, reverts, exits 1, and leaves dpkg's package set
// (name, version, selection, status) exactly as it found it.
func TestFailingPostinstReverts(t *testing.T) {
	r := h.NewRoot(t, Base, Mounts{Proc: true})
	broken := cudaToolkit("12.8", "12.8.1", "12.8.1-1")
	broken.Postinst = "#!/bin/sh\necho 'cuda-toolkit-12-8: configuration fails' >&2\nexit 1\n"
	r.AddRepository(cudaRepo, []Deb{cudaToolkit("12.4", "12.4.1", "12.4.1-1"), broken})
	// A held toolkit already there: the revert must keep it and its hold.
	r.MustSh("apt-get install -y --no-install-recommends cuda-toolkit-12-4 && apt-mark hold cuda-toolkit-12-4")
	before := r.Dpkg()

	r.WriteFile("/root/cuda/gpuenv.hcl", cudaSpec("12.8.1"))
	res := r.Gpuenv("apply", "--auto-approve", "/root/cuda")
	if res.Code != 1 {
		t.Fatalf("apply with a failing postinst: want exit 1 (failed, fully reverted); %s", res)
	}
	if !strings.Contains(res.Stdout, "the host is as it was before") {
		t.Errorf("apply does not say the revert is complete: %s", res)
	}
	after := r.Dpkg()
	if !maps.Equal(before, after) {
		for name, p := range after {
			if before[name] != p {
				t.Errorf("dpkg after the revert: %+v, before: %+v", p, before[name])
			}
		}
		for name, p := range before {
			if _, ok := after[name]; !ok {
				t.Errorf("dpkg after the revert has no %s; before: %+v", name, p)
			}
		}
	}
	if audit := r.MustSh("dpkg --audit"); strings.TrimSpace(audit) != "" {
		t.Errorf("dpkg --audit after the revert:\n%s", audit)
	}
	if _, err := os.Stat(r.Path("/usr/local/cuda-12.8")); err == nil {
		t.Errorf("/usr/local/cuda-12.8 is still there after the revert")
	}
	// Nothing is left unfinished: the same spec plans the install again.
	if res := r.Gpuenv("plan", "--detailed-exitcode", "/root/cuda"); res.Code != 2 || !strings.Contains(res.Stdout, "cuda-toolkit-12-8=12.8.1-1") {
		t.Errorf("plan after the revert: want the 12.8 install planned again; %s", res)
	}
}

// checkToolkits asserts that exactly the given toolkits (release → full
// version) are installed, by dpkg and by observe.
func (r *Root) checkToolkits(want map[string]string) {
	r.t.Helper()
	pkgs := r.Dpkg()
	for name, p := range pkgs {
		release, ok := strings.CutPrefix(name, "cuda-toolkit-")
		if !ok || p.Status == "not-installed" {
			continue
		}
		release = strings.ReplaceAll(release, "-", ".")
		if full, ok := want[release]; !ok || p.Status != "installed" || p.Version != full+"-1" {
			r.t.Errorf("dpkg: %s %+v; want %v", name, p, want)
		}
	}
	got := map[string]string{}
	for _, tk := range r.Observe().CUDA.Toolkits {
		got[strings.TrimPrefix(tk.Path, "/usr/local/cuda-")] = tk.Version
		if wantPkg := "cuda-toolkit-" + strings.ReplaceAll(strings.TrimPrefix(tk.Path, "/usr/local/cuda-"), ".", "-"); tk.Package != wantPkg {
			r.t.Errorf("observe: toolkit %s from package %q, want %s", tk.Path, tk.Package, wantPkg)
		}
	}
	if !maps.Equal(got, want) {
		r.t.Errorf("observe: toolkits %v, want %v", got, want)
	}
	for release := range want {
		if _, ok := pkgs["cuda-toolkit-"+strings.ReplaceAll(release, ".", "-")]; !ok {
			r.t.Errorf("dpkg: no cuda-toolkit for %s", release)
		}
	}
}
