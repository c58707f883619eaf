package doctor

import (
	"slices"
	"testing"

	"github.com/gpuenv/gpuenv/planner/facts"
)

// GPUStates shows, in the order of the addresses: a GPU that fell off the
// bus (which only the driver and the kernel log still name) as missing
// with its Xid and doctor's finding; a GPU without NVML's counters with
// only what the files show; and an Xid a verify passed after as
// re-admitted, no finding.
func TestGPUStates(t *testing.T) {
	one := 1
	obs := &facts.Observation{}
	obs.PCI = []facts.PCIDevice{{Address: "0000:18:00.0"}, {Address: "0000:3a:00.0"}}
	obs.Health = facts.Health{
		BootID: "b1",
		GPUs: []facts.GPUHealth{
			{PCIAddress: "0000:3a:00.0", UUID: "GPU-3a", Index: &one, Link: &facts.PCIeLink{CurrentSpeed: "16.0 GT/s PCIe", MaxSpeed: "16.0 GT/s PCIe", CurrentSpeedGTs: 16, MaxSpeedGTs: 16, CurrentWidth: 16, MaxWidth: 16}},
			{PCIAddress: "0000:18:00.0", UUID: "GPU-18"},
		},
		Missing:  []string{"0000:2a:00.0"},
		Verified: &facts.VerifyRecord{Time: "t", BootID: "b1", GPUs: []facts.VerifiedGPU{{UUID: "GPU-18", Passed: true, Xids: map[string]int{"13": 2}}}},
	}
	obs.Kernel.Log = &facts.KernelLog{Events: []facts.KernelEvent{
		{Kind: facts.EventXid, Code: "79", PCIAddress: "0000:2a:00.0", Message: "Xid 79", Source: "kern.log", Count: 1},
		{Kind: facts.EventXid, Code: "13", PCIAddress: "0000:18:00.0", Message: "Xid 13", Source: "kern.log", Count: 2},
	}}
	got := GPUStates(obs)
	var addrs []string
	for _, s := range got {
		addrs = append(addrs, s.PCIAddress)
	}
	if !slices.Equal(addrs, []string{"0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0"}) {
		t.Fatalf("GPUs %v", addrs)
	}
	if s := got[0]; !slices.Equal(s.States, []string{"Xid 13 ×2 (re-admitted by verify)"}) || len(s.Findings) != 0 || s.Status != OK {
		t.Errorf("re-admitted GPU: %+v", s)
	}
	if s := got[1]; !slices.Equal(s.States, []string{"missing from the PCI bus", "Xid 79"}) || s.Status != Problem || len(s.Findings) == 0 || s.Findings[0].Check != CheckGPUBus {
		t.Errorf("GPU off the bus: %+v", s)
	}
	if s := got[2]; s.Name != "GPU 1 (0000:3a:00.0)" || !slices.Equal(s.States, []string{"PCIe 16.0 GT/s x16", "no Xid"}) || s.Status != OK {
		t.Errorf("GPU without NVML: %+v", s)
	}
	obs.Kernel.Log = nil
	if s := GPUStates(obs)[2]; !slices.Equal(s.States, []string{"PCIe 16.0 GT/s x16", "Xid unknown (no kernel log)"}) {
		t.Errorf("no kernel log: %+v", s)
	}
}
