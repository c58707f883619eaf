package hosttest

import (
	"encoding/binary"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// GPUHealth is what a mock device answers to the health queries. Healthy
// gives the answers of a healthy, idle data-centre GPU; a test changes
// the fields it wants faulty and hands it to SetHealth.
type GPUHealth struct {
	ECC, ECCPending                  bool
	VolatileCorrected, VolatileUncor uint64
	AggregateCorrected, AggregateUnc uint64
	// RowRemap false answers NOT_SUPPORTED (before Ampere), and the
	// retired-page queries answer instead.
	RowRemap                   bool
	RemapCorrected, RemapUncor int
	RemapPending, RemapFailure bool
	Histogram                  nvml.RowRemapperHistogramValues
	RetiredSBE, RetiredDBE     int
	RetiredPending             bool
	Throttle                   uint64
	Temp, Slowdown, Shutdown   uint32
	PowerMW, PowerLimitMW      uint32
	Persistence                bool
	// NVLinks are the links' states (true: active); NVLinkErrors the
	// error counters by link and counter.
	NVLinks      []bool
	NVLinkErrors map[[2]int]uint64
	// NVLinkVersion is every link's version; NVLinkRemotes what each
	// link reaches by PCI address, a switch unless NVLinkToGPU.
	NVLinkVersion nvml.NvlinkVersion
	NVLinkRemotes []string
	NVLinkToGPU   bool
	PCIeReplays   uint64
	// Recovery is the driver's recovery action; RecoveryRet its field's
	// return (NOT_SUPPORTED on drivers before R565).
	Recovery    nvml.DeviceGpuRecoveryAction
	RecoveryRet nvml.Return
	// ResetRequired makes the ECC query answer ERROR_RESET_REQUIRED.
	ResetRequired bool
}

// Healthy is an idle, healthy H100 SXM: ECC on and clean, all 18 NVLinks
// (version 4.0) up and reaching the board's four NVSwitches, 35 °C against thresholds of 87 and 92 °C, 70 W of 700 W, only the
// idle clock reason.
func Healthy() GPUHealth {
	links := make([]bool, 18)
	remotes := make([]string, 18)
	for i := range links {
		links[i] = true
		// The NVSwitches of the ubuntu2204-working fixture's board.
		remotes[i] = NVSwitchAddresses[i%len(NVSwitchAddresses)]
	}
	return GPUHealth{
		ECC: true, ECCPending: true, RowRemap: true,
		Histogram: nvml.RowRemapperHistogramValues{Max: 640},
		Throttle:  nvml.ClocksEventReasonGpuIdle,
		Temp:      35, Slowdown: 87, Shutdown: 92,
		PowerMW: 70000, PowerLimitMW: 700000,
		Persistence: true, NVLinks: links, NVLinkVersion: nvml.NVLINK_VERSION_4_0, NVLinkRemotes: remotes,
		Recovery: nvml.GPU_RECOVERY_ACTION_NONE, RecoveryRet: nvml.SUCCESS,
	}
}

// NVSwitchAddresses are the PCI addresses the healthy GPUs' NVLinks
// reach: four NVSwitches, as an HGX H100 board has.
var NVSwitchAddresses = []string{"0000:05:00.0", "0000:06:00.0", "0000:07:00.0", "0000:08:00.0"}

func state(b bool) nvml.EnableState {
	if b {
		return nvml.FEATURE_ENABLED
	}
	return nvml.FEATURE_DISABLED
}

// SetHealth makes dev answer the health queries as g says.
func SetHealth(dev *server.Device, g GPUHealth) {
	dev.GetEccModeFunc = func() (nvml.EnableState, nvml.EnableState, nvml.Return) {
		if g.ResetRequired {
			return 0, 0, nvml.ERROR_RESET_REQUIRED
		}
		return state(g.ECC), state(g.ECCPending), nvml.SUCCESS
	}
	dev.GetTotalEccErrorsFunc = func(t nvml.MemoryErrorType, c nvml.EccCounterType) (uint64, nvml.Return) {
		switch {
		case t == nvml.MEMORY_ERROR_TYPE_CORRECTED && c == nvml.VOLATILE_ECC:
			return g.VolatileCorrected, nvml.SUCCESS
		case t == nvml.MEMORY_ERROR_TYPE_UNCORRECTED && c == nvml.VOLATILE_ECC:
			return g.VolatileUncor, nvml.SUCCESS
		case t == nvml.MEMORY_ERROR_TYPE_CORRECTED:
			return g.AggregateCorrected, nvml.SUCCESS
		}
		return g.AggregateUnc, nvml.SUCCESS
	}
	dev.GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) {
		if !g.RowRemap {
			return 0, 0, false, false, nvml.ERROR_NOT_SUPPORTED
		}
		return g.RemapCorrected, g.RemapUncor, g.RemapPending, g.RemapFailure, nvml.SUCCESS
	}
	dev.GetRowRemapperHistogramFunc = func() (nvml.RowRemapperHistogramValues, nvml.Return) {
		if !g.RowRemap {
			return nvml.RowRemapperHistogramValues{}, nvml.ERROR_NOT_SUPPORTED
		}
		return g.Histogram, nvml.SUCCESS
	}
	dev.GetRetiredPagesFunc = func(c nvml.PageRetirementCause) ([]uint64, nvml.Return) {
		n := g.RetiredSBE
		if c == nvml.PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR {
			n = g.RetiredDBE
		}
		return make([]uint64, n), nvml.SUCCESS
	}
	dev.GetRetiredPagesPendingStatusFunc = func() (nvml.EnableState, nvml.Return) {
		return state(g.RetiredPending), nvml.SUCCESS
	}
	dev.GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) { return g.Throttle, nvml.SUCCESS }
	dev.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return g.Temp, nvml.SUCCESS }
	dev.GetTemperatureThresholdFunc = func(t nvml.TemperatureThresholds) (uint32, nvml.Return) {
		if t == nvml.TEMPERATURE_THRESHOLD_SHUTDOWN {
			return g.Shutdown, nvml.SUCCESS
		}
		return g.Slowdown, nvml.SUCCESS
	}
	dev.GetPowerUsageFunc = func() (uint32, nvml.Return) { return g.PowerMW, nvml.SUCCESS }
	dev.GetEnforcedPowerLimitFunc = func() (uint32, nvml.Return) { return g.PowerLimitMW, nvml.SUCCESS }
	dev.GetPersistenceModeFunc = func() (nvml.EnableState, nvml.Return) { return state(g.Persistence), nvml.SUCCESS }
	dev.GetNvLinkStateFunc = func(l int) (nvml.EnableState, nvml.Return) {
		if l >= len(g.NVLinks) {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		return state(g.NVLinks[l]), nvml.SUCCESS
	}
	dev.GetNvLinkVersionFunc = func(l int) (uint32, nvml.Return) {
		if l >= len(g.NVLinks) {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		return uint32(g.NVLinkVersion), nvml.SUCCESS
	}
	dev.GetNvLinkRemotePciInfoFunc = func(l int) (nvml.PciInfo, nvml.Return) {
		if l >= len(g.NVLinkRemotes) {
			return nvml.PciInfo{}, nvml.ERROR_NOT_SUPPORTED
		}
		var p nvml.PciInfo
		for i, c := range g.NVLinkRemotes[l] {
			p.BusId[i] = int8(c)
		}
		return p, nvml.SUCCESS
	}
	dev.GetNvLinkRemoteDeviceTypeFunc = func(l int) (nvml.IntNvLinkDeviceType, nvml.Return) {
		if l >= len(g.NVLinkRemotes) {
			return 0, nvml.ERROR_NOT_SUPPORTED
		}
		if g.NVLinkToGPU {
			return nvml.NVLINK_DEVICE_TYPE_GPU, nvml.SUCCESS
		}
		return nvml.NVLINK_DEVICE_TYPE_SWITCH, nvml.SUCCESS
	}
	dev.GetNvLinkErrorCounterFunc = func(l int, c nvml.NvLinkErrorCounter) (uint64, nvml.Return) {
		return g.NVLinkErrors[[2]int{l, int(c)}], nvml.SUCCESS
	}
	dev.GetFieldValuesFunc = func(vals []nvml.FieldValue) nvml.Return {
		for i := range vals {
			v := &vals[i]
			v.ValueType = 3 // unsigned long long
			switch v.FieldId {
			case nvml.FI_DEV_PCIE_REPLAY_COUNTER:
				binary.LittleEndian.PutUint64(v.Value[:], g.PCIeReplays)
			case nvml.FI_DEV_GET_GPU_RECOVERY_ACTION:
				v.NvmlReturn = uint32(g.RecoveryRet)
				binary.LittleEndian.PutUint64(v.Value[:], uint64(g.Recovery))
			default:
				v.NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
			}
		}
		return nvml.SUCCESS
	}
}
