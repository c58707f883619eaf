package main

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

// gpuenv-dgxh100-faulty is gpuenv whose NVML is the DGX H100 mock with
// three faults the driver's counters show: GPU 2 has a row remapping
// waiting for a reset, GPU 5 has NVLink 7 down, GPU 6 is slowed by the
// power brake. The health checks' machine.
func init() {
	extraTestCommands["gpuenv-dgxh100-faulty"] = withNVML(func() host.NVML {
		s := hosttest.NVMLServer("dgxh100")
		fault := func(i int, edit func(*hosttest.GPUHealth)) {
			g := hosttest.Healthy()
			edit(&g)
			hosttest.SetHealth(s.Devices[i].(*server.Device), g)
		}
		fault(2, func(g *hosttest.GPUHealth) { g.RemapCorrected, g.RemapPending = 1, true })
		fault(5, func(g *hosttest.GPUHealth) { g.NVLinks[7] = false })
		fault(6, func(g *hosttest.GPUHealth) {
			g.Throttle = nvml.ClocksThrottleReasonHwSlowdown | nvml.ClocksThrottleReasonHwPowerBrakeSlowdown
			g.PowerMW = 180000
		})
		return host.NewNVML(s)
	})
}
