package main

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

// gpuenv-dgxh100-busy is gpuenv whose NVML is the DGX H100 mock with GPU 2
// held by a process in exclusive-process mode and MIG enabled on GPU 7
// without instances: the GPU-state checks' machine.
func init() {
	extraTestCommands["gpuenv-dgxh100-busy"] = withNVML(func() host.NVML {
		s := hosttest.NVMLServer("dgxh100")
		busy := s.Devices[2].(*server.Device)
		busy.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
			return []nvml.ProcessInfo{{Pid: 4242, UsedGpuMemory: 30 << 30}}, nvml.SUCCESS
		}
		busy.GetComputeModeFunc = func() (nvml.ComputeMode, nvml.Return) {
			return nvml.COMPUTEMODE_EXCLUSIVE_PROCESS, nvml.SUCCESS
		}
		s.Devices[7].(*server.Device).MigMode = nvml.DEVICE_MIG_ENABLE
		return host.NewNVML(s)
	})
}
