package export

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner/doctor"
	"github.com/gpuenv/gpuenv/planner/facts"
)

// faulty is the snapshot's host with GPU 1 fallen off the bus (Xid 79
// in the kernel log), GPU 2 with a failed row remapping and a degraded
// link, and every NVML counter on GPU 0.
func faulty() *Snapshot {
	s := snapshot()
	obs := s.Obs
	i0, i2 := 0, 2
	replays := uint64(3)
	obs.Health.GPUs[0] = facts.GPUHealth{PCIAddress: "0000:18:00.0", Index: &i0, UUID: "GPU-0", Name: "NVIDIA H100 80GB HBM3",
		Link: &facts.PCIeLink{CurrentSpeed: "32.0 GT/s PCIe", MaxSpeed: "32.0 GT/s PCIe", CurrentSpeedGTs: 32, MaxSpeedGTs: 32, CurrentWidth: 16, MaxWidth: 16},
		NVML: &facts.NVMLHealth{ECCMode: "enabled", ECCVolatile: &facts.ECCCounts{Corrected: 4}, ECCAggregate: &facts.ECCCounts{Corrected: 40, Uncorrected: 1},
			RowRemap:     &facts.RowRemap{Corrected: 2, Histogram: &facts.RowRemapHistogram{Max: 638, High: 2}},
			ThrottleMask: 1, Temperature: 41, SlowdownTemp: 87, ShutdownTemp: 92, PowerUsage: 71500, PowerLimit: 700000,
			NVLinks:     []facts.NVLinkHealth{{Link: 0, State: "active", CRCFlit: 2}, {Link: 1, State: "active", Replay: 1}},
			PCIeReplays: &replays, RecoveryAction: "none", PersistenceMode: "enabled"}}
	obs.Health.GPUs[2] = facts.GPUHealth{PCIAddress: "0000:1a:00.0", Index: &i2, UUID: "GPU-2",
		Link: &facts.PCIeLink{CurrentSpeed: "32.0 GT/s PCIe", MaxSpeed: "32.0 GT/s PCIe", CurrentSpeedGTs: 32, MaxSpeedGTs: 32, CurrentWidth: 8, MaxWidth: 16},
		NVML: &facts.NVMLHealth{ECCMode: "enabled", RowRemap: &facts.RowRemap{Uncorrected: 9, Failure: true}}}
	obs.Kernel.Log = &facts.KernelLog{Events: []facts.KernelEvent{
		{Kind: facts.EventXid, PCIAddress: "0000:19:00.0", Code: "79", Detail: "pid=0, GPU has fallen off the bus.", Message: "Xid (PCI:0000:19:00): 79, pid=0, GPU has fallen off the bus.", Source: "/dev/kmsg", Count: 1},
		{Kind: facts.EventXid, PCIAddress: "0000:18:00.0", Code: "13", Message: "Xid (PCI:0000:18:00): 13, Graphics Exception", Source: "/dev/kmsg", Count: 3},
	}}
	return s
}

func TestGPUMetrics(t *testing.T) {
	var b bytes.Buffer
	if err := WritePrometheus(&b, faulty()); err != nil {
		t.Fatal(err)
	}
	got := parseExposition(t, b.String())
	g0 := "{gpu=0,UUID=GPU-0,pci_bus_id=0000:18:00.0,model_name=NVIDIA H100 80GB HBM3}"
	g2 := "{gpu=2,UUID=GPU-2,pci_bus_id=0000:1a:00.0,model_name=}"
	for key, want := range map[string]string{
		"gpuenv_gpus_healthy":    "6",
		"gpuenv_gpus_unhealthy":  "2",
		"gpuenv_gpu_health" + g0: "1", // Xid 13: a warning
		"gpuenv_gpu_health{gpu=,UUID=,pci_bus_id=0000:19:00.0,model_name=}":                                       "2",
		"gpuenv_gpu_xid_errors{gpu=,UUID=,pci_bus_id=0000:19:00.0,model_name=}":                                   "79",
		"gpuenv_gpu_xid_events{gpu=0,UUID=GPU-0,pci_bus_id=0000:18:00.0,model_name=NVIDIA H100 80GB HBM3,xid=13}": "3",
		"gpuenv_gpu_health" + g2:                      "2",
		"gpuenv_gpu_row_remap_failure" + g2:           "1",
		"gpuenv_gpu_remapped_rows_uncorrectable" + g2: "9",
		"gpuenv_gpu_pcie_link_width" + g2:             "8",
		"gpuenv_gpu_pcie_link_width_max" + g2:         "16",
		"gpuenv_gpu_pcie_link_gen" + g0:               "5",
		"gpuenv_gpu_ecc_sbe_volatile" + g0:            "4",
		"gpuenv_gpu_ecc_dbe_aggregate" + g0:           "1",
		"gpuenv_gpu_remapped_rows_correctable" + g0:   "2",
		"gpuenv_gpu_row_remap_banks{gpu=0,UUID=GPU-0,pci_bus_id=0000:18:00.0,model_name=NVIDIA H100 80GB HBM3,availability=high}": "2",
		"gpuenv_gpu_clock_throttle_reasons" + g0:       "1",
		"gpuenv_gpu_temperature_celsius" + g0:          "41",
		"gpuenv_gpu_slowdown_temperature_celsius" + g0: "87",
		"gpuenv_gpu_shutdown_temperature_celsius" + g0: "92",
		"gpuenv_gpu_power_usage_watts" + g0:            "71.5",
		"gpuenv_gpu_power_limit_watts" + g0:            "700",
		"gpuenv_gpu_pcie_replays" + g0:                 "3",
		"gpuenv_gpu_nvlinks_active" + g0:               "2",
		"gpuenv_gpu_nvlinks_inactive" + g0:             "0",
		"gpuenv_gpu_nvlink_crc_flit_errors" + g0:       "2",
		"gpuenv_gpu_nvlink_replay_errors" + g0:         "1",
		"gpuenv_gpu_reset_required" + g0:               "0",
		"gpuenv_gpu_persistence_mode" + g0:             "1",
		"gpuenv_gpu_ecc_mode" + g0:                     "1",
	} {
		if got[key] != want {
			t.Errorf("%s = %q, want %q", key, got[key], want)
		}
	}
	// Metric names end in units, never in _total, which promtool keeps
	// for counters; label names have no lower-case letter followed by an
	// upper-case one, which promtool's lint calls camelCase.
	camel := regexp.MustCompile(`[a-z][A-Z]`)
	for key := range got {
		name, labels, _ := strings.Cut(key, "{")
		if strings.HasSuffix(name, "_total") {
			t.Errorf("gauge %s ends in _total", name)
		}
		for _, l := range strings.Split(strings.TrimSuffix(labels, "}"), ",") {
			if n, _, _ := strings.Cut(l, "="); camel.MatchString(n) {
				t.Errorf("%s: label name %s is camelCase", name, n)
			}
		}
	}
}

func TestGPUHealthLabelsAndReason(t *testing.T) {
	s := faulty()
	var labels []string
	for _, l := range s.NFDLabels() {
		labels = append(labels, l.Name+"="+l.Value)
	}
	text := strings.Join(labels, "\n")
	if !strings.Contains(text, "gpuenv-gpus-healthy=6\n") || !strings.Contains(text, "gpuenv-gpus-unhealthy=2\n") {
		t.Errorf("labels:\n%s", text)
	}
	// The drain reason names the GPU's problem before the software's.
	r := doctor.Run(doctor.Input{Obs: s.Obs})
	r.Checks = append([]doctor.Check{{ID: "env.order", Status: doctor.Problem, Summary: "GPUs are chosen by index"}}, r.Checks...)
	r.Counts.Problems++
	reason := SlurmReason(r)
	if !strings.HasPrefix(reason, "gpuenv: GPU 0000:19:00.0: Xid 79, GPU has fallen off the bus") {
		t.Errorf("reason %q", reason)
	}
}
