package doctor

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
)

// The health checks of the GPU state group, in the order they are
// reported: what makes a GPU that is installed right fail under load.
const (
	CheckGPUBus         = "gpu.bus"
	CheckGPUXid         = "gpu.xid"
	CheckGPUReset       = "gpu.reset"
	CheckGPUECC         = "gpu.ecc"
	CheckGPUMemRepair   = "gpu.memory-repair"
	CheckGPUThermal     = "gpu.thermal"
	CheckGPUNVLink      = "gpu.nvlink"
	CheckGPUPCIeLink    = "gpu.pcie-link"
	CheckGPUPersistence = "gpu.persistence"
	// CheckGPUCounters stands, skipped, for the checks of NVML's
	// counters when NVML did not answer.
	CheckGPUCounters = "gpu.counters"
)

// HealthChecks are the IDs of the checks about the GPUs' hardware health,
// in order: their first problem is the one a scheduler drains for.
var HealthChecks = []string{CheckGPUBus, CheckGPUXid, CheckGPUReset, CheckGPUECC, CheckGPUMemRepair, CheckGPUThermal, CheckGPUNVLink, CheckGPUPCIeLink, CheckGPUPersistence}

// RetiredPagesRMA is the number of retired pages at which NVIDIA takes a
// GPU back: "a board is eligible for RMA when 60 or more pages are
// retired" (NVIDIA, "Dynamic Page Retirement",
// https://docs.nvidia.com/deploy/dynamic-page-retirement/index.html).
const RetiredPagesRMA = 60

// finding is what one check says of one GPU.
type finding struct {
	check    string
	gpu      string // the GPU's address, as it is named in GPUVerdicts
	status   Status
	text     string
	evidence []string
	fix      string
	spec     string
}

// GPUVerdict is one GPU's health as the health checks judge it.
type GPUVerdict struct {
	PCIAddress string `json:"pci_address"`
	UUID       string `json:"uuid,omitempty"`
	Index      *int   `json:"index,omitempty"`
	Name       string `json:"name,omitempty"`
	// Status is ok, warning or problem: the worst of its findings.
	Status Status `json:"status"`
	// Problems are the findings that make it unhealthy, in the checks'
	// order; the first is the one to name.
	Problems []string `json:"problems,omitempty"`
	// Readmitted lists Xids a verify passed on the GPU after: they no
	// longer count against it.
	Readmitted []string `json:"readmitted,omitempty"`
	// Missing is set for a GPU the driver lists and the bus lacks.
	Missing bool `json:"missing_from_bus,omitempty"`
}

// gpuName names a GPU in findings: "GPU 3 (0000:5d:00.0)" with NVML's
// index, else its address.
func gpuName(g facts.GPUHealth) string {
	if g.Index != nil {
		return fmt.Sprintf("GPU %d (%s)", *g.Index, g.PCIAddress)
	}
	return "GPU " + g.PCIAddress
}

// healthFindings judges every GPU of obs.
func healthFindings(obs *facts.Observation) ([]finding, map[string][]string) {
	var out []finding
	readmitted := map[string][]string{}
	h := &obs.Health
	onBus := map[string]bool{}
	for _, p := range obs.PCI {
		onBus[p.Address] = true
	}
	for _, a := range h.Missing {
		out = append(out, finding{check: CheckGPUBus, gpu: a, status: Problem,
			text:     fmt.Sprintf("GPU %s has fallen off the bus: the driver lists it, the PCI bus does not", a),
			evidence: []string{fmt.Sprintf("/proc/driver/nvidia/gpus/%s exists; /sys/bus/pci/devices/%s does not", a, a)},
			fix:      XidCheckMechanicals.Text()})
	}
	// A GPU bound to nvidia that NVML, answering, does not list has
	// usually fallen off the bus or failed to initialise; CUDA cannot use
	// it either.
	if obs.NVML.Status == "ok" {
		listed := map[string]bool{}
		for _, g := range obs.NVML.Devices {
			listed[g.PCIBusID] = true
		}
		for _, p := range obs.PCI {
			if p.Driver == "nvidia" && !listed[p.Address] && !slices.Contains(h.Missing, p.Address) {
				out = append(out, finding{check: CheckGPUBus, gpu: p.Address, status: Problem,
					text:     fmt.Sprintf("GPU %s is bound to nvidia but NVML does not list it: it may have fallen off the bus or failed to initialise", p.Address),
					evidence: []string{fmt.Sprintf("/sys/bus/pci/devices/%s/driver: nvidia; NVML lists %d GPUs, not this one", p.Address, len(obs.NVML.Devices))},
					fix:      XidCheckMechanicals.Text()})
			}
		}
	}
	xids := xidEvents(obs)
	for _, g := range healthGPUs(obs) {
		name := gpuName(g)
		add := func(check string, st Status, text, ev, fix string) {
			out = append(out, finding{check: check, gpu: g.PCIAddress, status: st, text: name + ": " + text, evidence: []string{ev}, fix: fix})
		}
		// Xids, unless a verify passed on this GPU after them.
		for _, e := range xids[g.PCIAddress] {
			x, _ := LookupXid(e.Code, e.Detail)
			ev := fmt.Sprintf("%s: %s", e.Source, e.Message)
			if e.Count > 1 {
				ev += fmt.Sprintf(" (%d times)", e.Count)
			}
			if verifiedAfter(h, g, e) {
				readmitted[g.PCIAddress] = append(readmitted[g.PCIAddress], "Xid "+e.Code)
				add(CheckGPUXid, OK, fmt.Sprintf("Xid %s (%s) before a verify that passed: healthy again", e.Code, x.Meaning), ev+"; verify passed at "+h.Verified.Time+" with the event already logged", "")
				continue
			}
			st := Warning
			if x.Action.severe() {
				st = Problem
			}
			fix := x.Action.Text()
			if x.Then != "" {
				fix += "; then " + x.Then
			}
			if st == Problem {
				fix += "; after the fix, gpuenv verify --cuda-only re-admits the GPU"
			}
			add(CheckGPUXid, st, fmt.Sprintf("Xid %s, %s", e.Code, x.Meaning), ev, fix)
		}
		if g.Link != nil {
			linkFindings(g, add)
		}
		n := g.NVML
		if n == nil {
			continue
		}
		nv := "NVML, " + name
		if n.Lost {
			add(CheckGPUBus, Problem, "NVML reports the GPU lost (ERROR_GPU_IS_LOST)", nv+": "+strings.Join(n.Errors, "; "), XidCheckMechanicals.Text())
		}
		switch {
		case n.RecoveryAction != "" && n.RecoveryAction != "none":
			add(CheckGPUReset, Problem, "the driver asks for recovery: "+strings.ReplaceAll(n.RecoveryAction, "_", " "), nv+": recovery action "+n.RecoveryAction, recoveryText(n.RecoveryAction))
		case n.ResetRequired:
			why := "a reset is pending"
			switch {
			case n.RowRemap != nil && n.RowRemap.Pending:
				why = "row remapping waits for a reset"
			case n.RetiredPages != nil && n.RetiredPages.Pending:
				why = "page retirement waits for a reset"
			case slices.ContainsFunc(n.Errors, func(s string) bool { return strings.HasSuffix(s, "ERROR_RESET_REQUIRED") }):
				why = "NVML answers ERROR_RESET_REQUIRED"
			}
			add(CheckGPUReset, Problem, "needs a reset: "+why, nv+": "+why, XidResetGPU.Text())
		}
		if v := n.ECCVolatile; v != nil && v.Uncorrected > 0 {
			add(CheckGPUECC, Problem, fmt.Sprintf("%d uncorrectable ECC errors since the driver loaded", v.Uncorrected),
				fmt.Sprintf("%s: volatile ECC errors: %d uncorrected, %d corrected", nv, v.Uncorrected, v.Corrected), XidResetGPU.Text()+"; RMA if they come back")
		} else if n.ECCMode == "disabled" && n.ECCPending != "enabled" {
			add(CheckGPUECC, Warning, "ECC is off: memory errors go undetected", nv+": ECC mode disabled", "Enable ECC (nvidia-smi -i <GPU> -e 1) and reset the GPU")
		}
		if r := n.RowRemap; r != nil {
			switch {
			case r.Failure:
				add(CheckGPUMemRepair, Problem, "row remapping failed: the memory cannot be repaired", fmt.Sprintf("%s: row remapping failure; %d uncorrectable, %d correctable rows remapped", nv, r.Uncorrected, r.Corrected), XidContactSupport.Text())
			case r.Histogram != nil && r.Histogram.None > 0:
				add(CheckGPUMemRepair, Warning, fmt.Sprintf("%d memory banks have no spare rows left: the next error there cannot be remapped", r.Histogram.None), fmt.Sprintf("%s: row remapper histogram max %d, high %d, partial %d, low %d, none %d", nv, r.Histogram.Max, r.Histogram.High, r.Histogram.Partial, r.Histogram.Low, r.Histogram.None), "Plan an RMA; watch for Xid 64")
			}
		}
		if p := n.RetiredPages; p != nil && p.SingleBit+p.DoubleBit >= RetiredPagesRMA {
			add(CheckGPUMemRepair, Problem, fmt.Sprintf("%d pages retired, at or past NVIDIA's RMA threshold of %d", p.SingleBit+p.DoubleBit, RetiredPagesRMA), fmt.Sprintf("%s: retired pages: %d single-bit, %d double-bit", nv, p.SingleBit, p.DoubleBit), XidContactSupport.Text())
		}
		thermalFindings(n, nv, add)
		nvlinkFindings(n, nv, add)
		if n.PersistenceMode == "disabled" {
			out = append(out, finding{check: CheckGPUPersistence, gpu: g.PCIAddress, status: Warning,
				text:     name + ": persistence mode is off: the driver tears the GPU down between programs, and each start pays for it",
				evidence: []string{nv + ": persistence mode disabled"},
				fix:      "Keep the driver up with nvidia-persistenced; with gpuenv:", spec: "driver {\n  persistence_mode = true\n}"})
		}
	}
	return out, readmitted
}

// linkFindings judges g's PCIe link against what it can do. A narrower
// link is a fault (a card not seated, a riser, a damaged lane); a slower
// one is normal for an idle GPU, which drops its link speed to save
// power, so it counts only when NVML says the GPU is not idle.
func linkFindings(g facts.GPUHealth, add func(string, Status, string, string, string)) {
	l := g.Link
	dir := "/sys/bus/pci/devices/" + g.PCIAddress
	if l.MaxWidth > 0 && l.CurrentWidth > 0 && l.CurrentWidth < l.MaxWidth {
		add(CheckGPUPCIeLink, Problem, fmt.Sprintf("PCIe link trained at x%d of x%d", l.CurrentWidth, l.MaxWidth),
			fmt.Sprintf("%s: current_link_width %d, max_link_width %d", dir, l.CurrentWidth, l.MaxWidth),
			"Drain the node, reseat the GPU and check its riser or cable; gpuenv verify measures what the link carries")
	}
	if l.CurrentWidth == 0 && l.MaxWidth > 0 && (l.CurrentSpeedGTs == 0 && l.CurrentSpeed != "") {
		add(CheckGPUPCIeLink, Problem, "PCIe link is down",
			fmt.Sprintf("%s: current_link_speed %q, current_link_width %d", dir, l.CurrentSpeed, l.CurrentWidth), XidCheckMechanicals.Text())
		return
	}
	if l.MaxSpeedGTs > 0 && l.CurrentSpeedGTs > 0 && l.CurrentSpeedGTs < l.MaxSpeedGTs {
		if g.NVML != nil && slices.Contains(g.NVML.ThrottleReasons, "gpu_idle") {
			return
		}
		ev := fmt.Sprintf("%s: current_link_speed %s, max_link_speed %s", dir, l.CurrentSpeed, l.MaxSpeed)
		text := fmt.Sprintf("PCIe link runs at %s of %s", l.CurrentSpeed, l.MaxSpeed)
		if g.NVML == nil {
			text += " (an idle GPU slows its link to save power; NVML did not say whether it is idle)"
		}
		add(CheckGPUPCIeLink, Warning, text, ev, "If it stays slow under load, the slot or the platform limits the link: check the BIOS's PCIe generation setting and the slot; gpuenv verify measures what the link carries")
	}
}

// thermalFindings judges temperatures and the active clock event reasons.
func thermalFindings(n *facts.NVMLHealth, nv string, add func(string, Status, string, string, string)) {
	temp := fmt.Sprintf("%s: %d °C (slowdown at %d °C, shutdown at %d °C)", nv, n.Temperature, n.SlowdownTemp, n.ShutdownTemp)
	switch {
	case n.ShutdownTemp > 0 && n.Temperature >= n.ShutdownTemp:
		add(CheckGPUThermal, Problem, fmt.Sprintf("at %d °C, at its shutdown temperature", n.Temperature), temp, "Drain the node and check its cooling (fans, airflow, coolant)")
		return
	case n.SlowdownTemp > 0 && n.Temperature >= n.SlowdownTemp:
		add(CheckGPUThermal, Warning, fmt.Sprintf("at %d °C, at its slowdown temperature: clocks are cut", n.Temperature), temp, "Check the node's cooling (fans, airflow, coolant)")
		return
	}
	var slow []string
	for _, r := range n.ThrottleReasons {
		switch r {
		case "hw_slowdown", "hw_thermal_slowdown", "sw_thermal_slowdown", "hw_power_brake_slowdown":
			slow = append(slow, r)
		}
	}
	if len(slow) == 0 {
		return
	}
	fix := "Check the node's cooling"
	if slices.Contains(slow, "hw_power_brake_slowdown") || slices.Contains(slow, "hw_slowdown") && !slices.Contains(slow, "hw_thermal_slowdown") {
		fix = "Check the node's power supplies and cooling: the hardware asked the GPU to slow down"
	}
	ev := fmt.Sprintf("%s: clock event reasons %s (mask 0x%x)", nv, strings.Join(n.ThrottleReasons, ", "), n.ThrottleMask)
	if n.PowerUsage > 0 {
		ev += fmt.Sprintf("; power %.0f W of %.0f W", float64(n.PowerUsage)/1000, float64(n.PowerLimit)/1000)
	}
	add(CheckGPUThermal, Warning, "clocks slowed down: "+strings.Join(slow, ", "), ev, fix)
}

// nvlinkFindings judges the GPU's NVLinks: a link down where others are
// up, and links that count errors.
func nvlinkFindings(n *facts.NVMLHealth, nv string, add func(string, Status, string, string, string)) {
	var down []string
	active := 0
	var errs []string
	for _, l := range n.NVLinks {
		if l.State == "active" {
			active++
		} else {
			down = append(down, strconv.Itoa(l.Link))
		}
		if l.Recovery+l.CRCFlit+l.CRCData+l.Replay > 0 {
			errs = append(errs, fmt.Sprintf("link %d: replay %d, recovery %d, CRC flit %d, CRC data %d", l.Link, l.Replay, l.Recovery, l.CRCFlit, l.CRCData))
		}
	}
	if active > 0 && len(down) > 0 {
		add(CheckGPUNVLink, Problem, fmt.Sprintf("NVLink %s down while %d are up: peer-to-peer traffic takes a slower path or fails", strings.Join(down, ", "), active),
			fmt.Sprintf("%s: NVLink %s inactive, %d active", nv, strings.Join(down, ", "), active), XidResetGPU.Text()+"; check the NVLink bridge or NVSwitch tray if it stays down")
	}
	if len(errs) > 0 {
		add(CheckGPUNVLink, Warning, "NVLink errors counted: "+strings.Join(errs, "; "), nv+": "+strings.Join(errs, "; "), "Watch the counters; a link whose recovery or CRC errors keep rising needs its bridge or tray checked")
	}
}

func recoveryText(a string) string {
	switch a {
	case "gpu_reset", "drain_and_reset", "bus_reset":
		return XidResetGPU.Text()
	case "node_reboot", "system_reboot":
		return XidReboot.Text()
	case "drain_p2p":
		return "Stop the programs that use peer-to-peer transfers, then reset the GPU"
	}
	return "Do what the driver asks (" + a + ")"
}

// healthGPUs are the GPUs to judge: those of the health facts, and
// those only the kernel log names (a GPU that left the bus and NVML).
func healthGPUs(obs *facts.Observation) []facts.GPUHealth {
	out := obs.Health.GPUs
	known := map[string]bool{}
	for _, g := range out {
		known[g.PCIAddress] = true
	}
	if obs.Kernel.Log == nil {
		return out
	}
	out = slices.Clip(out)
	for _, e := range obs.Kernel.Log.Events {
		if e.Kind == facts.EventXid && e.PCIAddress != "" && !known[e.PCIAddress] {
			known[e.PCIAddress] = true
			out = append(out, facts.GPUHealth{PCIAddress: e.PCIAddress})
		}
	}
	return out
}

// xidEvents are the kernel log's Xid events by GPU address.
func xidEvents(obs *facts.Observation) map[string][]facts.KernelEvent {
	out := map[string][]facts.KernelEvent{}
	if obs.Kernel.Log == nil {
		return out
	}
	for _, e := range obs.Kernel.Log.Events {
		if e.Kind == facts.EventXid {
			out[e.PCIAddress] = append(out[e.PCIAddress], e)
		}
	}
	return out
}

// verifiedAfter reports whether a verify passed on g after event e: in
// the same boot, on this GPU, with at least as many of e's Xids already in
// the log then as there are now. Counts only grow within a boot, so an
// Xid logged since would show as one more.
func verifiedAfter(h *facts.Health, g facts.GPUHealth, e facts.KernelEvent) bool {
	v := h.Verified
	if v == nil || v.BootID == "" || v.BootID != h.BootID {
		return false
	}
	for _, r := range v.GPUs {
		same := r.UUID != "" && r.UUID == g.UUID || r.PCIAddress != "" && r.PCIAddress == g.PCIAddress
		if same {
			return r.Passed && r.Xids[e.Code] >= e.Count
		}
	}
	return false
}

// GPUVerdicts are every GPU's health, the GPUs missing from the bus
// included, in the order of their addresses.
func GPUVerdicts(obs *facts.Observation) []GPUVerdict {
	fs, readmitted := healthFindings(obs)
	var out []GPUVerdict
	idx := map[string]int{}
	for _, g := range healthGPUs(obs) {
		idx[g.PCIAddress] = len(out)
		out = append(out, GPUVerdict{PCIAddress: g.PCIAddress, UUID: g.UUID, Index: g.Index, Name: g.Name, Status: OK, Readmitted: readmitted[g.PCIAddress]})
	}
	for _, a := range obs.Health.Missing {
		if _, ok := idx[a]; !ok {
			idx[a] = len(out)
			out = append(out, GPUVerdict{PCIAddress: a, Status: OK})
		}
		out[idx[a]].Missing = true
	}
	for _, f := range fs {
		i, ok := idx[f.gpu]
		if !ok {
			continue
		}
		v := &out[i]
		if rank(f.status) > rank(v.Status) {
			v.Status = f.status
		}
		if f.status == Problem {
			v.Problems = append(v.Problems, f.text)
		}
	}
	slices.SortStableFunc(out, func(a, b GPUVerdict) int { return strings.Compare(a.PCIAddress, b.PCIAddress) })
	return out
}

func rank(s Status) int {
	switch s {
	case Warning:
		return 1
	case Problem:
		return 2
	}
	return 0
}

// healthOK is each health check's summary when it finds nothing.
var healthOK = map[string]string{
	CheckGPUBus:         "Every GPU the driver knows is on the PCI bus",
	CheckGPUXid:         "The kernel log holds no Xid error for a GPU",
	CheckGPUReset:       "No GPU needs a reset",
	CheckGPUECC:         "No GPU counts uncorrectable ECC errors",
	CheckGPUMemRepair:   "No GPU's memory repair (row remapping, page retirement) has failed or run out",
	CheckGPUThermal:     "No GPU is too hot or slowed down by heat or power",
	CheckGPUNVLink:      "Every NVLink is up and counts no errors",
	CheckGPUPCIeLink:    "Every GPU's PCIe link runs at its full width and speed",
	CheckGPUPersistence: "Persistence mode is on for every GPU",
}

// nvmlChecks need NVML's counters.
var nvmlChecks = map[string]bool{CheckGPUReset: true, CheckGPUECC: true, CheckGPUMemRepair: true, CheckGPUThermal: true, CheckGPUNVLink: true, CheckGPUPersistence: true}

// gpuHealth adds the health checks.
func (d *doctor) gpuHealth() {
	if d.skipLive(Check{ID: CheckGPUCounters, Group: GroupGPUState}, "The GPUs' health counters and errors as NVML and the kernel log show them now") {
		return
	}
	fs, _ := healthFindings(d.obs)
	nvmlOK := d.obs.NVML.Status == "ok"
	links := slices.ContainsFunc(d.obs.Health.GPUs, func(g facts.GPUHealth) bool { return g.Link != nil })
	counters := false
	for _, id := range HealthChecks {
		if nvmlChecks[id] && !nvmlOK {
			// One line for all that NVML would have told, as gpu.state
			// does for the modes.
			if !counters {
				counters = true
				d.skip(Check{ID: CheckGPUCounters, Group: GroupGPUState}, "NVML did not answer: the GPUs' health counters (ECC, memory repair, resets, temperatures and clocks, NVLinks, persistence) cannot be read")
			}
			continue
		}
		c := Check{ID: id, Group: GroupGPUState, Status: OK}
		var texts, fixes, fine []string
		spec, problems := "", 0
		for _, f := range fs {
			if f.check != id {
				continue
			}
			c.Evidence = append(c.Evidence, f.evidence...)
			if f.status == OK {
				fine = append(fine, f.text)
				continue
			}
			if rank(f.status) > rank(c.Status) {
				c.Status = f.status
			}
			if f.status == Problem {
				// Problems first: the summary's start is what a drain
				// reason shows.
				texts = slices.Insert(texts, problems, f.text)
				problems++
			} else {
				texts = append(texts, f.text)
			}
			if f.fix != "" && !slices.Contains(fixes, f.fix) {
				fixes = append(fixes, f.fix)
			}
			spec = cmp.Or(spec, f.spec)
		}
		switch {
		case len(texts) > 0:
			c.Summary = strings.Join(texts, "; ")
			text := strings.Join(fixes, ". ")
			c.Fix = &Fix{Text: strings.ToUpper(text[:1]) + text[1:], Spec: spec}
		case len(fine) > 0:
			c.Summary = strings.Join(fine, "; ")
		case id == CheckGPUXid && d.obs.Kernel.Log == nil:
			d.skip(c, "No kernel log was found to read Xid errors from")
			continue
		case id == CheckGPUPCIeLink && !links:
			d.skip(c, "No GPU's PCIe link is listed under /sys/bus/pci/devices")
			continue
		case id == CheckGPUBus && len(d.obs.Health.GPUs) == 0 && len(d.obs.Health.Missing) == 0:
			d.skip(c, "No GPU to check")
			continue
		default:
			c.Summary = healthOK[id]
		}
		d.add(c)
	}
}
