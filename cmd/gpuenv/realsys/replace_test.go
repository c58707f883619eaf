//go:build realsystem

package realsys

import (
	"maps"
	"strings"
	"testing"
)

// -replace with real apt/dpkg: a toolkit applied from a local repository
// has a file damaged, which the plan cannot see ("No changes");
// apply -replace cuda reinstalls the same package version from the
// repository (apt-get install --reinstall), which restores the file and
// leaves dpkg's package set as it was, and the next plan says No changes.
func TestReplaceReinstallsDamagedPackage(t *testing.T) {
	r := h.NewRoot(t, Base, Mounts{Proc: true})
	toolkit := cudaToolkit("12.4", "12.4.1", "12.4.1-1")
	r.AddRepository(cudaRepo, []Deb{toolkit})
	r.WriteFile("/root/cuda/gpuenv.hcl", cudaSpec("12.4.1"))
	if res := r.Gpuenv("apply", "--auto-approve", "/root/cuda"); res.Code != 0 {
		t.Fatalf("apply: %s", res)
	}
	const nvcc = "/usr/local/cuda-12.4/bin/nvcc"
	want := toolkit.Files[nvcc]
	r.WriteFile(nvcc, "damaged\n")
	before := r.Dpkg()

	if res := r.Gpuenv("plan", "--detailed-exitcode", "/root/cuda"); res.Code != 0 || !strings.Contains(res.Stdout, "No changes") {
		t.Fatalf("plan with a damaged file: want no changes (nothing differs in the facts); %s", res)
	}
	res := r.Gpuenv("plan", "--detailed-exitcode", "-replace", "cuda", "/root/cuda")
	if res.Code != 2 || !strings.Contains(res.Stdout, "-/+ cuda") || !strings.Contains(res.Stdout, "apt: reinstall cuda-toolkit-12-4=12.4.1-1") ||
		!strings.Contains(res.Stdout, "Requested with -replace") {
		t.Fatalf("plan -replace cuda: want the toolkit reinstalled at 12.4.1-1; %s", res)
	}
	if res := r.Gpuenv("apply", "--auto-approve", "-replace", "cuda", "/root/cuda"); res.Code != 0 {
		t.Fatalf("apply -replace cuda: %s", res)
	}
	if got := string(r.readFile(nvcc)); got != want {
		t.Errorf("%s after apply -replace: %q, want the package's %q", nvcc, got, want)
	}
	if after := r.Dpkg(); !maps.Equal(before, after) {
		t.Errorf("dpkg's package set changed:\nbefore %v\nafter  %v", before, after)
	}
	if log := r.MustSh("cat /var/lib/gpuenv/generations/2/log"); !strings.Contains(log, "--reinstall") {
		t.Errorf("the generation's log does not show apt-get install --reinstall:\n%s", log)
	}
	if res := r.Gpuenv("plan", "--detailed-exitcode", "/root/cuda"); res.Code != 0 || !strings.Contains(res.Stdout, "No changes") {
		t.Errorf("plan after apply -replace: want no changes; %s", res)
	}
	// Rolled back, the reinstall has nothing to undo in the package set.
	if res := r.Gpuenv("rollback", "--auto-approve"); res.Code != 0 {
		t.Fatalf("rollback of the reinstall: %s", res)
	}
	if after := r.Dpkg(); !maps.Equal(before, after) {
		t.Errorf("dpkg's package set after the rollback:\nbefore %v\nafter  %v", before, after)
	}
	if audit := r.MustSh("dpkg --audit"); strings.TrimSpace(audit) != "" {
		t.Errorf("dpkg --audit:\n%s", audit)
	}
}
