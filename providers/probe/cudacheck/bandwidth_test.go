package cudacheck

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gpuenv/gpuenv/planner/facts"
)

func TestLinkGBs(t *testing.T) {
	for _, c := range []struct {
		gts   float64
		width int
		want  float64
	}{
		{2.5, 16, 4},     // Gen 1 x16: 250 MB/s a lane
		{8, 16, 15.754},  // Gen 3 x16
		{16, 16, 31.508}, // Gen 4 x16
		{32, 16, 63.015}, // Gen 5 x16
		{32, 8, 31.508},  // Gen 5 x8
		{64, 16, 121},    // Gen 6 x16, FLIT mode
		{20, 16, 0},      // no PCIe generation runs at 20 GT/s
		{16, 0, 0},
	} {
		if got := LinkGBs(c.gts, c.width); math.Abs(got-c.want) > 0.001 {
			t.Errorf("LinkGBs(%g, %d) = %.3f, want %.3f", c.gts, c.width, got, c.want)
		}
	}
}

func gen5x16(curGTs float64, curWidth int) *facts.PCIeLink {
	return &facts.PCIeLink{CurrentSpeed: "32.0 GT/s PCIe", MaxSpeed: "32.0 GT/s PCIe", CurrentSpeedGTs: curGTs, MaxSpeedGTs: 32, CurrentWidth: curWidth, MaxWidth: 16}
}

// Measured against the link's generation × width, a copy below half of
// it is slow; the figures are those an H100 SXM reaches on PCIe 5.0
// x16 (about 55 GB/s each way from page-locked memory) and what is left
// at x4.
func TestJudgeLink(t *testing.T) {
	good := JudgeLink(&Bandwidth{HostToDevice: 55.1, DeviceToHost: 54.6, Pinned: true}, gen5x16(32, 16))
	if len(good) != 2 || good[0].Slow || good[1].Slow || math.Abs(good[0].Expected-63.015) > 0.001 {
		t.Errorf("a full link: %+v", good)
	}
	// Just above and just below half of 63.0 GB/s.
	edge := JudgeLink(&Bandwidth{HostToDevice: 31.6, DeviceToHost: 31.4, Pinned: true}, gen5x16(32, 16))
	if edge[0].Slow || !edge[1].Slow {
		t.Errorf("at half: %+v", edge)
	}
	slow := JudgeLink(&Bandwidth{HostToDevice: 13.2, DeviceToHost: 12.9, Pinned: false}, gen5x16(32, 4))
	if !slow[0].Slow || !slow[1].Slow || !strings.Contains(slow[0].Why, "13.2 GB/s of the 63.0 GB/s a 32.0 GT/s PCIe x16 link allows; the link now runs at 32.0 GT/s PCIe x4") || !strings.Contains(slow[0].Why, "pageable") {
		t.Errorf("a x4 link: %+v", slow)
	}
	for name, v := range map[string][]LinkVerdict{
		"no link":        JudgeLink(&Bandwidth{HostToDevice: 1}, nil),
		"no measurement": JudgeLink(nil, gen5x16(32, 16)),
		"failed copies":  JudgeLink(&Bandwidth{Error: "host to device: CUDA error 700"}, gen5x16(32, 16)),
		"unknown speed":  JudgeLink(&Bandwidth{HostToDevice: 1}, &facts.PCIeLink{MaxSpeed: "Unknown", MaxWidth: 16}),
	} {
		if v != nil {
			t.Errorf("%s: judged %+v", name, v)
		}
	}
}

func TestGBs(t *testing.T) {
	if got := GBs(64<<20, time.Millisecond); math.Abs(got-67.108864) > 1e-9 {
		t.Errorf("GBs = %g", got)
	}
	if GBs(1, 0) != 0 {
		t.Error("no time: not 0")
	}
}
