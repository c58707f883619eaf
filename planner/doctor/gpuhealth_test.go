package doctor_test

import (
	"context"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/gpuenv/gpuenv/planner/doctor"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

// Kernel-log lines from public reports. The syslog prefix is kept; where
// a test needs the GPU to be one of the fixture's, only the address is
// changed to the fixture's, as the comment says.
const (
	// https://gist.github.com/ZackMattor/34b6e600e6dc6a1a2b5cb3fc91a0d438,
	// address 0000:10:00 changed to the DGX fixture's GPU 1, 0000:2a:00.
	xid79 = "Sep 09 15:53:19 saturn kernel: NVRM: GPU at PCI:0000:2a:00: GPU-072931a9-3c93-2239-0583-43798217258d\n" +
		"Sep 09 15:53:19 saturn kernel: NVRM: Xid (PCI:0000:2a:00): 79, pid=0, GPU has fallen off the bus.\n" +
		"Sep 09 15:53:19 saturn kernel: NVRM: GPU 0000:2a:00.0: GPU has fallen off the bus.\n"
	// https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1151, as
	// reported (its GPU, 0000:2b:00, is none of the fixture's).
	xid79Unknown = "May 18 19:02:39 bazzite kernel: NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.\n"
	// https://github.com/stas00/ml-engineering, compute/accelerator/nvidia/debug.md,
	// address 0000:10:1c changed to the fixture's GPU 2, 0000:3a:00.
	xid63 = "Oct 01 13:00:00 node kernel: NVRM: Xid (PCI:0000:3a:00): 63, pid=1896, Row Remapper: New row marked for remapping, reset gpu to activate.\n"
	// A program's own fault, as the Xid catalogue describes Xid 13.
	xid13 = "Oct 01 13:00:00 node kernel: NVRM: Xid (PCI:0000:18:00): 13, pid=4242, name=python3, Graphics Exception: ESR 0x504648=0x102000e 0x504650=0x0\n"
)

const bootID = "3c9a5a4e-1f1e-4a5e-9d59-7a3d1c2b0f00"

// gpuFault is the DGX with GPU i answering as edit makes it.
func gpuFault(i int, edit func(*hosttest.GPUHealth)) func() *server.Server {
	return dgx(func(devs []*server.Device) {
		g := hosttest.Healthy()
		edit(&g)
		hosttest.SetHealth(devs[i], g)
	})
}

func changes(fs ...func(*testing.T, string)) func(*testing.T, string) {
	return func(t *testing.T, root string) {
		for _, f := range fs {
			f(t, root)
		}
	}
}

func kernLog(lines string) func(*testing.T, string) {
	return writeFile("var/log/kern.log", lines)
}

func linkFiles(addr, cur, max, curW, maxW string) func(*testing.T, string) {
	d := "sys/bus/pci/devices/" + addr + "/"
	return changes(writeFile(d+"current_link_speed", cur+"\n"), writeFile(d+"max_link_speed", max+"\n"),
		writeFile(d+"current_link_width", curW+"\n"), writeFile(d+"max_link_width", maxW+"\n"))
}

func TestGPUHealthChecks(t *testing.T) {
	tests := []struct {
		name    string
		machine machine
		want    []finding
	}{
		{
			name:    "healthy DGX",
			machine: machine{fixture: "ubuntu2204-working", nvml: dgx(nil), change: kernLog("Oct 01 13:00:00 node kernel: Linux version 5.15.0\n")},
			want: []finding{
				{id: "gpu.xid", status: doctor.OK, summary: "no Xid"},
				{id: "gpu.reset", status: doctor.OK},
				{id: "gpu.ecc", status: doctor.OK},
				{id: "gpu.memory-repair", status: doctor.OK},
				{id: "gpu.thermal", status: doctor.OK},
				{id: "gpu.nvlink", status: doctor.OK},
				{id: "gpu.persistence", status: doctor.OK},
			},
		},
		{
			name:    "Xid 79: fallen off the bus",
			machine: machine{fixture: "ubuntu2204-working", nvml: dgx(nil), change: kernLog(xid79)},
			want: []finding{{id: "gpu.xid", status: doctor.Problem, summary: "GPU 1 (0000:2a:00.0): Xid 79, GPU has fallen off the bus",
				evidence: []string{"/var/log/kern.log: Xid (PCI:0000:2a:00): 79"}, fix: "check its power, cooling and the GPU's seating and cabling"}},
		},
		{
			name:    "Xid 79 on a GPU neither NVML nor the bus has",
			machine: machine{fixture: "ubuntu2204-working", nvml: dgx(nil), change: kernLog(xid79Unknown)},
			want:    []finding{{id: "gpu.xid", status: doctor.Problem, summary: "GPU 0000:2b:00.0: Xid 79"}},
		},
		{
			name:    "Xid 63: a row waits for a reset",
			machine: machine{fixture: "ubuntu2204-working", nvml: dgx(nil), change: kernLog(xid63)},
			want:    []finding{{id: "gpu.xid", status: doctor.Problem, summary: "GPU 2 (0000:3a:00.0): Xid 63", fix: "nvidia-smi -r"}},
		},
		{
			name:    "Xid 13: the program's fault, the GPU is fine",
			machine: machine{fixture: "ubuntu2204-working", nvml: dgx(nil), change: kernLog(xid13)},
			want:    []finding{{id: "gpu.xid", status: doctor.Warning, summary: "Xid 13, graphics engine exception", fix: "Restart the application"}},
		},
		{
			name:    "uncorrectable ECC errors",
			machine: machine{fixture: "ubuntu2204-working", nvml: gpuFault(4, func(g *hosttest.GPUHealth) { g.VolatileUncor, g.VolatileCorrected = 2, 5 })},
			want:    []finding{{id: "gpu.ecc", status: doctor.Problem, summary: "GPU 4 (0000:9a:00.0): 2 uncorrectable ECC errors", evidence: []string{"volatile ECC errors: 2 uncorrected, 5 corrected"}, fix: "reset it"}},
		},
		{
			name:    "ECC off",
			machine: machine{fixture: "ubuntu2204-working", nvml: gpuFault(0, func(g *hosttest.GPUHealth) { g.ECC, g.ECCPending = false, false })},
			want:    []finding{{id: "gpu.ecc", status: doctor.Warning, summary: "ECC is off"}},
		},
		{
			name:    "row remapping failed",
			machine: machine{fixture: "ubuntu2204-working", nvml: gpuFault(5, func(g *hosttest.GPUHealth) { g.RemapUncor, g.RemapFailure = 8, true })},
			want:    []finding{{id: "gpu.memory-repair", status: doctor.Problem, summary: "GPU 5 (0000:ab:00.0): row remapping failed", fix: "RMA"}},
		},
		{
			name: "spare rows exhausted",
			machine: machine{fixture: "ubuntu2204-working", nvml: gpuFault(5, func(g *hosttest.GPUHealth) {
				g.Histogram = nvml.RowRemapperHistogramValues{Max: 630, Low: 8, None: 2}
			})},
			want: []finding{{id: "gpu.memory-repair", status: doctor.Warning, summary: "2 memory banks have no spare rows left"}},
		},
		{
			name: "retired pages past the RMA threshold",
			machine: machine{fixture: "ubuntu2204-working", nvml: gpuFault(6, func(g *hosttest.GPUHealth) {
				g.RowRemap, g.RetiredSBE, g.RetiredDBE = false, 50, 10
			})},
			want: []finding{{id: "gpu.memory-repair", status: doctor.Problem, summary: "60 pages retired"}},
		},
		{
			name:    "row remapping pending: reset needed",
			machine: machine{fixture: "ubuntu2204-working", nvml: gpuFault(2, func(g *hosttest.GPUHealth) { g.RemapPending = true })},
			want:    []finding{{id: "gpu.reset", status: doctor.Problem, summary: "GPU 2 (0000:3a:00.0): needs a reset: row remapping waits for a reset"}},
		},
		{
			name:    "driver asks for a reboot",
			machine: machine{fixture: "ubuntu2204-working", nvml: gpuFault(3, func(g *hosttest.GPUHealth) { g.Recovery = nvml.GPU_RECOVERY_ACTION_NODE_REBOOT })},
			want:    []finding{{id: "gpu.reset", status: doctor.Problem, summary: "the driver asks for recovery: node reboot", fix: "reboot"}},
		},
		{
			name:    "hot GPU",
			machine: machine{fixture: "ubuntu2204-working", nvml: gpuFault(7, func(g *hosttest.GPUHealth) { g.Temp = 89 })},
			want:    []finding{{id: "gpu.thermal", status: doctor.Warning, summary: "GPU 7 (0000:db:00.0): at 89 °C, at its slowdown temperature"}},
		},
		{
			name:    "at shutdown temperature",
			machine: machine{fixture: "ubuntu2204-working", nvml: gpuFault(7, func(g *hosttest.GPUHealth) { g.Temp = 92 })},
			want:    []finding{{id: "gpu.thermal", status: doctor.Problem, summary: "at its shutdown temperature"}},
		},
		{
			name: "power brake",
			machine: machine{fixture: "ubuntu2204-working", nvml: gpuFault(1, func(g *hosttest.GPUHealth) {
				g.Throttle = nvml.ClocksThrottleReasonHwSlowdown | nvml.ClocksThrottleReasonHwPowerBrakeSlowdown
			})},
			want: []finding{{id: "gpu.thermal", status: doctor.Warning, summary: "hw_slowdown, hw_power_brake_slowdown", evidence: []string{"power 70 W of 700 W"}, fix: "power supplies"}},
		},
		{
			name:    "NVLink down",
			machine: machine{fixture: "ubuntu2204-working", nvml: gpuFault(0, func(g *hosttest.GPUHealth) { g.NVLinks[4] = false })},
			want:    []finding{{id: "gpu.nvlink", status: doctor.Problem, summary: "GPU 0 (0000:18:00.0): NVLink 4 down while 17 are up"}},
		},
		{
			name: "NVLink errors",
			machine: machine{fixture: "ubuntu2204-working", nvml: gpuFault(0, func(g *hosttest.GPUHealth) {
				g.NVLinkErrors = map[[2]int]uint64{{3, int(nvml.NVLINK_ERROR_DL_CRC_FLIT)}: 12}
			})},
			want: []finding{{id: "gpu.nvlink", status: doctor.Warning, summary: "link 3: replay 0, recovery 0, CRC flit 12"}},
		},
		{
			name:    "persistence off",
			machine: machine{fixture: "ubuntu2204-working", nvml: gpuFault(0, func(g *hosttest.GPUHealth) { g.Persistence = false })},
			want:    []finding{{id: "gpu.persistence", status: doctor.Warning, summary: "persistence mode is off", fix: "persistence_mode = true"}},
		},
		{
			name:    "PCIe link narrower than the card",
			machine: machine{fixture: "ubuntu2204-working", nvml: dgx(nil), change: linkFiles("0000:5d:00.0", "32.0 GT/s PCIe", "32.0 GT/s PCIe", "8", "16")},
			want: []finding{{id: "gpu.pcie-link", status: doctor.Problem, summary: "GPU 3 (0000:5d:00.0): PCIe link trained at x8 of x16",
				evidence: []string{"/sys/bus/pci/devices/0000:5d:00.0: current_link_width 8, max_link_width 16"}, fix: "reseat the GPU"}},
		},
		{
			name:    "PCIe link down",
			machine: machine{fixture: "ubuntu2204-working", nvml: dgx(nil), change: linkFiles("0000:5d:00.0", "Unknown", "32.0 GT/s PCIe", "0", "16")},
			want:    []finding{{id: "gpu.pcie-link", status: doctor.Problem, summary: "GPU 3 (0000:5d:00.0): PCIe link is down", evidence: []string{`current_link_speed "Unknown", current_link_width 0`}}},
		},
		{
			name:    "PCIe link slow on an idle GPU: power saving",
			machine: machine{fixture: "ubuntu2204-working", nvml: dgx(nil), change: linkFiles("0000:5d:00.0", "2.5 GT/s PCIe", "32.0 GT/s PCIe", "16", "16")},
			want:    []finding{{id: "gpu.pcie-link", status: doctor.OK, summary: "full width and speed"}},
		},
		{
			name: "PCIe link slow under load",
			machine: machine{fixture: "ubuntu2204-working", nvml: gpuFault(3, func(g *hosttest.GPUHealth) { g.Throttle = nvml.ClocksEventReasonSwPowerCap }),
				change: linkFiles("0000:5d:00.0", "16.0 GT/s PCIe", "32.0 GT/s PCIe", "16", "16")},
			want: []finding{{id: "gpu.pcie-link", status: doctor.Warning, summary: "PCIe link runs at 16.0 GT/s PCIe of 32.0 GT/s PCIe"}},
		},
		{
			name:    "a GPU the driver lists is gone from the bus",
			machine: machine{fixture: "ubuntu2204-working", change: writeFile("proc/driver/nvidia/gpus/0000:e0:00.0/information", "Model: NVIDIA H100 80GB HBM3\n")},
			want:    []finding{{id: "gpu.bus", status: doctor.Problem, summary: "GPU 0000:e0:00.0 has fallen off the bus", evidence: []string{"/sys/bus/pci/devices/0000:e0:00.0 does not"}}},
		},
		{
			name:    "no NVML: the counters are not judged",
			machine: machine{fixture: "ubuntu2204-working"},
			want:    []finding{{id: "gpu.counters", status: doctor.Skipped, summary: "NVML did not answer: the GPUs' health counters"}, {id: "gpu.pcie-link", status: doctor.Skipped}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.machine.report(t)
			for _, w := range tc.want {
				assertFinding(t, r, w)
			}
		})
	}
}

// verifiedRecord is a verify that passed on GPU 1 in boot, with xids
// logged for it then.
func verifiedRecord(boot string, passed bool, xids map[string]int) *facts.VerifyRecord {
	return &facts.VerifyRecord{Time: "2026-12-02T10:00:00Z", BootID: boot, GPUs: []facts.VerifiedGPU{
		{UUID: "GPU-00000000-0000-0000-0000-000000000001", PCIAddress: "0000:2a:00.0", Passed: passed, Xids: xids},
	}}
}

// A GPU an Xid failed is healthy again once a verify passed on it after
// the Xid, in the same boot; a later Xid, a failed verify or another
// boot's record do not re-admit it.
func TestReadmissionAfterVerify(t *testing.T) {
	cases := []struct {
		name   string
		log    string
		record *facts.VerifyRecord
		want   doctor.Status
	}{
		{"no verify", xid79, nil, doctor.Problem},
		{"verify passed after the Xid", xid79, verifiedRecord(bootID, true, map[string]int{"79": 1}), doctor.OK},
		{"the Xid came again after the verify", xid79 + strings.Replace(xid79, "15:53:19", "16:10:00", -1), verifiedRecord(bootID, true, map[string]int{"79": 1}), doctor.Problem},
		{"verify before the Xid", xid79, verifiedRecord(bootID, true, nil), doctor.Problem},
		{"verify failed", xid79, verifiedRecord(bootID, false, map[string]int{"79": 1}), doctor.Problem},
		{"verify of another boot", xid79, verifiedRecord("another-boot", true, map[string]int{"79": 1}), doctor.Problem},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := hosttest.Build(t, "ubuntu2204-working")
			hosttest.WriteFile(t, root, "var/log/kern.log", c.log)
			hosttest.WriteFile(t, root, "proc/sys/kernel/random/boot_id", bootID+"\n")
			h := hosttest.New(t, root)
			obs := providers.Observe(context.Background(), h, providers.ObserveOptions{NVML: host.NewNVML(dgx(nil)())})
			obs.Health.Verified = c.record
			r := doctor.Run(doctor.Input{Obs: obs})
			var xid *doctor.Check
			for i := range r.Checks {
				if r.Checks[i].ID == "gpu.xid" {
					xid = &r.Checks[i]
				}
			}
			if xid == nil || xid.Status != c.want {
				t.Fatalf("gpu.xid %+v, want %s", xid, c.want)
			}
			v := doctor.GPUVerdicts(obs)
			var gpu1 *doctor.GPUVerdict
			for i := range v {
				if v[i].PCIAddress == "0000:2a:00.0" {
					gpu1 = &v[i]
				}
			}
			if gpu1 == nil {
				t.Fatal("no verdict for GPU 1")
			}
			if c.want == doctor.OK && (gpu1.Status != doctor.OK || len(gpu1.Readmitted) != 1 || !strings.Contains(xid.Summary, "healthy again")) {
				t.Errorf("re-admitted GPU: %+v; summary %q", gpu1, xid.Summary)
			}
			if c.want == doctor.Problem && (gpu1.Status != doctor.Problem || !strings.Contains(gpu1.Problems[0], "Xid 79")) {
				t.Errorf("failed GPU: %+v", gpu1)
			}
		})
	}
}

func TestLookupXid(t *testing.T) {
	cases := []struct {
		code, msg string
		action    doctor.XidAction
		known     bool
	}{
		{"79", "GPU has fallen off the bus.", doctor.XidCheckMechanicals, true},
		{"48", "An uncorrectable double bit error", doctor.XidResetGPU, true},
		{"13", "Graphics Exception", doctor.XidRestartApp, true},
		{"45", "Preemptive Cleanup", doctor.XidIgnore, true},
		{"64", "", doctor.XidResetGPU, true},
		{"154", "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)", doctor.XidReboot, true},
		{"154", "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)", doctor.XidResetGPU, true},
		{"999", "", doctor.XidResetGPU, false},
	}
	for _, c := range cases {
		x, ok := doctor.LookupXid(c.code, c.msg)
		if x.Action != c.action || ok != c.known || x.Meaning == "" {
			t.Errorf("LookupXid(%s, %q) = %+v, %v; want %s, %v", c.code, c.msg, x, ok, c.action, c.known)
		}
	}
}
