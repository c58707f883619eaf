//go:build realsystem

package realsys

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// The driver's userspace with kernel_modules = "none": the packages the
// plan names, each pinned to the spec's version. Debian 12 has the driver
// at 535.261.03-1 (bookworm) and 535.309.01-0+deb12u1 (bookworm-security).
var driverPackages = []string{"nvidia-smi", "libnvidia-ml1", "libcuda1"}

// driverCompanions are what driverPackages depend on at exactly their own
// version; apt must be told to take them at the spec's version too.
var driverCompanions = []string{"nvidia-alternative", "libnvidia-ptxjitcompiler1", "libnvidia-pkcs11-openssl3"}

const (
	driverOld = "535.261.03-1"
	driverNew = "535.309.01-0+deb12u1"
)

func driverSpec(version string) string {
	return fmt.Sprintf(`driver {
  version        = %q
  source         = "distro"
  kernel_modules = "none"
  hold           = true
}
`, version)
}

// Scenarios 1 and 2: the distribution's driver userspace is installed
// exactly and held, upgraded to the security update, and rolled back to
// the first version from the package files the generation saved, with the
// package lists, the package cache and the network gone.
func TestDistroDriverInstallUpgradeRollback(t *testing.T) {
	r := h.NewRoot(t, Base, Mounts{Proc: true, Sys: true})

	// Scenario 1: a fresh root.
	r.WriteFile("/root/driver/gpuenv.hcl", driverSpec("535.261.03"))
	res := r.Gpuenv("plan", "--detailed-exitcode", "/root/driver")
	if res.Code != 2 {
		t.Fatalf("plan on a fresh root: want changes (exit 2); %s", res)
	}
	for _, p := range driverPackages {
		if !strings.Contains(res.Stdout, p+"="+driverOld) {
			t.Errorf("plan does not install %s=%s:\n%s", p, driverOld, res.Stdout)
		}
	}
	res = r.Gpuenv("apply", "--auto-approve", "/root/driver")
	if res.Code != 0 {
		t.Fatalf("apply: %s", res)
	}
	r.checkDriver(driverOld)
	if res := r.Gpuenv("plan", "--detailed-exitcode", "/root/driver"); res.Code != 0 || !strings.Contains(res.Stdout, "No changes") {
		t.Errorf("plan after apply: want no changes; %s", res)
	}

	// Scenario 2: the upgrade.
	r.WriteFile("/root/driver/gpuenv.hcl", driverSpec("535.309.01"))
	res = r.Gpuenv("apply", "--auto-approve", "/root/driver")
	if res.Code != 0 {
		t.Fatalf("apply of the upgrade: %s", res)
	}
	r.checkDriver(driverNew)
	if saved := r.savedPackages(); !containsPrefix(saved, "nvidia-smi_"+driverOld+"_") {
		t.Errorf("the generation saved no nvidia-smi %s package file; saved: %v", driverOld, saved)
	}

	// Offline: no package lists, no package cache (the root's own empty
	// one instead of the shared archive) and no name server.
	r.MustSh("rm -rf /var/lib/apt/lists/* /etc/resolv.conf")
	r.unmount(r.Path("/var/cache/apt/archives"))
	if debs, _ := filepath.Glob(r.Path("/var/cache/apt/archives/*.deb")); len(debs) > 0 {
		t.Fatalf("the root's own package cache is not empty: %v", debs)
	}
	res = r.Gpuenv("rollback", "--auto-approve")
	if res.Code != 0 {
		t.Fatalf("offline rollback: %s", res)
	}
	r.checkDriver(driverOld)
	r.WriteFile("/root/driver/gpuenv.hcl", driverSpec("535.261.03"))
	if res := r.Gpuenv("plan", "--detailed-exitcode", "/root/driver"); res.Code != 0 || !strings.Contains(res.Stdout, "No changes") {
		t.Errorf("plan after rollback, offline: want no changes; %s", res)
	}
}

// checkDriver asserts that dpkg has the driver's userspace at version,
// installed and held, the packages they depend on at exactly their own
// version at that version too, and no kernel module package at all.
func (r *Root) checkDriver(version string) {
	r.t.Helper()
	pkgs := r.Dpkg()
	for _, name := range driverPackages {
		p := pkgs[name]
		if p.Version != version || p.Status != "installed" || p.Want != "hold" {
			r.t.Errorf("dpkg: %s %+v, want %s installed and held", name, p, version)
		}
	}
	for _, name := range driverCompanions {
		if p := pkgs[name]; p.Version != version || p.Status != "installed" {
			r.t.Errorf("dpkg: %s %+v, want %s installed", name, p, version)
		}
	}
	for name, p := range pkgs {
		if p.Status != "installed" {
			continue
		}
		if strings.Contains(name, "kernel") || strings.HasSuffix(name, "-dkms") || name == "nvidia-driver" {
			r.t.Errorf("dpkg: %s %s installed, but kernel_modules = \"none\"", name, p.Version)
		}
	}
	obs := r.Observe()
	upstream, _, _ := strings.Cut(version, "-")
	if obs.Driver.LibraryVersion != upstream || obs.NVML.Status != "driver_not_loaded" {
		r.t.Errorf("observe: library %q, NVML %q; want %s and driver_not_loaded", obs.Driver.LibraryVersion, obs.NVML.Status, upstream)
	}
}

// savedPackages lists the package files under the state directory's
// generations.
func (r *Root) savedPackages() []string {
	r.t.Helper()
	var out []string
	filepath.WalkDir(r.Path("/var/lib/gpuenv/generations"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".deb") {
			out = append(out, filepath.Base(p))
		}
		return nil
	})
	return out
}

func containsPrefix(list []string, prefix string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

// unmount takes one of the root's mounts away before the test ends.
func (r *Root) unmount(target string) {
	r.t.Helper()
	for i, m := range r.mounts {
		if m == target {
			if err := unmountRetry(m); err != nil {
				r.t.Fatalf("unmount %s: %v", m, err)
			}
			r.mounts = append(r.mounts[:i], r.mounts[i+1:]...)
			return
		}
	}
	r.t.Fatalf("%s is not mounted by the harness", target)
}
