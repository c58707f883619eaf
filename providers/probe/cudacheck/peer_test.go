package cudacheck

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gpuenv/gpuenv/planner/facts"
)

// TestRunPeers: the check copies between every ordered pair of devices
// that can access each other, reports the others as such, and a copy
// into a slow device is a finding once judged against its link.
func TestRunPeers(t *testing.T) {
	lib := fakeDriver(t)
	got := Run(context.Background(), starter(lib, "FAKE_CUDA_DEVICES=3", "FAKE_CUDA_NO_PEER=0-2", "FAKE_CUDA=slow-peer:1"), 60*time.Second)
	if !got.OK() || got.PeersSkipped != "" {
		t.Fatalf("report %+v", got)
	}
	type pair struct{ from, to int }
	var order []pair
	copies := map[pair]PeerCopy{}
	for _, p := range got.Peers {
		order = append(order, pair{p.From, p.To})
		copies[pair{p.From, p.To}] = p
	}
	want := []pair{{0, 1}, {0, 2}, {1, 0}, {1, 2}, {2, 0}, {2, 1}}
	if len(order) != len(want) {
		t.Fatalf("pairs %v, want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("pairs %v, want %v", order, want)
		}
	}
	for _, p := range []pair{{0, 2}, {2, 0}} {
		if c := copies[p]; c.Access || c.GBs != 0 || !c.OK() {
			t.Errorf("pair %v without access: %+v", p, c)
		}
	}
	// A PCIe 2.0 x4 link allows 2 GB/s each way: memcpy of 64 MiB in
	// host memory beats half of it, a copy that takes 250 ms (0.27 GB/s)
	// does not.
	gpu := func(addr string) *facts.GPUHealth {
		return &facts.GPUHealth{PCIAddress: addr, Link: &facts.PCIeLink{MaxSpeed: "5.0 GT/s PCIe", MaxSpeedGTs: 5, MaxWidth: 4, CurrentSpeed: "5.0 GT/s PCIe", CurrentSpeedGTs: 5, CurrentWidth: 4}}
	}
	for p, c := range copies {
		if !c.Access {
			continue
		}
		v := JudgePeer(c, gpu("a"), gpu("b"))
		if v.Expected != 2 || v.Basis != "PCIe 5.0 GT/s x4" || v.Slow != (p.to == 1) {
			t.Errorf("pair %v: verdict %+v", p, v)
		}
		if v.Slow && !strings.HasPrefix(v.Why, "0.") {
			t.Errorf("pair %v: why %q", p, v.Why)
		}
	}
}

// TestRunPeerCrash: a driver that dies in a copy between two devices
// that passed fails the check on that pair, not on the devices.
func TestRunPeerCrash(t *testing.T) {
	lib := fakeDriver(t)
	got := Run(context.Background(), starter(lib, "FAKE_CUDA=segv-peer:0"), 30*time.Second)
	if got.OK() || len(got.Devices) != 2 || !got.Devices[0].OK() || !got.Devices[1].OK() || got.Crashed != "" {
		t.Fatalf("report %+v", got)
	}
	if len(got.Peers) != 2 || got.Peers[0].OK() != true || got.Peers[1].From != 1 || got.Peers[1].To != 0 ||
		got.Peers[1].Crashed != "was killed by signal 11 (segmentation fault)" {
		t.Errorf("peers %+v", got.Peers)
	}
}

func nvlinks(n int, version, remote, kind string) []facts.NVLinkHealth {
	out := make([]facts.NVLinkHealth, n)
	for i := range out {
		out[i] = facts.NVLinkHealth{Link: i, State: "active", Version: version, Remote: remote, RemoteType: kind}
	}
	return out
}

func TestJudgePeer(t *testing.T) {
	pcie := func(gts float64, width int) *facts.PCIeLink {
		s := map[float64]string{8: "8.0 GT/s PCIe", 16: "16.0 GT/s PCIe", 32: "32.0 GT/s PCIe"}[gts]
		return &facts.PCIeLink{MaxSpeed: s, MaxSpeedGTs: gts, MaxWidth: width, CurrentSpeed: s, CurrentSpeedGTs: gts, CurrentWidth: width}
	}
	h100 := func(addr string, links []facts.NVLinkHealth) *facts.GPUHealth {
		return &facts.GPUHealth{PCIAddress: addr, Link: pcie(32, 16), NVML: &facts.NVMLHealth{NVLinks: links}}
	}
	switched := nvlinks(18, "4.0", "0000:05:00.0", "switch")
	fewer := nvlinks(18, "4.0", "0000:05:00.0", "switch")
	for i := range 6 {
		fewer[i].State = "inactive"
	}
	bridge := func(to string) []facts.NVLinkHealth { return nvlinks(4, "3.0", to, "gpu") }
	unnamed := nvlinks(12, "3.0", "", "")
	tests := []struct {
		name     string
		copy     PeerCopy
		a, b     *facts.GPUHealth
		expected float64
		basis    string
		slow     bool
	}{
		{"HGX H100 through NVSwitch, fast", PeerCopy{Access: true, GBs: 380}, h100("a", switched), h100("b", switched), 450, "NVLink 4.0 × 18 links through NVSwitch", false},
		{"HGX H100 through NVSwitch, slow", PeerCopy{Access: true, GBs: 54}, h100("a", switched), h100("b", switched), 450, "NVLink 4.0 × 18 links through NVSwitch", true},
		{"the GPU with fewer switch links sets the pace", PeerCopy{Access: true, GBs: 200}, h100("a", switched), h100("b", fewer), 300, "NVLink 4.0 × 12 links through NVSwitch", false},
		{"a bridge between two GPUs", PeerCopy{Access: true, GBs: 90}, h100("a", bridge("b")), h100("b", bridge("a")), 100, "NVLink 3.0 × 4 links between them", false},
		{"a bridge to another GPU is not this pair's", PeerCopy{Access: true, GBs: 20}, h100("a", bridge("c")), h100("b", bridge("c")), 63.015384615384615, "PCIe 32.0 GT/s x16", true},
		{"links NVML does not name fall back to PCIe", PeerCopy{Access: true, GBs: 40}, h100("a", unnamed), h100("b", unnamed), 63.015384615384615, "PCIe 32.0 GT/s x16", false},
		{"the narrower PCIe link", PeerCopy{Access: true, GBs: 7}, &facts.GPUHealth{Link: pcie(16, 16)}, &facts.GPUHealth{Link: pcie(8, 16)}, 15.753846153846155, "PCIe 8.0 GT/s x16", true},
		{"no access: not judged", PeerCopy{Access: false}, h100("a", switched), h100("b", switched), 0, "", false},
		{"failed copy: not judged", PeerCopy{Access: true, Error: "CUDA error 700"}, h100("a", switched), h100("b", switched), 0, "", false},
		{"no facts of one GPU", PeerCopy{Access: true, GBs: 1}, h100("a", switched), nil, 0, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := JudgePeer(tt.copy, tt.a, tt.b)
			if math.Abs(v.Expected-tt.expected) > 1e-9 || v.Basis != tt.basis || v.Slow != tt.slow || v.Slow != (v.Why != "") {
				t.Errorf("verdict %+v, want expected %v basis %q slow %v", v, tt.expected, tt.basis, tt.slow)
			}
		})
	}
}
