package doctor_test

import (
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner/doctor"
)

// TestCRIONodeDevChar: a CRI-O node running the nvidia runtime under
// CRI-O's default cgroup manager (systemd) without /dev/char links is
// warned like a Docker or containerd host, with the file that decides;
// the same node with cgroup_manager = "cgroupfs" is not.
func TestCRIONodeDevChar(t *testing.T) {
	const dropIn = "etc/crio/crio.conf.d/99-nvidia.toml"
	nvidia := "[crio.runtime]\ndefault_runtime = \"nvidia\"\n\n[crio.runtime.runtimes.nvidia]\nruntime_path = \"/usr/bin/nvidia-container-runtime\"\nruntime_type = \"oci\"\n"
	find := func(r *doctor.Report) *doctor.Check {
		for i := range r.Checks {
			if r.Checks[i].ID == "containers.dev-char" {
				return &r.Checks[i]
			}
		}
		return nil
	}
	r := machine{fixture: "ubuntu2204-working", change: writeFile(dropIn, nvidia)}.report(t)
	c := find(r)
	if c == nil || c.Status != doctor.Warning {
		t.Fatalf("CRI-O under its default cgroup manager: %+v", c)
	}
	if !strings.Contains(strings.Join(c.Evidence, "\n"), "/etc/crio/crio.conf.d/99-nvidia.toml: cri-o uses the systemd cgroup driver (its default)") {
		t.Errorf("evidence lacks CRI-O's file:\n%s", strings.Join(c.Evidence, "\n"))
	}
	both := func(t *testing.T, root string) {
		writeFile(dropIn, nvidia)(t, root)
		writeFile("etc/crio/crio.conf", "[crio.runtime]\ncgroup_manager = \"cgroupfs\"\n")(t, root)
	}
	r = machine{fixture: "ubuntu2204-working", change: both}.report(t)
	if c := find(r); c != nil {
		t.Errorf("CRI-O under cgroupfs: %s %s", c.Status, c.Summary)
	}
}
