//go:build realsystem

package realsys

import (
	"io/fs"
	"os"
	"path/filepath"
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

	if obs.NVML.From != "files" {
		t.Errorf("NVML status told from %q, want the files: no module is loaded, so NVML is not started", obs.NVML.From)
	}

	// The human view says the same in words.
	res := r.Gpuenv("observe")
	if res.Code != 0 || !strings.Contains(res.Stdout, "driver not loaded") || !strings.Contains(res.Stdout, upstream) {
		t.Errorf("observe: %s", res)
	}
}

// Looking changes nothing: with the driver's libraries installed and no
// module loaded, NVML started as root would create /dev/nvidiactl. Every
// read-only command, run as root, leaves the root's /dev and the
// machine's exactly as they were.
func TestReadOnlyCommandsCreateNoDeviceNodes(t *testing.T) {
	r := h.NewRoot(t, Base, Mounts{Proc: true, Sys: true})
	r.MustSh("apt-get install -y --no-install-recommends libnvidia-ml1 nvidia-smi")
	r.WriteFile("/root/spec/gpuenv.hcl", "driver {\n  version        = \"535.*\"\n  source         = \"distro\"\n  kernel_modules = \"none\"\n}\n")
	rootDev, machineDev := devEntries(t, r.Path("/dev")), devEntries(t, "/dev")
	for _, args := range [][]string{
		{"observe"}, {"observe", "--json"}, {"plan", "/root/spec"}, {"plan", "--json", "/root/spec"},
		{"doctor"}, {"doctor", "--json"}, {"init"}, {"history"}, {"validate", "/root/spec"},
	} {
		res := r.Gpuenv(args...)
		if res.Code != 0 && res.Code != 2 {
			t.Errorf("gpuenv %s: %s", strings.Join(args, " "), res)
		}
		if got := devEntries(t, r.Path("/dev")); !slices.Equal(got, rootDev) {
			t.Errorf("gpuenv %s changed the root's /dev: %v, was %v", strings.Join(args, " "), got, rootDev)
			rootDev = got
		}
		if got := devEntries(t, "/dev"); !slices.Equal(got, machineDev) {
			t.Errorf("gpuenv %s changed the machine's /dev: %v, was %v", strings.Join(args, " "), got, machineDev)
			machineDev = got
		}
	}
	if _, err := os.Lstat(r.Path("/dev/nvidiactl")); err == nil {
		t.Error("/dev/nvidiactl exists in the root")
	}
}

// devEntries lists a /dev directory's entries (recursively, with their
// types), sorted.
func devEntries(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			// Entries that come and go under the machine's /dev
			// (a pty closed meanwhile) are not what is looked for.
			return nil
		}
		if p != dir && d.IsDir() && (d.Name() == "pts" || d.Name() == "shm" || d.Name() == "mqueue" || d.Name() == "hugepages") {
			return fs.SkipDir
		}
		out = append(out, strings.TrimPrefix(p, dir)+" "+d.Type().String())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func findPackage(obs *facts.Observation, name string) *facts.Package {
	for i, p := range obs.Packages.Packages {
		if p.Name == name {
			return &obs.Packages.Packages[i]
		}
	}
	return nil
}
