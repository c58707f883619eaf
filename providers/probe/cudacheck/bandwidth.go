package cudacheck

import (
	"fmt"
	"time"

	"github.com/gpuenv/gpuenv/planner/facts"
)

// Bandwidth is what copies between the host and one GPU carried.
type Bandwidth struct {
	// HostToDevice and DeviceToHost are in GB/s (10^9 bytes a second),
	// the best of the timed copies each way.
	HostToDevice float64 `json:"host_to_device_gbs"`
	DeviceToHost float64 `json:"device_to_host_gbs"`
	// Bytes is each copy's size; Pinned tells whether the host memory
	// was page-locked (pageable memory is slower: the driver stages it).
	Bytes  int  `json:"bytes"`
	Pinned bool `json:"pinned"`
	// Error says why the measurement stopped, when it did.
	Error string `json:"error,omitempty"`
}

// bandwidthBytes is each copy: large enough that a copy's fixed cost is
// under a percent of it on a PCIe 5.0 x16 link (64 MiB take about 1.3 ms
// there, against some 10 µs of setup), small enough to fit beside any
// program on the smallest GPU gpuenv verifies.
const (
	bandwidthBytes  = 64 << 20
	bandwidthCopies = 5
)

// measureBandwidth times copies of bandwidthBytes each way, after one
// copy each way that is not timed (the first pays for mapping the
// memory), and keeps the fastest.
func measureBandwidth(d *driver) *Bandwidth {
	b := &Bandwidth{Bytes: bandwidthBytes}
	dev, r := d.alloc(bandwidthBytes)
	if r != 0 {
		b.Error = d.fail(StepAlloc, r).String()
		return b
	}
	defer d.free(dev)
	host, pinned, r := d.hostBuffer(bandwidthBytes)
	if r != 0 {
		b.Error = d.fail(StepAlloc, r).String()
		return b
	}
	defer d.freeHost(host, pinned)
	b.Pinned = pinned
	var err error
	if b.HostToDevice, err = bestGBs(func() int { return int(d.copyInRaw(dev, host, bandwidthBytes)) }); err != nil {
		b.Error = "host to device: " + err.Error()
		return b
	}
	if b.DeviceToHost, err = bestGBs(func() int { return int(d.copyOutRaw(host, dev, bandwidthBytes)) }); err != nil {
		b.Error = "device to host: " + err.Error()
	}
	return b
}

// bestGBs runs copy (of bandwidthBytes) once untimed, then
// bandwidthCopies times, and returns the fastest in GB/s.
func bestGBs(copy func() int) (float64, error) {
	if r := copy(); r != 0 {
		return 0, fmt.Errorf("CUDA error %d", r)
	}
	var fastest time.Duration
	for range bandwidthCopies {
		start := time.Now()
		if r := copy(); r != 0 {
			return 0, fmt.Errorf("CUDA error %d", r)
		}
		if took := time.Since(start); fastest == 0 || took < fastest {
			fastest = took
		}
	}
	return GBs(bandwidthBytes, fastest), nil
}

// GBs is n bytes in t as GB/s.
func GBs(n int, t time.Duration) float64 {
	if t <= 0 {
		return 0
	}
	return float64(n) / t.Seconds() / 1e9
}

// laneGBs is what one lane of each PCIe generation carries a second
// each way, in GB/s, after the line code: 8b/10b for Gen 1 and 2 (2.5
// and 5 GT/s), 128b/130b for Gen 3 to 5 (8, 16, 32 GT/s), and for Gen 6
// (64 GT/s, PAM4) its FLIT of 256 bytes of which 242 carry data (PCI-SIG's
// base specifications; the FLIT figure is the PCIe 6.0 specification's
// FLIT layout: 236 bytes of data, 6 of DLP, 8 of CRC, 6 of FEC).
var laneGBs = map[float64]float64{
	2.5: 2.5 * 8.0 / 10 / 8,
	5:   5 * 8.0 / 10 / 8,
	8:   8 * 128.0 / 130 / 8,
	16:  16 * 128.0 / 130 / 8,
	32:  32 * 128.0 / 130 / 8,
	64:  64 * 242.0 / 256 / 8,
}

// LinkGBs is what a PCIe link of speed GT/s and width lanes can carry
// each way, in GB/s; 0 when the speed is none PCIe has.
func LinkGBs(gts float64, width int) float64 {
	return laneGBs[gts] * float64(width)
}

// LinkVerdict is one direction's copy bandwidth judged against the link.
type LinkVerdict struct {
	Direction string  `json:"direction"` // "host_to_device", "device_to_host"
	Measured  float64 `json:"measured_gbs"`
	// Expected is what the GPU's link allows at its best generation and
	// width (max_link_speed × max_link_width).
	Expected float64 `json:"expected_gbs"`
	// Slow is set when Measured is below half of Expected: a link that
	// trained narrower or slower, a slot the platform limits, or a copy
	// path that goes through another socket.
	Slow bool `json:"slow"`
	// Why says, for a slow link, what the link's files show.
	Why string `json:"why,omitempty"`
}

// JudgeLink judges b against link, the GPU's PCIe link from sysfs. It
// returns nothing when either is unknown.
func JudgeLink(b *Bandwidth, link *facts.PCIeLink) []LinkVerdict {
	if b == nil || link == nil || b.Error != "" {
		return nil
	}
	want := LinkGBs(link.MaxSpeedGTs, link.MaxWidth)
	if want == 0 {
		return nil
	}
	var out []LinkVerdict
	for _, m := range []struct {
		dir string
		gbs float64
	}{{"host_to_device", b.HostToDevice}, {"device_to_host", b.DeviceToHost}} {
		v := LinkVerdict{Direction: m.dir, Measured: m.gbs, Expected: want, Slow: m.gbs < want/2}
		if v.Slow {
			v.Why = fmt.Sprintf("%.1f GB/s of the %.1f GB/s a %s x%d link allows; the link now runs at %s x%d",
				m.gbs, want, link.MaxSpeed, link.MaxWidth, link.CurrentSpeed, link.CurrentWidth)
			if !b.Pinned {
				v.Why += " (copied from pageable memory: the driver offered no page-locked memory)"
			}
		}
		out = append(out, v)
	}
	return out
}
