package verify_test

import (
	"testing"
	"time"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/probe/cudacheck"
	"github.com/gpuenv/gpuenv/providers/probe/verify"
)

func TestRecord(t *testing.T) {
	obs := &facts.Observation{}
	obs.Health.BootID = "boot-1"
	obs.NVML.Devices = []facts.GPUDevice{
		{Index: 0, UUID: "GPU-aaaaaaaa-0000-0000-0000-000000000000", PCIBusID: "0000:18:00.0"},
		{Index: 1, UUID: "GPU-bbbbbbbb-0000-0000-0000-000000000000", PCIBusID: "0000:2a:00.0"},
	}
	obs.Kernel.Log = &facts.KernelLog{Events: []facts.KernelEvent{
		{Kind: facts.EventXid, PCIAddress: "0000:2a:00.0", Code: "79", Count: 1},
		{Kind: facts.EventXid, PCIAddress: "0000:2a:00.0", Code: "79", Count: 2, Source: "/var/log/kern.log.1"},
		{Kind: facts.EventRmInitFailed, PCIAddress: "0000:2a:00.0", Code: "0x22:0x56:884", Count: 1},
	}}
	all := []cudacheck.Step{}
	all = append(all, cudacheck.DeviceSteps...)
	c := &cudacheck.Report{Devices: []cudacheck.Device{
		// CUDA spells the UUID in upper case here: matched all the same.
		{Ordinal: 0, UUID: "GPU-BBBBBBBB-0000-0000-0000-000000000000", Passed: all},
		{Ordinal: 1, UUID: "GPU-aaaaaaaa-0000-0000-0000-000000000000", Passed: all[:3], Failure: &cudacheck.Failure{Step: cudacheck.StepCopyIn}},
		{Ordinal: 2, Passed: all},
	}}
	prev := &facts.VerifyRecord{BootID: "boot-1", GPUs: []facts.VerifiedGPU{{UUID: "GPU-cccccccc-0000-0000-0000-000000000000", Passed: true}, {UUID: "GPU-aaaaaaaa-0000-0000-0000-000000000000", Passed: true}}}
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.FixedZone("CET", 3600))
	r := verify.Record(obs, c, prev, now)
	if r.Time != "2026-12-02T09:00:00Z" || r.BootID != "boot-1" || len(r.GPUs) != 3 {
		t.Fatalf("record %+v", r)
	}
	b, a, kept := r.GPUs[0], r.GPUs[1], r.GPUs[2]
	if !b.Passed || b.PCIAddress != "0000:2a:00.0" || b.Xids["79"] != 3 || len(b.Xids) != 1 {
		t.Errorf("passing GPU %+v: want its 3 Xid 79 from both logs", b)
	}
	if a.Passed || a.PCIAddress != "0000:18:00.0" || a.Xids != nil {
		t.Errorf("failing GPU %+v", a)
	}
	if kept.UUID != "GPU-cccccccc-0000-0000-0000-000000000000" || !kept.Passed {
		t.Errorf("earlier record's GPU not kept: %+v", kept)
	}
	// Another boot's record is not carried over.
	prev.BootID = "boot-0"
	if r := verify.Record(obs, c, prev, now); len(r.GPUs) != 2 {
		t.Errorf("another boot's GPUs carried over: %+v", r.GPUs)
	}
}
