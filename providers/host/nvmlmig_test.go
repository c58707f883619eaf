package host_test

import (
	"errors"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

// TestMIGLayoutThroughNVML: on a DGX A100, gpuenv's own MIG calls enable
// MIG, create a layout at given placements and destroy one instance;
// observation then reads the mode (current and pending), each instance's
// profile and placement, its compute instances with their MIG UUIDs,
// and the processes NVML places on them.
func TestMIGLayoutThroughNVML(t *testing.T) {
	srv := hosttest.NVMLServer("dgxa100")
	dev := srv.Devices[2].(*server.Device)
	uuid := dev.UUID
	s := host.NewDeviceSettings(srv)

	act, err := s.SetMIGMode(uuid, "enabled")
	if err != nil || !act {
		t.Fatalf("SetMIGMode = %v, %v; want activated", act, err)
	}
	for _, in := range []host.MIGInstance{
		{ProfileID: nvml.GPU_INSTANCE_PROFILE_3_SLICE, Start: 4, Size: 4, Compute: []int{3}},
		{ProfileID: nvml.GPU_INSTANCE_PROFILE_2_SLICE, Start: 0, Size: 2, Compute: []int{1, 1}},
		{ProfileID: nvml.GPU_INSTANCE_PROFILE_1_SLICE, Start: 2, Size: 1, Compute: []int{1}},
	} {
		if err := s.CreateGPUInstance(uuid, in); err != nil {
			t.Fatal(err)
		}
	}
	// Created again, an instance already there is left as it is.
	if err := s.CreateGPUInstance(uuid, host.MIGInstance{ProfileID: nvml.GPU_INSTANCE_PROFILE_3_SLICE, Start: 4, Size: 4, Compute: []int{3}}); err != nil {
		t.Fatal(err)
	}
	// An overlapping one is NVML's refusal, said with the placement.
	if err := s.CreateGPUInstance(uuid, host.MIGInstance{ProfileID: nvml.GPU_INSTANCE_PROFILE_4_SLICE, Start: 0, Size: 4, Compute: []int{4}}); err == nil {
		t.Fatal("an overlapping GPU instance was created")
	}
	// The 1g at 2 is GPU instance 2 (ids go in creation order); a
	// process runs on its compute instance 0.
	dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		return []nvml.ProcessInfo{{Pid: 4242, UsedGpuMemory: 1 << 30, GpuInstanceId: 2, ComputeInstanceId: 0}}, nvml.SUCCESS
	}
	err = s.DestroyGPUInstance(uuid, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 2)
	var inUse *host.InUseError
	if !errors.As(err, &inUse) || len(inUse.PIDs) != 1 || inUse.PIDs[0] != 4242 {
		t.Fatalf("destroying a held instance: %v, want an InUseError naming pid 4242", err)
	}

	n := host.NewNVML(srv)
	if err := n.Init(); err != nil {
		t.Fatal(err)
	}
	devs, err := n.Devices()
	if err != nil {
		t.Fatal(err)
	}
	d := devs[2]
	if d.MIGMode != "enabled" || d.MIGPending != "enabled" || d.MIGDevices != 4 {
		t.Errorf("mode %q pending %q, %d MIG devices; want enabled, enabled, 4", d.MIGMode, d.MIGPending, d.MIGDevices)
	}
	want := []host.NVMLGPUInstance{
		{ID: 1, ProfileID: nvml.GPU_INSTANCE_PROFILE_2_SLICE, Start: 0, Size: 2, Compute: []host.NVMLComputeInstance{
			{ID: 0, ProfileID: nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, Slices: 1, UUID: hosttest.MIGUUID(2, 1, 0), Index: 1},
			{ID: 1, ProfileID: nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, Slices: 1, UUID: hosttest.MIGUUID(2, 1, 1), Index: 2},
		}},
		{ID: 2, ProfileID: nvml.GPU_INSTANCE_PROFILE_1_SLICE, Start: 2, Size: 1, Compute: []host.NVMLComputeInstance{
			{ID: 0, ProfileID: nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, Slices: 1, UUID: hosttest.MIGUUID(2, 2, 0), Index: 3,
				Processes: []host.NVMLProcess{{PID: 4242, UsedMemory: 1 << 30}}},
		}},
		{ID: 0, ProfileID: nvml.GPU_INSTANCE_PROFILE_3_SLICE, Start: 4, Size: 4, Compute: []host.NVMLComputeInstance{
			{ID: 0, ProfileID: nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE, Slices: 3, UUID: hosttest.MIGUUID(2, 0, 0), Index: 0},
		}},
	}
	if diff := cmp.Diff(want, d.GPUInstances); diff != "" {
		t.Errorf("GPU instances (-want +got):\n%s", diff)
	}
	if len(devs[0].GPUInstances) != 0 || devs[0].MIGMode != "disabled" {
		t.Errorf("GPU 0 is untouched, yet reads %q with %v", devs[0].MIGMode, devs[0].GPUInstances)
	}

	// Once the process is gone the instance is destroyed, compute
	// instances first.
	dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.SUCCESS }
	if err := s.DestroyGPUInstance(uuid, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 2); err != nil {
		t.Fatal(err)
	}
	if in, err := s.GPUInstance(uuid, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 2); in != nil || err != nil {
		t.Errorf("after destroying: %v, %v", in, err)
	}
	if in, err := s.GPUInstance(uuid, nvml.GPU_INSTANCE_PROFILE_2_SLICE, 0); err != nil || in == nil || !cmp.Equal(in.Compute, []int{1, 1}) {
		t.Errorf("2g at 0: %+v, %v", in, err)
	}
}

// TestMIGModePending: a GPU in use keeps a new MIG mode pending; NVML
// reports both modes until a reset.
func TestMIGModePending(t *testing.T) {
	srv := hosttest.NVMLServer("dgxa100")
	dev := srv.Devices[0].(*server.Device)
	hosttest.MIGOf(dev).Busy = true
	s := host.NewDeviceSettings(srv)
	act, err := s.SetMIGMode(dev.UUID, "enabled")
	if err != nil || act {
		t.Fatalf("SetMIGMode on a busy GPU = %v, %v; want pending", act, err)
	}
	cur, pend, err := s.MIGMode(dev.UUID)
	if cur != "disabled" || pend != "enabled" || err != nil {
		t.Errorf("modes %q %q %v; want disabled, enabled", cur, pend, err)
	}
	if err := s.CreateGPUInstance(dev.UUID, host.MIGInstance{ProfileID: 0, Start: 0, Size: 1, Compute: []int{1}}); err == nil {
		t.Error("a GPU instance was created while MIG mode was pending")
	}
	hosttest.MIGOf(dev).Reset()
	if cur, _, _ := s.MIGMode(dev.UUID); cur != "enabled" {
		t.Errorf("after a reset the mode is %q", cur)
	}
}
