package doctor_test

import (
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner/doctor"
	"github.com/gpuenv/gpuenv/planner/facts"
)

func migObservation() *facts.Observation {
	gi := func(profile string, id, start, size uint32, slices int, uuid string, pids ...uint32) facts.GPUInstance {
		ci := facts.ComputeInstance{Slices: slices, Profile: profile, UUID: uuid}
		for _, p := range pids {
			ci.Processes = append(ci.Processes, facts.GPUProcess{PID: p})
		}
		return facts.GPUInstance{ID: id, ProfileID: map[string]int{"3g.20gb": 2, "2g.10gb": 1, "7g.40gb": 4}[profile], Profile: profile, Start: start, Size: size, Compute: []facts.ComputeInstance{ci}}
	}
	return &facts.Observation{
		NVML: facts.NVML{Status: "ok", Devices: []facts.GPUDevice{
			{Index: 0, UUID: "GPU-00000000-0000-0000-0000-000000000000", Name: "NVIDIA A100-SXM4-40GB", PersistenceMode: "enabled", MIGMode: "enabled", MIGModePending: "enabled", MIGDevices: 2,
				GPUInstances: []facts.GPUInstance{gi("2g.10gb", 1, 0, 2, 2, "MIG-aaaaaaaa-0000-0000-0000-000000000001"), gi("3g.20gb", 0, 4, 4, 3, "MIG-aaaaaaaa-0000-0000-0000-000000000002", 4242)}},
			{Index: 1, UUID: "GPU-00000000-0000-0000-0000-000000000001", Name: "NVIDIA A100-SXM4-40GB", PersistenceMode: "disabled", MIGMode: "disabled", MIGModePending: "enabled"},
			{Index: 2, UUID: "GPU-00000000-0000-0000-0000-000000000002", Name: "NVIDIA A100-SXM4-40GB", PersistenceMode: "enabled", MIGMode: "enabled", MIGModePending: "enabled", MIGDevices: 1,
				GPUInstances: []facts.GPUInstance{gi("7g.40gb", 0, 0, 8, 7, "MIG-aaaaaaaa-0000-0000-0000-000000000003")}},
		}},
		Units: []facts.Unit{{Name: "gpuenv-mig.service", File: &facts.FileDigest{Path: "/etc/systemd/system/gpuenv-mig.service"}, Enabled: true,
			MIGLayout: map[string][]string{
				"GPU-00000000-0000-0000-0000-000000000000": {"2:4:4:3", "1:0:2:2"},
				"GPU-00000000-0000-0000-0000-000000000002": {"2:0:4:3", "2:4:4:3"},
			}}},
	}
}

func check(t *testing.T, r *doctor.Report, id string) doctor.Check {
	t.Helper()
	for _, c := range r.Checks {
		if c.ID == id {
			return c
		}
	}
	t.Fatalf("no check %s in %+v", id, r.Checks)
	return doctor.Check{}
}

// TestMIGChecks: doctor finds a MIG mode that waits for a reset, a GPU in
// MIG mode without persistence, a layout other than the one the spec
// applied (its boot unit's), and the processes holding instances.
func TestMIGChecks(t *testing.T) {
	r := doctor.Run(doctor.Input{Obs: migObservation()})
	for _, c := range []struct {
		id     string
		status doctor.Status
		words  string
	}{
		{"gpu.mig-pending", doctor.Warning, "MIG mode waits for a GPU reset: GPU 1 is disabled and becomes enabled"},
		{"gpu.mig-persistence", doctor.Warning, "GPU 1 use MIG without persistence mode"},
		{"gpu.mig-layout", doctor.Warning, "The MIG layout of GPU 2 is not the one the spec last applied"},
		{"gpu.mig-processes", doctor.OK, "MIG instances in use, which gpuenv does not destroy until their processes end: GPU 0 3g.20gb@4"},
	} {
		got := check(t, r, c.id)
		if got.Status != c.status || !strings.Contains(got.Summary, c.words) {
			t.Errorf("%s: %s %q, want %s with %q", c.id, got.Status, got.Summary, c.status, c.words)
		}
	}
	if ev := check(t, r, "gpu.mig-processes").Evidence; len(ev) != 1 || !strings.Contains(ev[0], "pid 4242") {
		t.Errorf("held instances: %q", ev)
	}
	if f := check(t, r, "gpu.mig-pending").Fix; f == nil || len(f.Commands) != 1 || f.Commands[0] != "nvidia-smi -r -i 1" {
		t.Errorf("pending fix %+v", f)
	}

	// The same layout at the same placements is the applied one.
	obs := migObservation()
	obs.Units[0].MIGLayout["GPU-00000000-0000-0000-0000-000000000002"] = []string{"4:0:8:7"}
	if c := check(t, doctor.Run(doctor.Input{Obs: obs}), "gpu.mig-layout"); c.Status != doctor.OK {
		t.Errorf("matching layouts: %s %q %q", c.Status, c.Summary, c.Evidence)
	}
}

// TestMIGVisibleDevices: CUDA_VISIBLE_DEVICES naming MIG devices is
// resolved against the MIG devices NVML lists.
func TestMIGVisibleDevices(t *testing.T) {
	obs := migObservation()
	r := doctor.Run(doctor.Input{Obs: obs, Session: []facts.Assignment{{Name: "CUDA_VISIBLE_DEVICES", Value: "MIG-aaaaaaaa-0000-0000-0000-000000000002"}}})
	c := check(t, r, "env.cuda-visible-devices")
	if c.Status != doctor.OK || !strings.Contains(strings.Join(c.Evidence, "\n"), "MIG-aaaaaaaa-0000-0000-0000-000000000002 is GPU 0 instance 3g.20gb@4") {
		t.Errorf("a MIG device of the host: %s %q %q", c.Status, c.Summary, c.Evidence)
	}
	r = doctor.Run(doctor.Input{Obs: obs, Session: []facts.Assignment{{Name: "CUDA_VISIBLE_DEVICES", Value: "MIG-bbbbbbbb-0000-0000-0000-000000000009"}}})
	if c := check(t, r, "env.cuda-visible-devices"); c.Status != doctor.Problem || !strings.Contains(c.Summary, "which no MIG device of this host has") {
		t.Errorf("a MIG device of another host: %s %q", c.Status, c.Summary)
	}
}

// A compute mode gpuenv-compute-mode.service sets on a GPU in MIG mode
// does not hold there (NVML takes it per MIG device): doctor warns,
// naming the GPU; a unit that sets only other GPUs, or the default, is
// fine; without the unit there is nothing to check.
func TestMIGComputeModeCheck(t *testing.T) {
	unit := func(modes map[string]string) facts.Unit {
		return facts.Unit{Name: "gpuenv-compute-mode.service", File: &facts.FileDigest{Path: "/etc/systemd/system/gpuenv-compute-mode.service"}, Enabled: true, ComputeModes: modes}
	}
	obs := migObservation()
	obs.Units = append(obs.Units, unit(map[string]string{
		"GPU-00000000-0000-0000-0000-000000000002": "exclusive_process",
		"GPU-00000000-0000-0000-0000-000000000009": "prohibited",
	}))
	c := check(t, doctor.Run(doctor.Input{Obs: obs}), "gpu.mig-compute-mode")
	if c.Status != doctor.Warning || !strings.Contains(c.Summary, "sets the compute mode of GPU 2 (exclusive_process), which is in MIG mode") {
		t.Errorf("check %+v", c)
	}

	obs = migObservation()
	obs.Units = append(obs.Units, unit(map[string]string{"GPU-00000000-0000-0000-0000-000000000002": "default"}))
	if c := check(t, doctor.Run(doctor.Input{Obs: obs}), "gpu.mig-compute-mode"); c.Status != doctor.OK {
		t.Errorf("the default mode: %+v", c)
	}

	obs = migObservation()
	for _, c := range doctor.Run(doctor.Input{Obs: obs}).Checks {
		if c.ID == "gpu.mig-compute-mode" {
			t.Errorf("checked without the unit: %+v", c)
		}
	}
}
