package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/probe/cudacheck"
)

// verify judges each GPU's copies against the link observed for it,
// found through NVML's UUID and bus id, and shows a slow direction as a
// finding.
func TestJudgeLinks(t *testing.T) {
	obs := &facts.Observation{}
	obs.NVML.Devices = []facts.GPUDevice{{UUID: "GPU-aa", PCIBusID: "0000:18:00.0"}, {UUID: "GPU-bb", PCIBusID: "0000:2a:00.0"}}
	x16 := &facts.PCIeLink{CurrentSpeed: "32.0 GT/s PCIe", MaxSpeed: "32.0 GT/s PCIe", CurrentSpeedGTs: 32, MaxSpeedGTs: 32, CurrentWidth: 16, MaxWidth: 16}
	x4 := *x16
	x4.CurrentWidth = 4
	obs.Health.GPUs = []facts.GPUHealth{{PCIAddress: "0000:18:00.0", Link: x16}, {PCIAddress: "0000:2a:00.0", Link: &x4}}
	c := &cudacheck.Report{Devices: []cudacheck.Device{
		{Ordinal: 0, UUID: "GPU-AA", Bandwidth: &cudacheck.Bandwidth{HostToDevice: 55, DeviceToHost: 54, Pinned: true}},
		{Ordinal: 1, UUID: "GPU-bb", Bandwidth: &cudacheck.Bandwidth{HostToDevice: 13.5, DeviceToHost: 40, Pinned: true}},
		{Ordinal: 2, UUID: "GPU-cc", Bandwidth: &cudacheck.Bandwidth{HostToDevice: 1, DeviceToHost: 1, Pinned: true}},
	}}
	links := judgeLinks(obs, c)
	if len(links) != 2 || links[0].PCIAddress != "0000:18:00.0" || links[1].PCIAddress != "0000:2a:00.0" {
		t.Fatalf("links %+v", links)
	}
	if links[0].Verdicts[0].Slow || !links[1].Verdicts[0].Slow || links[1].Verdicts[1].Slow {
		t.Errorf("verdicts %+v", links)
	}
	var b bytes.Buffer
	p := printer{w: &b}
	writeLinks(&p, links)
	out := b.String()
	for _, want := range []string{
		"  GPU 0 (0000:18:00.0): host to device 55.0 GB/s, device to host 54.0 GB/s of 63.0 GB/s each way\n",
		"    ! host to device is below half of what the link allows: 13.5 GB/s of the 63.0 GB/s a 32.0 GT/s PCIe x16 link allows; the link now runs at 32.0 GT/s PCIe x4\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "!") != 1 {
		t.Errorf("one finding expected:\n%s", out)
	}
}

// verify judges each pair's copy against the links observed for its two
// GPUs, shows a slow pair as a finding, and names the pairs without peer
// access without failing them.
func TestJudgePeers(t *testing.T) {
	obs := &facts.Observation{}
	obs.NVML.Devices = []facts.GPUDevice{{UUID: "GPU-aa", PCIBusID: "0000:18:00.0"}, {UUID: "GPU-bb", PCIBusID: "0000:2a:00.0"}, {UUID: "GPU-cc", PCIBusID: "0000:3a:00.0"}}
	links := func() []facts.NVLinkHealth {
		out := make([]facts.NVLinkHealth, 18)
		for i := range out {
			out[i] = facts.NVLinkHealth{Link: i, State: "active", Version: "4.0", Remote: "0000:05:00.0", RemoteType: "switch"}
		}
		return out
	}
	for _, a := range []string{"0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0"} {
		obs.Health.GPUs = append(obs.Health.GPUs, facts.GPUHealth{PCIAddress: a, NVML: &facts.NVMLHealth{NVLinks: links()}})
	}
	c := &cudacheck.Report{Peers: []cudacheck.PeerCopy{
		{From: 0, To: 1, FromUUID: "GPU-AA", ToUUID: "GPU-bb", Access: true, GBs: 390},
		{From: 1, To: 0, FromUUID: "GPU-bb", ToUUID: "GPU-aa", Access: true, GBs: 41.5},
		{From: 0, To: 2, FromUUID: "GPU-aa", ToUUID: "GPU-cc"},
		{From: 2, To: 0, FromUUID: "GPU-cc", ToUUID: "GPU-aa"},
	}}
	peers := judgePeers(obs, c)
	if len(peers) != 4 || peers[0].Slow || peers[0].Expected != 450 || !peers[1].Slow || peers[2].Slow || peers[2].Expected != 0 {
		t.Fatalf("peers %+v", peers)
	}
	var b bytes.Buffer
	p := printer{w: &b}
	writePeers(&p, peers)
	want := `
Peer-to-peer copies between GPUs:
  GPU 0 → GPU 1: 390.0 GB/s of 450.0 GB/s (NVLink 4.0 × 18 links through NVSwitch)
  GPU 1 → GPU 0: 41.5 GB/s
    ! below half of what the link allows: 41.5 GB/s of the 450.0 GB/s that NVLink 4.0 × 18 links through NVSwitch allow
  no peer access (copies go through host memory; not a failure): GPU 0 → GPU 2, GPU 2 → GPU 0
`
	if b.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", b.String(), want)
	}
}
