//go:build realsystem

package realsys

import (
	"os"
	"strings"
	"testing"
)

// largeEnv opts in to the scenarios whose downloads are too large for
// every CI run.
const largeEnv = "GPUENV_REALSYS_LARGE"

// Debian's CUDA 11.8 toolkit, about 1.6 GB of packages: apply installs it
// from the archive, observe reports it from the package, plan is then
// satisfied, and rollback removes it again.
func TestDistroCUDA118Toolkit(t *testing.T) {
	if os.Getenv(largeEnv) != "1" {
		t.Skipf("the 1.6 GB CUDA 11.8 toolkit runs only with %s=1 (docs/development.md's \"Real-system tests\")", largeEnv)
	}
	r := h.NewRoot(t, Base, Mounts{Proc: true})
	r.WriteFile("/root/cuda/gpuenv.hcl", `cuda {
  version = "11.8"
  source  = "distro"
}
`)
	res := r.Gpuenv("plan", "--detailed-exitcode", "/root/cuda")
	if res.Code != 2 || !strings.Contains(res.Stdout, "nvidia-cuda-toolkit") {
		t.Fatalf("plan: want nvidia-cuda-toolkit installed; %s", res)
	}
	if res := r.Gpuenv("apply", "--auto-approve", "/root/cuda"); res.Code != 0 {
		t.Fatalf("apply: %s", res)
	}
	pkg := r.Dpkg()["nvidia-cuda-toolkit"]
	if pkg.Status != "installed" || !strings.HasPrefix(pkg.Version, "11.8") {
		t.Fatalf("dpkg: nvidia-cuda-toolkit %+v, want 11.8 installed", pkg)
	}
	obs := r.Observe()
	found := false
	for _, tk := range obs.CUDA.Toolkits {
		if tk.Package == "nvidia-cuda-toolkit" && strings.HasPrefix(tk.Version, "11.8") {
			found = true
		}
	}
	if !found {
		t.Errorf("observe: toolkits %+v, want 11.8 from nvidia-cuda-toolkit", obs.CUDA.Toolkits)
	}
	if res := r.Gpuenv("plan", "--detailed-exitcode", "/root/cuda"); res.Code != 0 || !strings.Contains(res.Stdout, "No changes") {
		t.Errorf("plan after apply: want no changes; %s", res)
	}
	if res := r.Gpuenv("rollback", "--auto-approve"); res.Code != 0 {
		t.Fatalf("rollback: %s", res)
	}
	if p, ok := r.Dpkg()["nvidia-cuda-toolkit"]; ok && p.Status != "not-installed" && p.Status != "config-files" {
		t.Errorf("dpkg after rollback: nvidia-cuda-toolkit %+v, want it removed", p)
	}
	if tks := r.Observe().CUDA.Toolkits; len(tks) != 0 {
		t.Errorf("observe after rollback: toolkits %+v, want none", tks)
	}
}
