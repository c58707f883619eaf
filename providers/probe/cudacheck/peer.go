package cudacheck

import (
	"fmt"
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
)

// StepPeer is a peer-to-peer copy between two devices, after every
// device's own steps.
const StepPeer Step = "peer"

// cudaErrorPeerAccessAlreadyEnabled is CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED:
// the pair's access was enabled before, which is no fault.
const cudaErrorPeerAccessAlreadyEnabled = 704

// PeerCopy is a copy from one GPU's memory straight into another's.
type PeerCopy struct {
	// From and To are CUDA ordinals, FromUUID and ToUUID the devices'.
	From     int    `json:"from"`
	To       int    `json:"to"`
	FromUUID string `json:"from_uuid,omitempty"`
	ToUUID   string `json:"to_uuid,omitempty"`
	// Access is whether From can address To's memory
	// (cuDeviceCanAccessPeer): an NVLink, or a PCIe path that allows it.
	// A pair without access is not copied, and is not a failure: the
	// platform routes such copies through host memory.
	Access bool `json:"peer_access"`
	// GBs is the fastest timed copy, in GB/s; Bytes each copy's size.
	GBs   float64 `json:"gbs,omitempty"`
	Bytes int     `json:"bytes,omitempty"`
	// Error says why the copy failed; Crashed how the check's process
	// died in it, TimedOut that it was killed there.
	Error    string `json:"error,omitempty"`
	Crashed  string `json:"crashed,omitempty"`
	TimedOut bool   `json:"timed_out,omitempty"`
}

// OK reports whether the pair did not fail: copied, or without access.
func (p PeerCopy) OK() bool { return p.Error == "" && p.Crashed == "" && !p.TimedOut }

// measurePeers copies between every ordered pair of the devices (CUDA
// ordinals) that can access each other, each pair after begin(from, to),
// and hands each result to emit. It returns why no pair was measured,
// when none could be.
func measurePeers(d *driver, ordinals []int, begin func(from, to int), emit func(PeerCopy)) string {
	if len(ordinals) < 2 {
		return ""
	}
	if !d.hasPeer() {
		return "the driver library has no peer-to-peer entry points (cuMemcpyPeer, CUDA 4.0)"
	}
	type gpu struct {
		ordinal int
		uuid    string
		dev     cuDevice
		ctx     cuContext
		buf     devPtr
	}
	var gpus []*gpu
	defer func() {
		for _, g := range gpus {
			d.setCurrent(g.ctx)
			if g.buf != 0 {
				d.free(g.buf)
			}
			d.destroyContext(g.ctx)
		}
	}()
	for _, i := range ordinals {
		dev, r := d.device(i)
		if r != 0 {
			return fmt.Sprintf("device %d: %s", i, d.fail(StepPeer, r))
		}
		ctx, r := d.createContext(dev)
		if r != 0 {
			return fmt.Sprintf("device %d: %s", i, d.fail(StepPeer, r))
		}
		g := &gpu{ordinal: i, uuid: d.uuid(dev), dev: dev, ctx: ctx}
		gpus = append(gpus, g)
		// cuCtxCreate made ctx current: the memory is the device's.
		if g.buf, r = d.alloc(bandwidthBytes); r != 0 {
			return fmt.Sprintf("device %d: %s", i, d.fail(StepAlloc, r))
		}
	}
	for _, a := range gpus {
		for _, b := range gpus {
			if a == b {
				continue
			}
			begin(a.ordinal, b.ordinal)
			p := PeerCopy{From: a.ordinal, To: b.ordinal, FromUUID: a.uuid, ToUUID: b.uuid}
			can, r := d.canAccessPeer(a.dev, b.dev)
			switch {
			case r != 0:
				p.Error = d.fail(StepPeer, r).String()
			case can:
				p.Access = true
				p.Bytes = bandwidthBytes
				copyPeer(d, &p, a.ctx, b.ctx, a.buf, b.buf)
			}
			emit(p)
		}
	}
	return ""
}

// copyPeer enables from's access to to's memory and times the copies.
// The copy is made with from's context current and waited for there: it
// is serialised with that context's work.
func copyPeer(d *driver, p *PeerCopy, from, to cuContext, src, dst devPtr) {
	if r := d.setCurrent(from); r != 0 {
		p.Error = d.fail(StepPeer, r).String()
		return
	}
	if r := d.enablePeerAccess(to); r != 0 && r != cudaErrorPeerAccessAlreadyEnabled {
		p.Error = "enabling peer access: " + d.fail(StepPeer, r).String()
		return
	}
	gbs, err := bestGBs(func() int {
		if r := d.copyPeer(dst, to, src, from, bandwidthBytes); r != 0 {
			return int(r)
		}
		return int(d.synchronize())
	})
	if err != nil {
		p.Error = err.Error()
		return
	}
	p.GBs = gbs
}

// nvlinkLinkGBs is what one NVLink carries each way, in GB/s, by version
// (facts.NVLinkHealth.Version). NVIDIA gives each generation's total per
// GPU, both ways, and its link count: NVLink 1.0 (P100) 160 GB/s over 4
// links (NVIDIA Tesla P100 whitepaper, "NVLink High Speed Interconnect");
// NVLink 2.0 (V100) 300 GB/s over 6, 3.0 (A100) 600 GB/s over 12, 4.0
// (H100) 900 GB/s over 18, 5.0 (Blackwell) 1.8 TB/s over 18
// (https://www.nvidia.com/en-us/data-center/nvlink/). Halved for one
// direction: 20, 25, 25, 25 and 50 GB/s a link. 2.2 and 3.1 are revisions
// NVML numbers apart and are taken at their generation's rate. GA102's
// NVLink 3.0 runs narrower links (14.0625 GB/s each way, NVIDIA Ampere
// GA102 GPU Architecture), so a figure here can only be above what such a
// link does; 6.0 has no published per-link figure yet and is left out.
var nvlinkLinkGBs = map[string]float64{
	"1.0": 20, "2.0": 25, "2.2": 25, "3.0": 25, "3.1": 25, "4.0": 25, "5.0": 50,
}

// PeerExpectation is what a copy from a to b can reach, in GB/s, and on
// what it is based: the NVLinks between them (a bridge), or through
// NVSwitches the fewer of the two GPUs' switch links, each at its
// version's rate; else the narrower of the two PCIe links at their best
// generation and width. 0 when neither is known. An NVLink whose remote
// end NVML does not name is not counted: the pair may not share it.
func PeerExpectation(a, b *facts.GPUHealth) (float64, string) {
	if a == nil || b == nil {
		return 0, ""
	}
	if gbs, basis := nvlinkExpectation(a, b); gbs > 0 {
		return gbs, basis
	}
	if a.Link == nil || b.Link == nil {
		return 0, ""
	}
	la, lb := LinkGBs(a.Link.MaxSpeedGTs, a.Link.MaxWidth), LinkGBs(b.Link.MaxSpeedGTs, b.Link.MaxWidth)
	if la == 0 || lb == 0 {
		return 0, ""
	}
	l := a.Link
	if lb < la {
		la, l = lb, b.Link
	}
	return la, fmt.Sprintf("PCIe %s x%d", strings.TrimSuffix(l.MaxSpeed, " PCIe"), l.MaxWidth)
}

func nvlinkExpectation(a, b *facts.GPUHealth) (float64, string) {
	if a.NVML == nil || b.NVML == nil {
		return 0, ""
	}
	count := func(g, other *facts.GPUHealth) (direct, switched int, version string) {
		for _, l := range g.NVML.NVLinks {
			if l.State != "active" || nvlinkLinkGBs[l.Version] == 0 {
				continue
			}
			switch {
			case l.RemoteType == "gpu" && l.Remote == other.PCIAddress:
				direct++
			case l.RemoteType == "switch":
				switched++
			default:
				continue
			}
			if version == "" || nvlinkLinkGBs[l.Version] < nvlinkLinkGBs[version] {
				version = l.Version
			}
		}
		return direct, switched, version
	}
	da, sa, va := count(a, b)
	_, sb, vb := count(b, a)
	if nvlinkLinkGBs[vb] > 0 && nvlinkLinkGBs[vb] < nvlinkLinkGBs[va] {
		va = vb
	}
	per := nvlinkLinkGBs[va]
	switch {
	case da > 0:
		return float64(da) * per, fmt.Sprintf("NVLink %s × %d links between them", va, da)
	case sa > 0 && sb > 0:
		n := min(sa, sb)
		return float64(n) * per, fmt.Sprintf("NVLink %s × %d links through NVSwitch", va, n)
	}
	return 0, ""
}

// PeerVerdict is one pair's copy judged against what its link allows.
type PeerVerdict struct {
	PeerCopy
	// Expected is what the pair's link allows (PeerExpectation), and
	// Basis that link in words; 0 and "" when the link is unknown.
	Expected float64 `json:"expected_gbs,omitempty"`
	Basis    string  `json:"basis,omitempty"`
	// Slow is set when the copy reached less than half of Expected.
	Slow bool   `json:"slow"`
	Why  string `json:"why,omitempty"`
}

// JudgePeer judges p against the links of its two GPUs, a (From) and b
// (To), as observed; either may be nil when observation has no facts of
// it. A pair without peer access or whose copy failed is not judged.
func JudgePeer(p PeerCopy, a, b *facts.GPUHealth) PeerVerdict {
	v := PeerVerdict{PeerCopy: p}
	if !p.Access || !p.OK() || p.GBs <= 0 {
		return v
	}
	v.Expected, v.Basis = PeerExpectation(a, b)
	if v.Expected > 0 && p.GBs < v.Expected/2 {
		v.Slow = true
		v.Why = fmt.Sprintf("%.1f GB/s of the %.1f GB/s that %s allow", p.GBs, v.Expected, v.Basis)
		if strings.HasPrefix(v.Basis, "PCIe") {
			v.Why = fmt.Sprintf("%.1f GB/s of the %.1f GB/s a %s link allows", p.GBs, v.Expected, v.Basis)
		}
	}
	return v
}
