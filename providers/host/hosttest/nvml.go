package hosttest

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxb200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// DGXBusIDs are the PCI addresses of the eight GPUs of a DGX H100/H200/B200
// as sysfs spells them; the fixture roots of such machines use the same.
var DGXBusIDs = [8]string{
	"0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0",
	"0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0",
}

// NVMLServer returns one of go-nvml's DGX mock servers ("dgxa100", "dgxh100",
// "dgxh200", "dgxb200") made deterministic and complete for observation:
// fixed UUIDs (GPU-00000000-0000-0000-0000-00000000000N) instead of random
// ones, the bus ids of DGXBusIDs, and the queries the mock leaves unset
// (an unset one panics) answered as an idle machine answers them:
// persistence mode on, default compute mode, no processes.
func NVMLServer(name string) *server.Server {
	var s *server.Server
	switch name {
	case "dgxa100":
		s = dgxa100.New()
	case "dgxh100":
		s = dgxh100.New()
	case "dgxh200":
		s = dgxh200.New()
	case "dgxb200":
		s = dgxb200.New()
	default:
		panic(fmt.Sprintf("hosttest: unknown NVML server %q", name))
	}
	for i, d := range s.Devices {
		dev := d.(*server.Device)
		dev.UUID = fmt.Sprintf("GPU-00000000-0000-0000-0000-%012d", i)
		if i < len(DGXBusIDs) {
			dev.PciBusID = DGXBusIDs[i]
		}
		Complete(dev)
	}
	s.SystemGetProcessNameFunc = func(pid int) (string, nvml.Return) {
		return "", nvml.ERROR_NOT_FOUND
	}
	return s
}

// Complete sets the device queries go-nvml's server mock leaves unset, so
// that observing the device does not panic, and makes its PCI info carry
// the bus id as the real library does (NVML's eight-digit domain, upper
// case hex). Its health counters are those of Healthy.
func Complete(dev *server.Device) {
	dev.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
		var p nvml.PciInfo
		var dom, bus, slot, fn uint32
		fmt.Sscanf(dev.PciBusID, "%x:%x:%x.%x", &dom, &bus, &slot, &fn)
		p.Domain, p.Bus, p.Device = dom, bus, slot
		p.PciDeviceId = dev.Config.PciDeviceId
		id := fmt.Sprintf("%08X:%02X:%02X.%X", dom, bus, slot, fn)
		for i := 0; i < len(id) && i < len(p.BusId)-1; i++ {
			p.BusId[i] = int8(id[i])
		}
		return p, nvml.SUCCESS
	}
	dev.GetPersistenceModeFunc = func() (nvml.EnableState, nvml.Return) {
		return nvml.FEATURE_ENABLED, nvml.SUCCESS
	}
	dev.GetComputeModeFunc = func() (nvml.ComputeMode, nvml.Return) {
		return nvml.COMPUTEMODE_DEFAULT, nvml.SUCCESS
	}
	dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		return nil, nvml.SUCCESS
	}
	completeMIG(dev)
	SetHealth(dev, Healthy())
}

// FailingNVML is a library whose Init fails with ret. Every other function
// is unset, so a call after the failed Init panics, as the real library
// kills the process.
func FailingNVML(ret nvml.Return) *mock.Interface {
	return &mock.Interface{InitFunc: func() nvml.Return { return ret }}
}
