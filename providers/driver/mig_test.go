package driver_test

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

// TestObservedMIGLayoutNamesProfiles: the observation names each GPU
// instance by its profile on the GPU's model (a 40GB A100's profile 9 is
// 1g.10gb) and each compute instance as nvidia-smi does, with the MIG
// device's UUID and the processes on it.
func TestObservedMIGLayoutNamesProfiles(t *testing.T) {
	s := hosttest.NVMLServer("dgxa100")
	dev := s.Devices[1].(*server.Device)
	ds := host.NewDeviceSettings(s)
	if _, err := ds.SetMIGMode(dev.UUID, "enabled"); err != nil {
		t.Fatal(err)
	}
	for _, in := range []host.MIGInstance{
		{ProfileID: nvml.GPU_INSTANCE_PROFILE_4_SLICE, Start: 0, Size: 4, Compute: []int{2, 2}},
		{ProfileID: nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2, Start: 6, Size: 2, Compute: []int{1}},
	} {
		if err := ds.CreateGPUInstance(dev.UUID, in); err != nil {
			t.Fatal(err)
		}
	}
	dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		return []nvml.ProcessInfo{{Pid: 99, UsedGpuMemory: 5, GpuInstanceId: 1, ComputeInstanceId: 0}}, nvml.SUCCESS
	}
	obs := observe(t, hosttest.Build(t, "ubuntu2204-working"), host.NewNVML(s))
	g := obs.NVML.Devices[1]
	want := []facts.GPUInstance{
		{ID: 0, ProfileID: 3, Profile: "4g.20gb", Start: 0, Size: 4, Compute: []facts.ComputeInstance{
			{ID: 0, ProfileID: 1, Slices: 2, Profile: "2c.4g.20gb", UUID: hosttest.MIGUUID(1, 0, 0), MIGIndex: 0},
			{ID: 1, ProfileID: 1, Slices: 2, Profile: "2c.4g.20gb", UUID: hosttest.MIGUUID(1, 0, 1), MIGIndex: 1},
		}},
		{ID: 1, ProfileID: 9, Profile: "1g.10gb", Start: 6, Size: 2, Compute: []facts.ComputeInstance{
			{ID: 0, ProfileID: 0, Slices: 1, Profile: "1g.10gb", UUID: hosttest.MIGUUID(1, 1, 0), MIGIndex: 2, Processes: []facts.GPUProcess{{PID: 99, UsedMemory: 5}}},
		}},
	}
	if diff := cmp.Diff(want, g.GPUInstances); diff != "" {
		t.Errorf("GPU instances (-want +got):\n%s", diff)
	}
	if g.MIGMode != "enabled" || g.MIGModePending != "enabled" {
		t.Errorf("modes %q %q", g.MIGMode, g.MIGModePending)
	}
}
