package devices_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/finding"
	planpkg "github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/planner/plantest"
	"github.com/gpuenv/gpuenv/providers/devices"
)

// On a GPU in MIG mode the compute mode is each MIG device's, which NVML
// sets only through the MIG device's handle: compute_mode sets no mode
// there, at plan or at boot, and the plan says so for a mode other than
// the default. A GPU whose mig block turns MIG off takes the mode; one
// whose block turns it on does not.
func TestComputeModeOnMIGGPUs(t *testing.T) {
	const a100 = "NVIDIA A100-SXM4-40GB"
	gpus := []facts.GPUDevice{
		{Index: 0, Name: a100, MemoryTotal: 40 << 30, UUID: "GPU-00000000-0000-0000-0000-000000000000", ComputeMode: "default", MIGMode: "enabled", MIGModePending: "enabled"},
		{Index: 1, Name: a100, MemoryTotal: 40 << 30, UUID: "GPU-00000000-0000-0000-0000-000000000001", ComputeMode: "default", MIGMode: "disabled", MIGModePending: "disabled"},
		{Index: 2, Name: a100, MemoryTotal: 40 << 30, UUID: "GPU-00000000-0000-0000-0000-000000000002", ComputeMode: "default", MIGMode: "disabled", MIGModePending: "disabled"},
		{Index: 3, Name: a100, MemoryTotal: 40 << 30, UUID: "GPU-00000000-0000-0000-0000-000000000003", ComputeMode: "default", MIGMode: "enabled", MIGModePending: "enabled"},
	}
	for _, tc := range []struct {
		name, src string
		set       []int
		warned    string
	}{
		{"exclusive", "device \"all\" {\n  compute_mode = \"exclusive_process\"\n}\nmig \"2\" {\n  instances = [\"7g.40gb\"]\n}\nmig \"3\" {\n  mode = \"disabled\"\n}\n", []int{1, 3}, "GPU 0, 2 are in MIG mode"},
		{"default", "device \"all\" {\n  compute_mode = \"default\"\n}\n", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := &facts.Observation{NVML: facts.NVML{Status: "ok", Devices: slices.Clone(gpus)}, Units: []facts.Unit{{Name: devices.BootUnit}}}
			s := plantest.LoadSpec(t, tc.src)
			p := plantest.Plan(t, planner.New(devices.Kind.Provider()), s, obs)
			var set []int
			var unit string
			for _, st := range p.Steps {
				for _, op := range st.Operations {
					if op.Device != nil && op.Device.Setting == planpkg.SettingComputeMode {
						set = append(set, op.Device.Index)
					}
					if op.File != nil && op.File.Path == "/etc/systemd/system/"+devices.BootUnit {
						unit = op.File.Content
					}
				}
			}
			if !slices.Equal(set, tc.set) {
				t.Errorf("compute mode set on GPUs %v, want %v", set, tc.set)
			}
			// The boot unit sets the modes the plan sets, and no other.
			for i := range gpus {
				if got, want := strings.Contains(unit, gpus[i].UUID), slices.Contains(tc.set, i); got != want {
					t.Errorf("the boot unit sets GPU %d's mode: %v, want %v:\n%s", i, got, want, unit)
				}
			}
			i := slices.IndexFunc(p.Warnings, func(w finding.Finding) bool { return w.ID == devices.CheckMIGComputeMode })
			switch {
			case tc.warned == "" && i >= 0:
				t.Errorf("warned: %+v", p.Warnings[i])
			case tc.warned != "" && i < 0:
				t.Errorf("no warning of the MIG GPUs: %+v", p.Warnings)
			case tc.warned != "" && !strings.Contains(p.Warnings[i].Detail, tc.warned):
				t.Errorf("the warning says %q, not %q", p.Warnings[i].Detail, tc.warned)
			}
		})
	}
}
