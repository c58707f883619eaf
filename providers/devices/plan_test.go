package devices_test

import (
	"testing"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	planpkg "github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/planner/plantest"
	"github.com/gpuenv/gpuenv/providers/devices"
)

func TestPlan(t *testing.T) {
	gpus := func() []facts.GPUDevice {
		return []facts.GPUDevice{
			{Index: 0, UUID: "GPU-5d5a1ee2-2f2a-4b33-9ac3-5b3e8f1b2c4d", ComputeMode: "default"},
			{Index: 1, UUID: "GPU-6e6b2ff3-3a3b-4c44-8bd4-6c4f9a2c3d5e", ComputeMode: "exclusive_process"},
			{Index: 2, UUID: "GPU-7f7c3aa4-4b4c-4d55-9ce5-7d5a0b3d4e6f"},
		}
	}
	tests := []struct {
		name     string
		src      string
		want     []planpkg.DeviceOp
		warnings int
	}{
		{"every GPU", "device \"all\" {\n  compute_mode = \"exclusive_process\"\n}\n", []planpkg.DeviceOp{{UUID: "GPU-5d5a1ee2-2f2a-4b33-9ac3-5b3e8f1b2c4d", Index: 0, Setting: "compute_mode", Value: "exclusive_process"}}, 1},
		{"one GPU by index", "device \"1\" {\n  compute_mode = \"default\"\n}\n", []planpkg.DeviceOp{{UUID: "GPU-6e6b2ff3-3a3b-4c44-8bd4-6c4f9a2c3d5e", Index: 1, Setting: "compute_mode", Value: "default"}}, 0},
		{"one GPU by UUID, already so", "device \"GPU-5D5A1EE2-2F2A-4B33-9AC3-5B3E8F1B2C4D\" {\n  compute_mode = \"default\"\n}\n", nil, 0},
		{"absent puts the default back", "device \"1\" {\n  absent = true\n}\n", []planpkg.DeviceOp{{UUID: "GPU-6e6b2ff3-3a3b-4c44-8bd4-6c4f9a2c3d5e", Index: 1, Setting: "compute_mode", Value: "default"}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obs := &facts.Observation{NVML: facts.NVML{Status: "ok", Devices: gpus()}}
			s := plantest.LoadSpec(t, tt.src)
			pl := planner.New(devices.Kind.Provider())
			plan := plantest.Plan(t, pl, s, obs)
			var got []planpkg.DeviceOp
			for _, st := range plan.Steps {
				if st.Address != "device."+s.Devices[0].Selector || st.Action != planpkg.Update {
					t.Errorf("step %s %s", st.Address, st.Action)
				}
				for _, op := range st.Operations {
					got = append(got, *op.Device)
				}
			}
			if len(got) != len(tt.want) {
				t.Fatalf("operations %+v, want %+v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("operation %+v, want %+v", got[i], tt.want[i])
				}
			}
			if len(plan.Warnings) != tt.warnings {
				t.Errorf("warnings %+v", plan.Warnings)
			}
			// Apply: NVML reports the new modes.
			for _, op := range got {
				obs.NVML.Devices[op.Index].ComputeMode = op.Value
			}
			plantest.Converged(t, pl, s, obs, "applying")
		})
	}
}

// Without NVML the devices' settings wait; that the host shows no GPU at
// all is doctor's pci.gpus, which plan judges on the end state
// (providers' TestDebianExampleWithoutGPU).
func TestPlanWithoutDevices(t *testing.T) {
	obs := &facts.Observation{NVML: facts.NVML{Status: "library_not_found", Error: "libnvidia-ml.so.1 not found"}}
	plan := plantest.Plan(t, planner.New(devices.Kind.Provider()), plantest.LoadSpec(t, "device \"all\" {\n  compute_mode = \"prohibited\"\n}\n"), obs)
	if len(plan.Steps) != 0 || len(plan.Warnings) != 1 || plan.Warnings[0].Evidence[0] != "NVML: library_not_found: libnvidia-ml.so.1 not found" {
		t.Errorf("steps %+v warnings %+v", plan.Steps, plan.Warnings)
	}
}
