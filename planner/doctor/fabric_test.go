package doctor_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner/doctor"
)

// fmStatus replaces the Fabric Manager paragraph of the working DGX's
// package database with one at version, or removes it when version is "".
func fmStatus(version string) func(*testing.T, string) {
	return func(t *testing.T, root string) {
		t.Helper()
		editFile(t, root, "var/lib/dpkg/status", func(s string) string {
			old := "Package: nvidia-fabricmanager-550\nStatus: install ok installed\nPriority: optional\nSection: multiverse/devel\nInstalled-Size: 9248\nMaintainer: cudatools <cudatools@nvidia.com>\nArchitecture: amd64\nVersion: 550.54.15-1\n"
			repl := ""
			if version != "" {
				repl = "Package: nvidia-fabricmanager-550\nStatus: install ok installed\nArchitecture: amd64\nVersion: " + version + "\n"
			}
			return mustReplace(t, s, old, repl)
		})
	}
}

// TestFabricManager: on a board with NVSwitches, doctor finds Fabric
// Manager missing, at another version than the loaded driver, stopped,
// or not enabled: each is CUDA error 802 now or after the next boot.
func TestFabricManager(t *testing.T) {
	tests := []struct {
		name   string
		change func(*testing.T, string)
		want   finding
	}{
		{"working", nil, finding{id: "fabric.manager", status: doctor.OK, summary: "Fabric Manager 550.54.15 runs",
			evidence: []string{"4 NVSwitches on the PCI bus (H100 NVSwitch, 10de:22a3", "nvidia-fabricmanager-550 550.54.15-1", "pid 2301"}}},
		{"missing", fmStatus(""), finding{id: "fabric.manager", status: doctor.Problem, summary: "not installed: CUDA fails on every GPU of this board with error 802",
			fix: "apt-get install nvidia-fabricmanager-550=550.54.15-1"}},
		{"another version", fmStatus("550.127.05-1"), finding{id: "fabric.manager", status: doctor.Problem, summary: "Fabric Manager 550.127.05 is not the driver's version 550.54.15",
			evidence: []string{"driver 550.54.15 (/proc/driver/nvidia/version)"}, fix: "version = \"550.54.15\""}},
		{"stopped", remove("proc/2301"), finding{id: "fabric.manager", status: doctor.Problem, summary: "installed but not running",
			evidence: []string{"no nv-fabricmanager process"}, fix: "systemctl enable --now nvidia-fabricmanager.service"}},
		{"not enabled", remove("etc/systemd/system/multi-user.target.wants/nvidia-fabricmanager.service"), finding{id: "fabric.manager", status: doctor.Warning, summary: "not enabled",
			fix: "systemctl enable nvidia-fabricmanager.service"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := machine{fixture: "ubuntu2204-working", change: tt.change}.report(t)
			assertFinding(t, r, tt.want)
		})
	}
	// A board without NVSwitches gets no fabric check at all.
	r := machine{fixture: "ubuntu2204-h100-fresh"}.report(t)
	for _, c := range r.Checks {
		if c.ID == "fabric.manager" {
			t.Errorf("a single H100 without NVSwitches has a fabric check: %+v", c)
		}
	}
}

func editFile(t *testing.T, root, rel string, edit func(string) string) {
	t.Helper()
	p := filepath.Join(root, rel)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(edit(string(data))), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustReplace(t *testing.T, s, old, repl string) string {
	t.Helper()
	if !strings.Contains(s, old) {
		t.Fatalf("the fixture lacks %q", old)
	}
	return strings.Replace(s, old, repl, 1)
}
