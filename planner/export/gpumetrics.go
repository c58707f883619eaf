package export

import (
	"strconv"

	"github.com/gpuenv/gpuenv/planner/doctor"
	"github.com/gpuenv/gpuenv/planner/facts"
)

// The per-GPU metrics. Their labels are those DCGM exporter puts on its
// series (gpu, UUID, pci_bus_id, and its modelName as model_name, since
// promtool's lint refuses a camelCase label name), so that a dashboard or
// an alert written for DCGM exporter joins them on UUID or pci_bus_id;
// their names are gpuenv's,
// so that they never collide with DCGM exporter's on a node that runs
// both, each named after the DCGM field that reports the same
// (NVIDIA/dcgm-exporter, etc/default-counters.csv and
// etc/dcp-metrics-included.csv; the fields are DCGM's dcgm_fields.h).
// Every one is a gauge: a snapshot of the driver's counters, which reset
// when the driver reloads (volatile) or never (aggregate).

// gpuLabels are a GPU's labels.
func gpuLabels(g facts.GPUHealth, extra ...string) []string {
	idx := ""
	if g.Index != nil {
		idx = strconv.Itoa(*g.Index)
	}
	return append([]string{"gpu", idx, "UUID", g.UUID, "pci_bus_id", g.PCIAddress, "model_name", g.Name}, extra...)
}

// PCIeGen is the PCIe generation whose signalling rate is gts, 0 when it
// is none: 2.5 GT/s is Gen 1, 5 Gen 2, 8 Gen 3, 16 Gen 4, 32 Gen 5, 64
// Gen 6 (PCI-SIG's base specifications).
func PCIeGen(gts float64) int {
	for gen, rate := range []float64{2.5, 5, 8, 16, 32, 64} {
		if gts == rate {
			return gen + 1
		}
	}
	return 0
}

// gpuMetrics are the per-GPU families, each with at least one sample.
func (s *Snapshot) gpuMetrics() []*metric {
	var out []*metric
	fams := map[string]*metric{}
	add := func(name, help string, v float64, labels []string) {
		m, ok := fams[name]
		if !ok {
			m = &metric{name: "gpuenv_gpu_" + name, help: help}
			fams[name] = m
			out = append(out, m)
		}
		m.add(v, labels...)
	}
	obs := s.Obs
	verdicts := doctor.GPUVerdicts(obs)
	byAddr := map[string]facts.GPUHealth{}
	for _, g := range obs.Health.GPUs {
		byAddr[g.PCIAddress] = g
	}
	xids := map[string]map[string]int{}
	last := map[string]int{}
	if obs.Kernel.Log != nil {
		for _, e := range obs.Kernel.Log.Events {
			if e.Kind != facts.EventXid {
				continue
			}
			if xids[e.PCIAddress] == nil {
				xids[e.PCIAddress] = map[string]int{}
			}
			xids[e.PCIAddress][e.Code] += e.Count
			if n, err := strconv.Atoi(e.Code); err == nil {
				last[e.PCIAddress] = n
			}
		}
	}
	for _, v := range verdicts {
		g, ok := byAddr[v.PCIAddress]
		if !ok {
			g = facts.GPUHealth{PCIAddress: v.PCIAddress, UUID: v.UUID, Index: v.Index, Name: v.Name}
		}
		l := gpuLabels(g)
		add("health", "Each GPU's health as gpuenv doctor's GPU state checks judge it: 0 ok, 1 warning, 2 problem.", float64(rank(v.Status)), l)
		add("missing_from_bus", "1 when the driver lists the GPU and the PCI bus does not (fallen off the bus).", boolValue(v.Missing), l)
		add("xid_errors", "The last Xid the kernel log holds for the GPU in this boot, 0 for none (as DCGM_FI_DEV_XID_ERRORS).", float64(last[v.PCIAddress]), l)
		for code, n := range xids[v.PCIAddress] {
			add("xid_events", "Xid events the kernel log holds for the GPU in this boot, by Xid.", float64(n), gpuLabels(g, "xid", code))
		}
		if ln := g.Link; ln != nil {
			add("pcie_link_gen", "The PCIe generation the GPU's link runs at now (as DCGM_FI_DEV_PCIE_LINK_GEN); an idle GPU lowers it.", float64(PCIeGen(ln.CurrentSpeedGTs)), l)
			add("pcie_link_gen_max", "The highest PCIe generation the GPU's link can run at (max_link_speed).", float64(PCIeGen(ln.MaxSpeedGTs)), l)
			add("pcie_link_width", "The lanes the GPU's PCIe link trained to (as DCGM_FI_DEV_PCIE_LINK_WIDTH).", float64(ln.CurrentWidth), l)
			add("pcie_link_width_max", "The lanes the GPU's PCIe link can have (max_link_width).", float64(ln.MaxWidth), l)
		}
		n := g.NVML
		if n == nil {
			continue
		}
		add("reset_required", "1 when the GPU needs a reset (or the driver asks for more: its recovery action is not none).", boolValue(n.ResetRequired), l)
		add("lost", "1 when NVML reports the GPU lost (ERROR_GPU_IS_LOST).", boolValue(n.Lost), l)
		if n.PersistenceMode != "" {
			add("persistence_mode", "1 when persistence mode is on.", boolValue(n.PersistenceMode == "enabled"), l)
		}
		if n.ECCMode != "" {
			add("ecc_mode", "1 when ECC is on.", boolValue(n.ECCMode == "enabled"), l)
		}
		if e := n.ECCVolatile; e != nil {
			add("ecc_sbe_volatile", "Corrected (single-bit) ECC errors since the driver loaded (as DCGM_FI_DEV_ECC_SBE_VOL_TOTAL).", float64(e.Corrected), l)
			add("ecc_dbe_volatile", "Uncorrected (double-bit) ECC errors since the driver loaded (as DCGM_FI_DEV_ECC_DBE_VOL_TOTAL).", float64(e.Uncorrected), l)
		}
		if e := n.ECCAggregate; e != nil {
			add("ecc_sbe_aggregate", "Corrected ECC errors over the GPU's life (as DCGM_FI_DEV_ECC_SBE_AGG_TOTAL).", float64(e.Corrected), l)
			add("ecc_dbe_aggregate", "Uncorrected ECC errors over the GPU's life (as DCGM_FI_DEV_ECC_DBE_AGG_TOTAL).", float64(e.Uncorrected), l)
		}
		if r := n.RetiredPages; r != nil {
			add("retired_pages_sbe", "Pages retired for repeated single-bit errors (as DCGM_FI_DEV_RETIRED_SBE).", float64(r.SingleBit), l)
			add("retired_pages_dbe", "Pages retired for a double-bit error (as DCGM_FI_DEV_RETIRED_DBE).", float64(r.DoubleBit), l)
			add("retired_pages_pending", "1 when a page waits for a reset to be retired (as DCGM_FI_DEV_RETIRED_PENDING).", boolValue(r.Pending), l)
		}
		if r := n.RowRemap; r != nil {
			add("remapped_rows_correctable", "Rows remapped for correctable errors (as DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS).", float64(r.Corrected), l)
			add("remapped_rows_uncorrectable", "Rows remapped for uncorrectable errors (as DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS).", float64(r.Uncorrected), l)
			add("row_remap_pending", "1 when a remapping waits for a reset (as DCGM_FI_DEV_ROW_REMAP_PENDING).", boolValue(r.Pending), l)
			add("row_remap_failure", "1 when row remapping failed (as DCGM_FI_DEV_ROW_REMAP_FAILURE).", boolValue(r.Failure), l)
			if h := r.Histogram; h != nil {
				for _, b := range []struct {
					name string
					n    int
				}{{"max", h.Max}, {"high", h.High}, {"partial", h.Partial}, {"low", h.Low}, {"none", h.None}} {
					add("row_remap_banks", "Memory banks by the spare rows they have left (NVML's row remapper histogram).", float64(b.n), gpuLabels(g, "availability", b.name))
				}
			}
		}
		add("clock_throttle_reasons", "The clock event (throttle) reasons now active, as NVML's bit mask (as DCGM_FI_DEV_CLOCK_THROTTLE_REASONS).", float64(n.ThrottleMask), l)
		if n.Temperature > 0 {
			add("temperature_celsius", "The GPU's temperature (as DCGM_FI_DEV_GPU_TEMP).", float64(n.Temperature), l)
		}
		if n.SlowdownTemp > 0 {
			add("slowdown_temperature_celsius", "The temperature at which the GPU slows its clocks (as DCGM_FI_DEV_SLOWDOWN_TEMP).", float64(n.SlowdownTemp), l)
		}
		if n.ShutdownTemp > 0 {
			add("shutdown_temperature_celsius", "The temperature at which the GPU shuts down (as DCGM_FI_DEV_SHUTDOWN_TEMP).", float64(n.ShutdownTemp), l)
		}
		if n.PowerUsage > 0 {
			add("power_usage_watts", "The GPU's power draw (as DCGM_FI_DEV_POWER_USAGE).", float64(n.PowerUsage)/1000, l)
		}
		if n.PowerLimit > 0 {
			add("power_limit_watts", "The power limit the driver enforces (as DCGM_FI_DEV_ENFORCED_POWER_LIMIT).", float64(n.PowerLimit)/1000, l)
		}
		if n.PCIeReplays != nil {
			add("pcie_replays", "PCIe packets the GPU sent again (as DCGM_FI_DEV_PCIE_REPLAY_COUNTER).", float64(*n.PCIeReplays), l)
		}
		if len(n.NVLinks) > 0 {
			var active, replay, recovery, flit, data float64
			for _, k := range n.NVLinks {
				if k.State == "active" {
					active++
				}
				replay += float64(k.Replay)
				recovery += float64(k.Recovery)
				flit += float64(k.CRCFlit)
				data += float64(k.CRCData)
			}
			add("nvlinks_active", "NVLinks that are up.", active, l)
			add("nvlinks_inactive", "NVLinks that are down.", float64(len(n.NVLinks))-active, l)
			add("nvlink_replay_errors", "NVLink replay errors over all links (as DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL).", replay, l)
			add("nvlink_recovery_errors", "NVLink recovery errors over all links (as DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL).", recovery, l)
			add("nvlink_crc_flit_errors", "NVLink CRC flit errors over all links (as DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL).", flit, l)
			add("nvlink_crc_data_errors", "NVLink CRC data errors over all links (as DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL).", data, l)
		}
	}
	return out
}

// GPUCounts are how many GPUs are healthy (ok or warning) and unhealthy.
func (s *Snapshot) GPUCounts() (healthy, unhealthy int) {
	for _, v := range doctor.GPUVerdicts(s.Obs) {
		if v.Status == doctor.Problem {
			unhealthy++
		} else {
			healthy++
		}
	}
	return healthy, unhealthy
}

func rank(s doctor.Status) int { return severity(s) }
