package verify

import (
	"strings"
	"time"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/probe/cudacheck"
)

// Record is the verify record to keep after the framework-free check c,
// run on the host obs observed just before it: for each GPU it reached,
// whether every step passed, and the Xids the kernel log held for it
// then. A later doctor counts a GPU's Xids as cleared when a record of
// the same boot shows a pass with at least as many of them: they were
// logged before the check that passed. GPUs of prev (an earlier record of
// the same boot) that this check did not reach are kept.
func Record(obs *facts.Observation, c *cudacheck.Report, prev *facts.VerifyRecord, now time.Time) *facts.VerifyRecord {
	rec := &facts.VerifyRecord{Time: now.UTC().Format(time.RFC3339), BootID: obs.Health.BootID, GPUs: []facts.VerifiedGPU{}}
	addr := map[string]string{}
	for _, d := range obs.NVML.Devices {
		addr[strings.ToLower(d.UUID)] = d.PCIBusID
	}
	xids := map[string]map[string]int{}
	if obs.Kernel.Log != nil {
		for _, e := range obs.Kernel.Log.Events {
			if e.Kind != facts.EventXid {
				continue
			}
			if xids[e.PCIAddress] == nil {
				xids[e.PCIAddress] = map[string]int{}
			}
			xids[e.PCIAddress][e.Code] += e.Count
		}
	}
	seen := map[string]bool{}
	for _, d := range c.Devices {
		if d.UUID == "" {
			// A device that did not say who it is cannot be matched
			// to a GPU later.
			continue
		}
		u := strings.ToLower(d.UUID)
		seen[u] = true
		a := addr[u]
		rec.GPUs = append(rec.GPUs, facts.VerifiedGPU{UUID: d.UUID, PCIAddress: a, Passed: d.OK(), Xids: xids[a]})
	}
	if prev != nil && prev.BootID == rec.BootID {
		for _, g := range prev.GPUs {
			if !seen[strings.ToLower(g.UUID)] {
				rec.GPUs = append(rec.GPUs, g)
			}
		}
	}
	return rec
}
