//go:build realsystem

package realsys

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner/facts"
)

// Scenario 3: Debian's real libnvidia-ml1 on a machine without a GPU.
// gpuenv must load the library, learn from its Init that no driver is
// loaded, call nothing else (a call after a failed Init kills the process)
// and report the library's version from its files.
func TestRealNVMLWithoutGPU(t *testing.T) {
	r := h.NewRoot(t, Base, Mounts{Proc: true, Sys: true})

	// Without the library NVML cannot even be loaded: this is what makes
	// the status below the real library's answer rather than a default.
	obs := r.Observe()
	if obs.NVML.Status != "library_not_found" {
		t.Errorf("before libnvidia-ml1: NVML status %q, want library_not_found", obs.NVML.Status)
	}
	if obs.Driver.LibraryVersion != "" || len(obs.Driver.Libraries) != 0 {
		t.Errorf("before libnvidia-ml1: driver libraries %+v", obs.Driver)
	}

	r.MustSh("apt-get install -y --no-install-recommends libnvidia-ml1")
	lib, ok := r.Dpkg()["libnvidia-ml1"]
	if !ok || lib.Status != "installed" {
		t.Fatalf("dpkg: libnvidia-ml1 %+v, want installed", lib)
	}
	upstream, _, _ := strings.Cut(lib.Version, "-")
	if !strings.HasPrefix(upstream, "535.") {
		t.Fatalf("dpkg: libnvidia-ml1 %s, want Debian 12's 535 series", lib.Version)
	}
	file := "/usr/lib/x86_64-linux-gnu/nvidia/current/libnvidia-ml.so." + upstream
	if _, err := os.Stat(r.Path(file)); err != nil {
		t.Fatalf("the package's library: %v", err)
	}

	obs = r.Observe()
	if obs.NVML.Status != "driver_not_loaded" {
		t.Errorf("NVML status %q (%s), want driver_not_loaded", obs.NVML.Status, obs.NVML.Error)
	}
	if obs.NVML.DriverVersion != "" || len(obs.NVML.Devices) != 0 {
		t.Errorf("NVML reported a driver or devices without a GPU: %+v", obs.NVML)
	}
	if obs.Driver.ModuleVersion != "" {
		t.Errorf("kernel module %q reported as loaded", obs.Driver.ModuleVersion)
	}
	if obs.Driver.LibraryVersion != upstream {
		t.Errorf("library version %q, want %q (dpkg's %s)", obs.Driver.LibraryVersion, upstream, lib.Version)
	}
	if !slices.Contains(obs.Driver.Libraries, facts.Library{Path: file, Version: upstream}) {
		t.Errorf("libraries %+v, want %s", obs.Driver.Libraries, file)
	}
	if p := findPackage(obs, "libnvidia-ml1"); p == nil || p.Version != lib.Version || p.State != "installed" {
		t.Errorf("observed package libnvidia-ml1 %+v, dpkg says %+v", p, lib)
	}

	// The human view says the same in words.
	res := r.Gpuenv("observe")
	if res.Code != 0 || !strings.Contains(res.Stdout, "driver not loaded") || !strings.Contains(res.Stdout, upstream) {
		t.Errorf("observe: %s", res)
	}
	// NVML creates its control node when run as root; the root's own
	// /dev takes it, never the machine's (Mounts).
	if _, err := os.Lstat(r.Path("/dev/nvidiactl")); err == nil {
		t.Logf("libnvidia-ml created /dev/nvidiactl inside the root during observe")
	}
}

func findPackage(obs *facts.Observation, name string) *facts.Package {
	for i, p := range obs.Packages.Packages {
		if p.Name == name {
			return &obs.Packages.Packages[i]
		}
	}
	return nil
}
