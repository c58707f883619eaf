package doctor

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
)

// GPUState is one GPU's health in a line: the states that matter, and
// what the health checks find wrong with it, in their words.
type GPUState struct {
	// Name is how the checks name the GPU: "GPU 3 (0000:5d:00.0)".
	Name       string `json:"name"`
	PCIAddress string `json:"pci_address"`
	Model      string `json:"model,omitempty"`
	Status     Status `json:"status"`
	// States are short facts: "ECC on", "no rows remapped", "34 °C
	// (slowdown 87 °C)", "PCIe 32.0 GT/s x16", "no reset needed", "no
	// Xid"; a state the GPU does not report is left out.
	States []string `json:"states"`
	// Findings are the health checks' warnings and problems about this
	// GPU, without its name.
	Findings []StateFinding `json:"findings,omitempty"`
}

// StateFinding is one finding of a health check on a GPU.
type StateFinding struct {
	Check  string `json:"check"`
	Status Status `json:"status"`
	Text   string `json:"text"`
}

// GPUStates are the GPUs' health lines, in the order of their addresses,
// the GPUs missing from the bus included: what observe shows. The
// findings are the health checks' own, so that observe and doctor say the
// same thing of a GPU.
func GPUStates(obs *facts.Observation) []GPUState {
	fs, readmitted := healthFindings(obs)
	xids := xidEvents(obs)
	var out []GPUState
	idx := map[string]int{}
	for _, g := range healthGPUs(obs) {
		idx[g.PCIAddress] = len(out)
		out = append(out, GPUState{Name: gpuName(g), PCIAddress: g.PCIAddress, Model: g.Name, Status: OK, States: gpuStates(g, obs.Kernel.Log != nil, xids[g.PCIAddress], readmitted[g.PCIAddress])})
	}
	for _, a := range obs.Health.Missing {
		i, ok := idx[a]
		if !ok {
			i = len(out)
			idx[a] = i
			out = append(out, GPUState{Name: "GPU " + a, PCIAddress: a, Status: OK})
		}
		out[i].States = append([]string{"missing from the PCI bus"}, out[i].States...)
	}
	for _, f := range fs {
		i, ok := idx[f.gpu]
		if !ok && f.check == CheckGPUBus && f.status != OK {
			// A GPU the health observer does not list, which NVML lost:
			// its line is this finding.
			i, ok = len(out), true
			idx[f.gpu] = i
			out = append(out, GPUState{Name: "GPU " + f.gpu, PCIAddress: f.gpu, Status: OK, States: []string{"not listed by NVML"}})
		}
		if !ok || f.status == OK {
			continue
		}
		s := &out[i]
		if rank(f.status) > rank(s.Status) {
			s.Status = f.status
		}
		s.Findings = append(s.Findings, StateFinding{Check: f.check, Status: f.status, Text: strings.TrimPrefix(f.text, s.Name+": ")})
	}
	slices.SortStableFunc(out, func(a, b GPUState) int { return strings.Compare(a.PCIAddress, b.PCIAddress) })
	return out
}

// gpuStates are g's states, each as short as the health checks' own
// words allow.
func gpuStates(g facts.GPUHealth, kernelLog bool, xids []facts.KernelEvent, readmitted []string) []string {
	var out []string
	if n := g.NVML; n != nil {
		if n.Lost {
			out = append(out, "lost (NVML)")
		}
		switch {
		case n.ECCMode == "enabled" && n.ECCVolatile != nil && n.ECCVolatile.Uncorrected > 0:
			out = append(out, fmt.Sprintf("ECC on, %d uncorrectable errors", n.ECCVolatile.Uncorrected))
		case n.ECCMode != "":
			out = append(out, "ECC "+map[string]string{"enabled": "on", "disabled": "off"}[n.ECCMode])
		}
		switch r := n.RowRemap; {
		case r != nil && r.Failure:
			out = append(out, "row remapping failed")
		case r != nil:
			s := counted(r.Corrected+r.Uncorrected, "row") + " remapped"
			if r.Pending {
				s += ", one pending"
			}
			out = append(out, s)
		case n.RetiredPages != nil:
			p := n.RetiredPages
			s := counted(p.SingleBit+p.DoubleBit, "page") + " retired"
			if p.Pending {
				s += ", one pending"
			}
			out = append(out, s)
		}
		reasons := slices.DeleteFunc(slices.Clone(n.ThrottleReasons), func(r string) bool { return r == "gpu_idle" || r == "applications_clocks_setting" })
		switch {
		case len(reasons) > 0:
			out = append(out, "clocks slowed: "+strings.Join(reasons, ", "))
		case slices.Contains(n.ThrottleReasons, "gpu_idle"):
			out = append(out, "idle")
		default:
			out = append(out, "clocks not slowed")
		}
		if n.Temperature > 0 {
			s := fmt.Sprintf("%d °C", n.Temperature)
			if n.SlowdownTemp > 0 {
				s += fmt.Sprintf(" (slowdown %d °C)", n.SlowdownTemp)
			}
			out = append(out, s)
		}
	}
	if l := g.Link; l != nil && l.CurrentSpeed != "" {
		s := fmt.Sprintf("PCIe %s x%d", strings.TrimSuffix(l.CurrentSpeed, " PCIe"), l.CurrentWidth)
		if l.CurrentWidth < l.MaxWidth || l.CurrentSpeedGTs < l.MaxSpeedGTs {
			s += fmt.Sprintf(" of %s x%d", strings.TrimSuffix(l.MaxSpeed, " PCIe"), l.MaxWidth)
		}
		out = append(out, s)
	}
	if n := g.NVML; n != nil {
		if len(n.NVLinks) > 0 {
			up := 0
			for _, l := range n.NVLinks {
				if l.State == "active" {
					up++
				}
			}
			out = append(out, fmt.Sprintf("NVLink %d of %d up", up, len(n.NVLinks)))
		}
		switch {
		case n.RecoveryAction != "" && n.RecoveryAction != "none":
			out = append(out, "driver asks: "+strings.ReplaceAll(n.RecoveryAction, "_", " "))
		case n.ResetRequired:
			out = append(out, "needs a reset")
		default:
			out = append(out, "no reset needed")
		}
	}
	var codes []string
	for _, e := range xids {
		s := "Xid " + e.Code
		if e.Count > 1 {
			s += fmt.Sprintf(" ×%d", e.Count)
		}
		if slices.Contains(readmitted, "Xid "+e.Code) {
			s += " (re-admitted by verify)"
		}
		codes = append(codes, s)
	}
	switch {
	case len(codes) == 0 && !kernelLog:
		out = append(out, "Xid unknown (no kernel log)")
	case len(codes) == 0:
		out = append(out, "no Xid")
	default:
		out = append(out, strings.Join(codes, ", "))
	}
	return out
}

// counted is n things in words: "no rows", "1 row", "3 rows".
func counted(n int, thing string) string {
	if n == 0 {
		return "no " + thing + "s"
	}
	return plural(n, thing)
}
