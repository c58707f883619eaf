package host

import (
	"encoding/binary"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuenv/gpuenv/planner/facts"
)

// NVMLHealthReader is the NVML that also reads each device's health
// counters. It is its own interface so that an NVML that only observes
// (apply's, made from files) need not offer it.
type NVMLHealthReader interface {
	// Health reads every device's health counters and states, in index
	// order. Like Devices, it may be called only after Init succeeded.
	// It only reads: every call it makes is a query of a counter or a
	// state the driver keeps, none starts work on a GPU or changes a
	// setting.
	Health() ([]NVMLDeviceHealth, error)
}

// NVMLDeviceHealth is one device's health, with what names the device.
type NVMLDeviceHealth struct {
	Index    int
	UUID     string
	Name     string
	PCIBusID string
	facts.NVMLHealth
}

var _ NVMLHealthReader = (*nvmlLib)(nil)

func (n *nvmlLib) Health() ([]NVMLDeviceHealth, error) {
	if err := n.ready(); err != nil {
		return nil, err
	}
	count, ret := n.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, &NVMLError{Op: "device count", Code: int(ret)}
	}
	out := make([]NVMLDeviceHealth, 0, count)
	for i := 0; i < count; i++ {
		d := NVMLDeviceHealth{Index: i}
		h, ret := n.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			healthRet(&d.NVMLHealth, "handle", ret)
			out = append(out, d)
			continue
		}
		if v, ret := h.GetUUID(); ret == nvml.SUCCESS {
			d.UUID = v
		}
		if v, ret := h.GetName(); ret == nvml.SUCCESS {
			d.Name = v
		}
		if v, ret := h.GetPciInfo(); ret == nvml.SUCCESS {
			d.PCIBusID = busID(v)
		}
		deviceHealth(h, &d.NVMLHealth)
		out = append(out, d)
	}
	return out, nil
}

// healthRet records a failed query as query does, and also what the
// failure itself says of the GPU: a reset is needed, or the GPU is lost.
func healthRet(hl *facts.NVMLHealth, what string, ret nvml.Return) bool {
	switch ret {
	case nvml.ERROR_RESET_REQUIRED:
		hl.ResetRequired = true
	case nvml.ERROR_GPU_IS_LOST:
		hl.Lost = true
	}
	return query(&hl.Errors, what, ret)
}

// throttleNames name the bits of NVML's clock event (throttle) reasons,
// as nvml.h defines them (nvmlClocksEventReason*).
var throttleNames = []struct {
	bit  uint64
	name string
}{
	{nvml.ClocksEventReasonGpuIdle, "gpu_idle"},
	{nvml.ClocksEventReasonApplicationsClocksSetting, "applications_clocks_setting"},
	{nvml.ClocksEventReasonSwPowerCap, "sw_power_cap"},
	{nvml.ClocksThrottleReasonHwSlowdown, "hw_slowdown"},
	{nvml.ClocksEventReasonSyncBoost, "sync_boost"},
	{nvml.ClocksEventReasonSwThermalSlowdown, "sw_thermal_slowdown"},
	{nvml.ClocksThrottleReasonHwThermalSlowdown, "hw_thermal_slowdown"},
	{nvml.ClocksThrottleReasonHwPowerBrakeSlowdown, "hw_power_brake_slowdown"},
	{nvml.ClocksEventReasonDisplayClockSetting, "display_clock_setting"},
}

// ThrottleReasonNames names the bits set in mask, in nvml.h's order.
func ThrottleReasonNames(mask uint64) []string {
	var out []string
	for _, t := range throttleNames {
		if mask&t.bit != 0 {
			out = append(out, t.name)
		}
	}
	return out
}

// recoveryActions name NVML's nvmlDeviceGpuRecoveryAction_t values.
var recoveryActions = map[uint64]string{
	uint64(nvml.GPU_RECOVERY_ACTION_NONE):                "none",
	uint64(nvml.GPU_RECOVERY_ACTION_GPU_RESET):           "gpu_reset",
	uint64(nvml.GPU_RECOVERY_ACTION_NODE_REBOOT):         "node_reboot",
	uint64(nvml.GPU_RECOVERY_ACTION_DRAIN_P2P):           "drain_p2p",
	uint64(nvml.GPU_RECOVERY_ACTION_DRAIN_AND_RESET):     "drain_and_reset",
	uint64(nvml.GPU_RECOVERY_ACTION_RECOVER_IMEX_DOMAIN): "recover_imex_domain",
	uint64(nvml.GPU_RECOVERY_ACTION_BUS_RESET):           "bus_reset",
	uint64(nvml.GPU_RECOVERY_ACTION_SYSTEM_REBOOT):       "system_reboot",
}

// deviceHealth reads one device's counters into hl.
func deviceHealth(h nvml.Device, hl *facts.NVMLHealth) {
	if cur, pend, ret := h.GetEccMode(); healthRet(hl, "ECC mode", ret) {
		hl.ECCMode = enabled(cur == nvml.FEATURE_ENABLED)
		hl.ECCPending = enabled(pend == nvml.FEATURE_ENABLED)
	}
	if hl.ECCMode == "enabled" {
		hl.ECCVolatile = eccCounts(h, hl, nvml.VOLATILE_ECC, "volatile")
		hl.ECCAggregate = eccCounts(h, hl, nvml.AGGREGATE_ECC, "aggregate")
	}
	// Ampere and later remap rows; earlier GPUs retire pages and answer
	// NOT_SUPPORTED for remapping.
	if corr, unc, pending, failure, ret := h.GetRemappedRows(); healthRet(hl, "remapped rows", ret) {
		hl.RowRemap = &facts.RowRemap{Corrected: corr, Uncorrected: unc, Pending: pending, Failure: failure}
		if hist, ret := h.GetRowRemapperHistogram(); healthRet(hl, "row remapper histogram", ret) {
			hl.RowRemap.Histogram = &facts.RowRemapHistogram{Max: int(hist.Max), High: int(hist.High), Partial: int(hist.Partial), Low: int(hist.Low), None: int(hist.None)}
		}
		if pending {
			hl.ResetRequired = true
		}
	} else if hl.ECCMode == "enabled" {
		rp := &facts.RetiredPages{}
		ok := false
		if pages, ret := h.GetRetiredPages(nvml.PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS); healthRet(hl, "retired pages (single bit)", ret) {
			rp.SingleBit, ok = len(pages), true
		}
		if pages, ret := h.GetRetiredPages(nvml.PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR); healthRet(hl, "retired pages (double bit)", ret) {
			rp.DoubleBit, ok = len(pages), true
		}
		if st, ret := h.GetRetiredPagesPendingStatus(); healthRet(hl, "retired pages pending", ret) {
			rp.Pending, ok = st == nvml.FEATURE_ENABLED, true
			if rp.Pending {
				hl.ResetRequired = true
			}
		}
		if ok {
			hl.RetiredPages = rp
		}
	}
	if mask, ret := h.GetCurrentClocksEventReasons(); healthRet(hl, "clock event reasons", ret) {
		hl.ThrottleMask = mask
		hl.ThrottleReasons = ThrottleReasonNames(mask)
	}
	if t, ret := h.GetTemperature(nvml.TEMPERATURE_GPU); healthRet(hl, "temperature", ret) {
		hl.Temperature = int(t)
	}
	if t, ret := h.GetTemperatureThreshold(nvml.TEMPERATURE_THRESHOLD_SLOWDOWN); healthRet(hl, "slowdown temperature", ret) {
		hl.SlowdownTemp = int(t)
	}
	if t, ret := h.GetTemperatureThreshold(nvml.TEMPERATURE_THRESHOLD_SHUTDOWN); healthRet(hl, "shutdown temperature", ret) {
		hl.ShutdownTemp = int(t)
	}
	if p, ret := h.GetPowerUsage(); healthRet(hl, "power usage", ret) {
		hl.PowerUsage = int(p)
	}
	if p, ret := h.GetEnforcedPowerLimit(); healthRet(hl, "power limit", ret) {
		hl.PowerLimit = int(p)
	}
	if v, ret := h.GetPersistenceMode(); healthRet(hl, "persistence mode", ret) {
		hl.PersistenceMode = enabled(v == nvml.FEATURE_ENABLED)
	}
	nvlinks(h, hl)
	fieldValues(h, hl)
}

func eccCounts(h nvml.Device, hl *facts.NVMLHealth, ct nvml.EccCounterType, what string) *facts.ECCCounts {
	c := &facts.ECCCounts{}
	ok := false
	if v, ret := h.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_CORRECTED, ct); healthRet(hl, what+" corrected ECC errors", ret) {
		c.Corrected, ok = v, true
	}
	if v, ret := h.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, ct); healthRet(hl, what+" uncorrected ECC errors", ret) {
		c.Uncorrected, ok = v, true
	}
	if !ok {
		return nil
	}
	return c
}

// nvlinks reads the links that answer a state: a GPU without NVLink, or
// a link number past its last, answers NOT_SUPPORTED or
// INVALID_ARGUMENT, which is no fault.
func nvlinks(h nvml.Device, hl *facts.NVMLHealth) {
	for l := 0; l < nvml.NVLINK_MAX_LINKS; l++ {
		st, ret := h.GetNvLinkState(l)
		if ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_INVALID_ARGUMENT {
			if l == 0 {
				return
			}
			continue
		}
		if !healthRet(hl, fmt.Sprintf("NVLink %d state", l), ret) {
			continue
		}
		link := facts.NVLinkHealth{Link: l, State: "inactive"}
		if st == nvml.FEATURE_ENABLED {
			link.State = "active"
			nvlinkPeer(h, l, &link, hl)
		}
		for _, c := range []struct {
			counter nvml.NvLinkErrorCounter
			to      *uint64
			what    string
		}{
			{nvml.NVLINK_ERROR_DL_REPLAY, &link.Replay, "replay"},
			{nvml.NVLINK_ERROR_DL_RECOVERY, &link.Recovery, "recovery"},
			{nvml.NVLINK_ERROR_DL_CRC_FLIT, &link.CRCFlit, "CRC flit"},
			{nvml.NVLINK_ERROR_DL_CRC_DATA, &link.CRCData, "CRC data"},
		} {
			if v, ret := h.GetNvLinkErrorCounter(l, c.counter); healthRet(hl, fmt.Sprintf("NVLink %d %s errors", l, c.what), ret) {
				*c.to = v
			}
		}
		hl.NVLinks = append(hl.NVLinks, link)
	}
}

// nvlinkVersions name NVML's nvmlNvlinkVersion_t values (nvml.h, as
// go-nvml's NVLINK_VERSION_* constants carry them): 3 is 2.2 and 5 is
// 3.1, so the number is not the version.
var nvlinkVersions = map[nvml.NvlinkVersion]string{
	nvml.NVLINK_VERSION_1_0: "1.0", nvml.NVLINK_VERSION_2_0: "2.0", nvml.NVLINK_VERSION_2_2: "2.2",
	nvml.NVLINK_VERSION_3_0: "3.0", nvml.NVLINK_VERSION_3_1: "3.1", nvml.NVLINK_VERSION_4_0: "4.0",
	nvml.NVLINK_VERSION_5_0: "5.0", nvml.NVLINK_VERSION_6_0: "6.0",
}

// nvlinkPeer reads what an active link is and reaches: the peer-to-peer
// bandwidth verify expects between two GPUs follows from it.
func nvlinkPeer(h nvml.Device, l int, link *facts.NVLinkHealth, hl *facts.NVMLHealth) {
	if v, ret := h.GetNvLinkVersion(l); healthRet(hl, fmt.Sprintf("NVLink %d version", l), ret) {
		link.Version = nvlinkVersions[nvml.NvlinkVersion(v)]
	}
	if p, ret := h.GetNvLinkRemotePciInfo(l); healthRet(hl, fmt.Sprintf("NVLink %d remote", l), ret) {
		link.Remote = busID(p)
	}
	if t, ret := h.GetNvLinkRemoteDeviceType(l); healthRet(hl, fmt.Sprintf("NVLink %d remote type", l), ret) {
		link.RemoteType = map[nvml.IntNvLinkDeviceType]string{nvml.NVLINK_DEVICE_TYPE_GPU: "gpu", nvml.NVLINK_DEVICE_TYPE_SWITCH: "switch", nvml.NVLINK_DEVICE_TYPE_IBMNPU: "ibmnpu"}[t]
	}
}

// fieldValues reads, in one call, the counters NVML has only as fields:
// the PCIe replay counter and the driver's recovery action (R565 and
// later; older drivers answer the field with NOT_SUPPORTED).
func fieldValues(h nvml.Device, hl *facts.NVMLHealth) {
	vals := []nvml.FieldValue{
		{FieldId: nvml.FI_DEV_PCIE_REPLAY_COUNTER},
		{FieldId: nvml.FI_DEV_GET_GPU_RECOVERY_ACTION},
	}
	if !healthRet(hl, "field values", h.GetFieldValues(vals)) {
		return
	}
	if r := nvml.Return(vals[0].NvmlReturn); healthRet(hl, "PCIe replay counter", r) {
		v := fieldUint(vals[0])
		hl.PCIeReplays = &v
	}
	if r := nvml.Return(vals[1].NvmlReturn); healthRet(hl, "recovery action", r) {
		a := fieldUint(vals[1])
		name, ok := recoveryActions[a]
		if !ok {
			name = fmt.Sprintf("action_%d", a)
		}
		hl.RecoveryAction = name
		if a != uint64(nvml.GPU_RECOVERY_ACTION_NONE) {
			hl.ResetRequired = true
		}
	}
}

// fieldUint reads a field's value as its type says (nvmlValueType_t:
// 0 double, 1 unsigned int, 2 unsigned long, 3 unsigned long long,
// 4 signed long long, 5 signed int); the union is little-endian.
func fieldUint(f nvml.FieldValue) uint64 {
	switch f.ValueType {
	case 1, 5:
		return uint64(binary.LittleEndian.Uint32(f.Value[:4]))
	case 0:
		return 0
	}
	return binary.LittleEndian.Uint64(f.Value[:])
}
