package host_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

// healthOf reads the health of a DGX H100 whose GPU 3 answers as g.
func healthOf(t *testing.T, g hosttest.GPUHealth) (host.NVMLDeviceHealth, *server.Server) {
	t.Helper()
	s := hosttest.NVMLServer("dgxh100")
	hosttest.SetHealth(s.Devices[3].(*server.Device), g)
	n := host.NewNVML(s)
	if err := n.Init(); err != nil {
		t.Fatal(err)
	}
	defer n.Shutdown()
	hs, err := n.(host.NVMLHealthReader).Health()
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 8 {
		t.Fatalf("%d devices", len(hs))
	}
	if hs[3].Index != 3 || hs[3].UUID != "GPU-00000000-0000-0000-0000-000000000003" || hs[3].PCIBusID != hosttest.DGXBusIDs[3] {
		t.Errorf("device 3 named %d %s %s", hs[3].Index, hs[3].UUID, hs[3].PCIBusID)
	}
	return hs[3], s
}

func TestNVMLHealthHealthy(t *testing.T) {
	d, _ := healthOf(t, hosttest.Healthy())
	h := d.NVMLHealth
	zero := uint64(0)
	want := facts.NVMLHealth{
		ECCMode: "enabled", ECCPending: "enabled",
		ECCVolatile: &facts.ECCCounts{}, ECCAggregate: &facts.ECCCounts{},
		RowRemap:        &facts.RowRemap{Histogram: &facts.RowRemapHistogram{Max: 640}},
		ThrottleReasons: []string{"gpu_idle"}, ThrottleMask: 1,
		Temperature: 35, SlowdownTemp: 87, ShutdownTemp: 92,
		PowerUsage: 70000, PowerLimit: 700000,
		PCIeReplays: &zero, RecoveryAction: "none", PersistenceMode: "enabled",
	}
	h.NVLinks = nil
	if diff := cmp.Diff(want, h); diff != "" {
		t.Errorf("healthy GPU (-want +got):\n%s", diff)
	}
	if len(d.NVLinks) != 18 || d.NVLinks[17] != (facts.NVLinkHealth{Link: 17, State: "active", Version: "4.0", Remote: "0000:06:00.0", RemoteType: "switch"}) {
		t.Errorf("NVLinks %+v", d.NVLinks)
	}
}

// Every field read faulty comes back as the fact that says so.
func TestNVMLHealthFaults(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(*hosttest.GPUHealth)
		check func(h facts.NVMLHealth) bool
	}{
		{"ECC off, on after reset", func(g *hosttest.GPUHealth) { g.ECC = false },
			func(h facts.NVMLHealth) bool {
				return h.ECCMode == "disabled" && h.ECCPending == "enabled" && h.ECCVolatile == nil
			}},
		{"volatile and aggregate ECC counts", func(g *hosttest.GPUHealth) {
			g.VolatileCorrected, g.VolatileUncor, g.AggregateCorrected, g.AggregateUnc = 7, 2, 70, 3
		}, func(h facts.NVMLHealth) bool {
			return *h.ECCVolatile == facts.ECCCounts{Corrected: 7, Uncorrected: 2} && *h.ECCAggregate == facts.ECCCounts{Corrected: 70, Uncorrected: 3}
		}},
		{"row remapping pending", func(g *hosttest.GPUHealth) { g.RemapCorrected, g.RemapPending = 1, true },
			func(h facts.NVMLHealth) bool {
				return h.RowRemap.Pending && h.RowRemap.Corrected == 1 && h.ResetRequired
			}},
		{"row remapping failure and histogram", func(g *hosttest.GPUHealth) {
			g.RemapUncor, g.RemapFailure = 9, true
			g.Histogram = nvml.RowRemapperHistogramValues{Max: 600, High: 30, Partial: 5, Low: 3, None: 2}
		}, func(h facts.NVMLHealth) bool {
			return h.RowRemap.Failure && h.RowRemap.Uncorrected == 9 && *h.RowRemap.Histogram == facts.RowRemapHistogram{Max: 600, High: 30, Partial: 5, Low: 3, None: 2} && !h.ResetRequired
		}},
		{"retired pages before Ampere", func(g *hosttest.GPUHealth) {
			g.RowRemap, g.RetiredSBE, g.RetiredDBE, g.RetiredPending = false, 40, 21, true
		}, func(h facts.NVMLHealth) bool {
			return h.RowRemap == nil && *h.RetiredPages == facts.RetiredPages{SingleBit: 40, DoubleBit: 21, Pending: true} && h.ResetRequired
		}},
		{"thermal and power-brake slowdown", func(g *hosttest.GPUHealth) {
			g.Throttle = nvml.ClocksThrottleReasonHwThermalSlowdown | nvml.ClocksThrottleReasonHwPowerBrakeSlowdown | nvml.ClocksEventReasonSwPowerCap
			g.Temp = 88
		}, func(h facts.NVMLHealth) bool {
			return slices.Equal(h.ThrottleReasons, []string{"sw_power_cap", "hw_thermal_slowdown", "hw_power_brake_slowdown"}) && h.ThrottleMask == 0xc4 && h.Temperature == 88
		}},
		{"power", func(g *hosttest.GPUHealth) { g.PowerMW, g.PowerLimitMW = 690000, 700000 },
			func(h facts.NVMLHealth) bool { return h.PowerUsage == 690000 && h.PowerLimit == 700000 }},
		{"NVLink down with errors", func(g *hosttest.GPUHealth) {
			g.NVLinks[5] = false
			g.NVLinkErrors = map[[2]int]uint64{{2, int(nvml.NVLINK_ERROR_DL_RECOVERY)}: 4, {2, int(nvml.NVLINK_ERROR_DL_CRC_FLIT)}: 100, {2, int(nvml.NVLINK_ERROR_DL_REPLAY)}: 3, {2, int(nvml.NVLINK_ERROR_DL_CRC_DATA)}: 1}
		}, func(h facts.NVMLHealth) bool {
			return h.NVLinks[5].State == "inactive" && h.NVLinks[2] == facts.NVLinkHealth{Link: 2, State: "active", Version: "4.0", Remote: "0000:07:00.0", RemoteType: "switch", Replay: 3, Recovery: 4, CRCFlit: 100, CRCData: 1}
		}},
		{"NVLink bridge to another GPU, version 3.0", func(g *hosttest.GPUHealth) {
			g.NVLinks, g.NVLinkRemotes, g.NVLinkToGPU, g.NVLinkVersion = g.NVLinks[:4], []string{"0000:2a:00.0", "0000:2a:00.0", "0000:2a:00.0", "0000:2a:00.0"}, true, nvml.NVLINK_VERSION_3_0
		}, func(h facts.NVMLHealth) bool {
			return len(h.NVLinks) == 4 && h.NVLinks[3] == facts.NVLinkHealth{Link: 3, State: "active", Version: "3.0", Remote: "0000:2a:00.0", RemoteType: "gpu"}
		}},
		{"recovery action: node reboot", func(g *hosttest.GPUHealth) { g.Recovery = nvml.GPU_RECOVERY_ACTION_NODE_REBOOT },
			func(h facts.NVMLHealth) bool { return h.RecoveryAction == "node_reboot" && h.ResetRequired }},
		{"recovery action unknown to an old driver", func(g *hosttest.GPUHealth) { g.RecoveryRet = nvml.ERROR_NOT_SUPPORTED },
			func(h facts.NVMLHealth) bool { return h.RecoveryAction == "" && len(h.Errors) == 0 }},
		{"reset required", func(g *hosttest.GPUHealth) { g.ResetRequired = true },
			func(h facts.NVMLHealth) bool {
				return h.ResetRequired && h.ECCMode == "" && slices.Contains(h.Errors, "ECC mode: ERROR_RESET_REQUIRED")
			}},
		{"persistence off", func(g *hosttest.GPUHealth) { g.Persistence = false },
			func(h facts.NVMLHealth) bool { return h.PersistenceMode == "disabled" }},
		{"PCIe replays", func(g *hosttest.GPUHealth) { g.PCIeReplays = 12 },
			func(h facts.NVMLHealth) bool { return *h.PCIeReplays == 12 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := hosttest.Healthy()
			c.edit(&g)
			d, _ := healthOf(t, g)
			if !c.check(d.NVMLHealth) {
				t.Errorf("health %+v", d.NVMLHealth)
			}
		})
	}
}

// The health pass reads: every call it makes on the library and on each
// device is a query (Get…), never one that starts work or changes a
// setting.
func TestNVMLHealthOnlyReads(t *testing.T) {
	_, s := healthOf(t, hosttest.Healthy())
	calls := func(v any) []string {
		var made []string
		rv := reflect.ValueOf(v)
		for i := 0; i < rv.NumMethod(); i++ {
			m := rv.Type().Method(i)
			if !strings.HasSuffix(m.Name, "Calls") || m.Type.NumIn() != 1 {
				continue
			}
			if out := rv.Method(i).Call(nil); len(out) == 1 && out[0].Kind() == reflect.Slice && out[0].Len() > 0 {
				made = append(made, strings.TrimSuffix(m.Name, "Calls"))
			}
		}
		return made
	}
	var gets int
	for _, d := range s.Devices {
		for _, name := range calls(d.(*server.Device)) {
			if !strings.HasPrefix(name, "Get") {
				t.Errorf("the health pass called Device.%s", name)
			}
			gets++
		}
	}
	for _, name := range calls(s) {
		if !strings.HasPrefix(name, "DeviceGet") && !strings.HasPrefix(name, "SystemGet") && name != "Init" && name != "Shutdown" {
			t.Errorf("the health pass called %s", name)
		}
	}
	if gets < 8*15 {
		t.Errorf("only %d kinds of device queries made: the call recording does not work", gets)
	}
}

// A health pass over the eight GPUs of a DGX H100: NVML started, every
// counter read, NVML stopped.
func BenchmarkNVMLHealthDGXH100(b *testing.B) {
	s := hosttest.NVMLServer("dgxh100")
	b.ReportAllocs()
	for b.Loop() {
		n := host.NewNVML(s)
		if err := n.Init(); err != nil {
			b.Fatal(err)
		}
		hs, err := n.(host.NVMLHealthReader).Health()
		if err != nil || len(hs) != 8 {
			b.Fatal(err, len(hs))
		}
		n.Shutdown()
	}
}
