//go:build realsystem

package realsys

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner/facts"
)

// rpmSpec is the RPM tier's spec: NVIDIA's driver with its DKMS module,
// held, and the CUDA 12.4 toolkit.
func rpmSpec(driver, cuda string) string {
	return fmt.Sprintf(`driver {
  version           = %q
  source            = "nvidia"
  kernel_modules    = "proprietary"
  blacklist_nouveau = false
  hold              = true
}

cuda {
  version = %q
  source  = "nvidia"
}
`, driver, cuda)
}

// newRPMRepoRoot is an RPM root with the tier's repository, dnf's cache
// filled for it, as a RHEL host with NVIDIA's repository after `dnf
// makecache`.
func newRPMRepoRoot(t testing.TB) *Root {
	t.Helper()
	r := h.NewRPMRoot(t)
	r.BuildRPMRepository(rpmRepoDir, rpmRepository(), rpmModules())
	r.UseRPMRepository(rpmRepoID, "file://"+rpmRepoDir)
	return r
}

// The RPM tier's scenario: Debian's real dnf 4 and rpm in a root gpuenv
// sees as Rocky Linux 9, with a repository laid out like NVIDIA's rhel9
// one. The driver's packages are modular, so an apply before the module
// stream is enabled fails and changes nothing; once the stream is on,
// apply installs the driver (held: dnf versionlock) and the toolkit,
// upgrades both, and two rollbacks bring the root back, offline, to the
// package set, locks and files byte for byte of each step before.
func TestDnfInstallUpgradeRollback(t *testing.T) {
	r := newRPMRepoRoot(t)

	// cuDNN, installed with dnf by the user: observe reads its version
	// from the header and the package that owns it, and gpuenv's
	// transactions leave it alone.
	r.MustSh("dnf -y -q install libcudnn9-devel-cuda-12")
	obs := r.Observe()
	if obs.Packages.Manager != facts.DatabaseRPM {
		t.Fatalf("observe: package database %q, want rpm (the root's os-release is Rocky 9's)", obs.Packages.Manager)
	}
	if !slices.ContainsFunc(obs.CuDNN.Installs, func(c facts.CuDNNInstall) bool {
		return c.Version == "9.1.0" && c.Package == "libcudnn9-cuda-12" && c.PackageVersion == rpmCuDNN+"-1" && c.CUDAMajor == "12"
	}) {
		t.Errorf("observe: cuDNN %+v, want 9.1.0 from libcudnn9-cuda-12 %s-1 for CUDA 12", obs.CuDNN.Installs, rpmCuDNN)
	}

	// The driver's packages are in a module stream dnf hides: an apply
	// before it is enabled fails in dnf's dry run, changing nothing.
	r.WriteFile("/root/rpm/gpuenv.hcl", rpmSpec(rpmDriverOld, rpmCUDAOld))
	res := r.Gpuenv("plan", "--detailed-exitcode", "/root/rpm")
	if res.Code != 2 {
		t.Fatalf("plan: want changes; %s", res)
	}
	for _, p := range []string{"cuda-drivers=" + rpmDriverOld + "-1", rpmToolkit + "=" + rpmCUDAOld + "-1"} {
		if !strings.Contains(res.Stdout, p) {
			t.Errorf("plan does not install %s:\n%s", p, res.Stdout)
		}
	}
	hidden := r.RPMSnapshot()
	res = r.Gpuenv("apply", "--auto-approve", "/root/rpm")
	if res.Code != 1 {
		t.Errorf("apply with the module stream disabled: want exit 1 (failed, nothing changed); %s", res)
	}
	if diff := hidden.Diff(r.RPMSnapshot()); len(diff) > 0 {
		t.Errorf("the failed apply changed the root:\n%s", strings.Join(diff, "\n"))
	}

	r.MustSh("dnf -y -q module enable nvidia-driver:550-dkms")
	empty := r.RPMSnapshot()
	res = r.Gpuenv("apply", "--auto-approve", "/root/rpm")
	if res.Code != 0 {
		t.Fatalf("apply of the install: %s", res)
	}
	r.checkRPMDriver(rpmDriverOld, rpmCUDAOld)
	if res := r.Gpuenv("plan", "--detailed-exitcode", "/root/rpm"); res.Code != 0 || !strings.Contains(res.Stdout, "No changes") {
		t.Errorf("plan after apply: want no changes; %s", res)
	}
	installed := r.RPMSnapshot()

	r.WriteFile("/root/rpm/gpuenv.hcl", rpmSpec(rpmDriverNew, rpmCUDANew))
	if res := r.Gpuenv("apply", "--auto-approve", "/root/rpm"); res.Code != 0 {
		t.Fatalf("apply of the upgrade: %s", res)
	}
	r.checkRPMDriver(rpmDriverNew, rpmCUDANew)
	saved := r.savedRPMs()
	for _, want := range []string{"cuda-drivers-" + rpmDriverOld + "-1.x86_64.rpm", "nvidia-driver-NVML-" + rpmDriverOld + "-1.el9.x86_64.rpm", rpmToolkit + "-" + rpmCUDAOld + "-1.x86_64.rpm"} {
		if !slices.Contains(saved, want) {
			t.Errorf("the generation saved no %s; saved: %v", want, saved)
		}
	}

	// Offline: the repository is gone; the rollback has the package
	// files the generation saved.
	if err := os.Rename(r.Path(rpmRepoDir), r.Path(rpmRepoDir+".gone")); err != nil {
		t.Fatal(err)
	}
	if res := r.Gpuenv("rollback", "--auto-approve"); res.Code != 0 {
		t.Fatalf("offline rollback of the upgrade: %s", res)
	}
	if diff := installed.Diff(r.RPMSnapshot()); len(diff) > 0 {
		t.Errorf("after the rollback of the upgrade the root differs from after the install in %d ways:\n%s", len(diff), strings.Join(diff, "\n"))
	}
	if res := r.Gpuenv("rollback", "--auto-approve"); res.Code != 0 {
		t.Fatalf("offline rollback of the install: %s", res)
	}
	if diff := empty.Diff(r.RPMSnapshot()); len(diff) > 0 {
		t.Errorf("after the rollback of the install the root differs from before it in %d ways:\n%s", len(diff), strings.Join(diff, "\n"))
	}
}

// checkRPMDriver asserts that rpm has exactly the driver's packages at
// driver (epoch 3, cuda-drivers at 0), one instance each, the toolkit and
// its libraries at cuda, version locks on the driver's packages the plan
// holds at that version and no other, and that the driver's files hold
// that version's bytes.
func (r *Root) checkRPMDriver(driver, cuda string) {
	r.t.Helper()
	pkgs := r.RPMs()
	want := map[string]string{"cuda-drivers": driver + "-1.x86_64", rpmToolkit: cuda + "-1.x86_64", rpmLibraries: cuda + "-1.x86_64"}
	for _, n := range rpmDriverNames {
		arch := "x86_64"
		if n == "nvidia-kmod-common" {
			arch = "noarch"
		}
		want[n] = "3:" + driver + "-1.el9." + arch
	}
	for n, v := range want {
		if got := pkgs[n]; len(got) != 1 || got[0] != v {
			r.t.Errorf("rpm -qa: %s %v, want %s", n, got, v)
		}
	}
	locks := r.Versionlocks()
	if len(locks) == 0 {
		r.t.Errorf("no version lock; the spec holds the driver")
	}
	for _, l := range locks {
		if !strings.Contains(l, driver) {
			r.t.Errorf("version lock %q is not on driver %s (all: %v)", l, driver, locks)
		}
	}
	for path, content := range map[string]string{
		"/usr/lib64/libnvidia-ml.so." + driver:            "not a library: NVML " + driver + "\n",
		"/usr/lib64/libcuda.so." + driver:                 "not a library: CUDA driver " + driver + "\n",
		"/usr/bin/nvidia-smi":                             "#!/bin/sh\necho 'NVIDIA-SMI " + driver + " (not the real one)'\n",
		"/usr/local/cuda-12.4/lib64/libcudart.so." + cuda: "not a library: CUDA runtime " + cuda + "\n",
	} {
		if data, err := os.ReadFile(r.Path(path)); err != nil || string(data) != content {
			r.t.Errorf("%s: %q (%v), want %q", path, data, err, content)
		}
	}
	if target, err := os.Readlink(r.Path("/usr/lib64/libnvidia-ml.so.1")); err != nil || target != "libnvidia-ml.so."+driver {
		r.t.Errorf("/usr/lib64/libnvidia-ml.so.1 → %q (%v), want libnvidia-ml.so.%s", target, err, driver)
	}
	obs := r.Observe()
	if obs.Driver.LibraryVersion != driver {
		r.t.Errorf("observe: driver library %q, want %s", obs.Driver.LibraryVersion, driver)
	}
}

// savedRPMs lists the package files under the state directory's
// generations.
func (r *Root) savedRPMs() []string {
	r.t.Helper()
	files, _ := filepath.Glob(r.Path("/var/lib/gpuenv/generations/*/packages/*/*.rpm"))
	var out []string
	for _, f := range files {
		out = append(out, filepath.Base(f))
	}
	return out
}
