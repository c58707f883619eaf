package kernellog

import (
	"bytes"
	"regexp"
	"slices"
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
)

// line is one kept line of a log, oldest first once collected.
type line struct {
	text   []byte
	source string
}

// The driver's refusals span several lines, each prefixed with "NVRM:"
// (one record with embedded newlines in /dev/kmsg and the journal, one
// line each in a syslog file), so they are matched on the lines' texts
// joined. Their wording, as users' logs show it:
//
//   - "The NVIDIA GPU 0000:02:00.0 (PCI ID: 10de:2c58) installed in this
//     system requires use of the NVIDIA open kernel modules."
//     (Blackwell under the proprietary modules)
//   - "The NVIDIA GPU 0000:09:00.0 (PCI ID: 10de:1d01) installed in this
//     system is not supported by open nvidia.ko because it does not
//     include the required GPU System Processor (GSP)."
//     (https://github.com/negativo17/nvidia-driver/issues/158)
//   - "The NVIDIA GPU 0000:8a:00.0 (PCI ID: 10de:26b9) installed in this
//     system is not supported by the NVIDIA 470.256.02 driver release."
//     (https://github.com/ZaidQureshi/bam/issues/38); older releases
//     said "… by the 280.04 NVIDIA Linux graphics driver release"
//     (https://github.com/MrMEEE/bumblebee-Old-and-abbandoned/issues/537)
//   - "The NVIDIA GeForce GT 1030 GPU installed in this system is
//     supported through the NVIDIA 580.xx Legacy drivers. … The
//     610.43.02 NVIDIA driver will ignore this GPU."
var (
	reOpenRequired = regexp.MustCompile(`The NVIDIA GPU (\S+) \(PCI ID: ([0-9a-fA-F]{4}:[0-9a-fA-F]{4})\) installed in this system requires use of the NVIDIA open kernel modules`)
	reGSPRequired  = regexp.MustCompile(`The NVIDIA GPU (\S+) \(PCI ID: ([0-9a-fA-F]{4}:[0-9a-fA-F]{4})\) installed in this system is not supported by open nvidia\.ko because it does not include the required GPU System Processor`)
	reUnsupported  = regexp.MustCompile(`The NVIDIA GPU (\S+) \(PCI ID: ([0-9a-fA-F]{4}:[0-9a-fA-F]{4})\) installed in this system is not supported by the (?:NVIDIA ([0-9][0-9.]*[0-9]) driver|([0-9][0-9.]*[0-9]) NVIDIA Linux graphics driver) release`)
	reLegacy       = regexp.MustCompile(`The NVIDIA (\S.{0,80}?) GPU installed in this system is supported through the (?:NVIDIA )+([0-9]+)\.xx Legacy drivers\..{0,240}?The ([0-9][0-9.]*[0-9]) NVIDIA driver will ignore this GPU`)
)

// Messages of one line.
var (
	reNova    = regexp.MustCompile(`GPU (\S+?)\.? is already bound to NovaCore`)
	reGSPInit = regexp.MustCompile(`RmInitAdapter: Cannot initialize GSP firmware RM`)
	reRmInit  = regexp.MustCompile(`(?:GPU (\S+): )?RmInitAdapter failed! \((0x[0-9a-fA-F]+:0x[0-9a-fA-F]+:[0-9]+)\)`)
	// With MIG on, the driver names the GPU instance after the address
	// ("Xid (PCI:0000:01:00 GPU-I:05): 94, …", NVIDIA's Xid catalogue,
	// docs.nvidia.com/deploy/xid-errors).
	reXid     = regexp.MustCompile(`Xid \(PCI:([0-9a-fA-F:.]+)(?: GPU-I:([0-9]+))?\): ([0-9]+),?\s*(.*)`)
	reLoading = regexp.MustCompile(`loading NVIDIA UNIX (?:(Open) Kernel Module for \S+|\S+ Kernel Module)\s+([0-9]+\.[0-9.]*[0-9])`)
	reNVRM    = regexp.MustCompile(`NVRM:?\s*`)
	reSpace   = regexp.MustCompile(`\s+`)
)

// maxEvents bounds the events kept; maxMessage the text of each.
const (
	maxEvents  = 64
	maxMessage = 400
)

// body is the driver's text of a line: from its first "NVRM", with the
// escapes that stand for a record's inner newlines (kmsg's \x0a,
// rsyslog's #012) and every "NVRM:" prefix taken out.
func body(text []byte) string {
	i := bytes.Index(text, nvrm)
	if i < 0 {
		return ""
	}
	s := string(text[i:])
	s = strings.NewReplacer(`\x0a`, " ", "#012", " ", `\x09`, " ").Replace(s)
	s = reNVRM.ReplaceAllString(s, " ")
	return strings.TrimSpace(reSpace.ReplaceAllString(s, " "))
}

// events finds the driver's messages in lines, oldest first.
func events(lines []line) ([]facts.KernelEvent, *facts.KernelLogModule) {
	var out []facts.KernelEvent
	var mod *facts.KernelLogModule
	index := map[string]int{}
	add := func(e facts.KernelEvent) {
		e.PCIAddress = normalAddress(e.PCIAddress)
		e.PCIID = strings.ToLower(e.PCIID)
		if len(e.Message) > maxMessage {
			e.Message = e.Message[:maxMessage] + "…"
		}
		key := strings.Join([]string{e.Kind, e.PCIAddress, e.GPUName, e.Code, e.Driver, e.Source}, "|")
		if i, ok := index[key]; ok {
			out[i].Count++
			return
		}
		if len(out) >= maxEvents {
			return
		}
		e.Count = 1
		index[key] = len(out)
		out = append(out, e)
	}
	// The joined text of each source's lines, and the events found in
	// it with where they start, to be added in the order logged.
	var joined strings.Builder
	var src string
	type found struct {
		at int
		e  facts.KernelEvent
	}
	var pending []found
	flush := func() {
		if joined.Len() == 0 {
			return
		}
		s := joined.String()
		later := func(e facts.KernelEvent) { pending = append(pending, found{at: strings.Index(s, e.Message), e: e}) }
		for _, m := range reOpenRequired.FindAllStringSubmatchIndex(s, -1) {
			later(facts.KernelEvent{Kind: facts.EventOpenModulesRequired, PCIAddress: s[m[2]:m[3]], PCIID: s[m[4]:m[5]], Message: s[m[0]:m[1]], Source: src})
		}
		for _, m := range reGSPRequired.FindAllStringSubmatchIndex(s, -1) {
			later(facts.KernelEvent{Kind: facts.EventGSPRequired, PCIAddress: s[m[2]:m[3]], PCIID: s[m[4]:m[5]], Message: s[m[0]:m[1]], Source: src})
		}
		for _, m := range reUnsupported.FindAllStringSubmatchIndex(s, -1) {
			drv := sub(s, m, 3)
			if drv == "" {
				drv = sub(s, m, 4)
			}
			later(facts.KernelEvent{Kind: facts.EventUnsupportedGPU, PCIAddress: s[m[2]:m[3]], PCIID: s[m[4]:m[5]], Driver: drv, Message: s[m[0]:m[1]], Source: src})
		}
		for _, m := range reLegacy.FindAllStringSubmatchIndex(s, -1) {
			later(facts.KernelEvent{Kind: facts.EventLegacyGPU, GPUName: s[m[2]:m[3]], Branch: s[m[4]:m[5]], Driver: s[m[6]:m[7]], Message: s[m[0]:m[1]], Source: src})
		}
		slices.SortStableFunc(pending, func(a, b found) int { return a.at - b.at })
		for _, f := range pending {
			add(f.e)
		}
		pending = pending[:0]
		joined.Reset()
	}
	for _, l := range lines {
		if l.source != src {
			flush()
			src = l.source
		}
		b := body(l.text)
		if b == "" {
			continue
		}
		at := joined.Len()
		joined.WriteString(b)
		joined.WriteByte(' ')
		pend := func(e facts.KernelEvent) { pending = append(pending, found{at: at, e: e}) }
		if m := reNova.FindStringSubmatch(b); m != nil {
			pend(facts.KernelEvent{Kind: facts.EventBoundToNova, PCIAddress: m[1], Message: m[0], Source: l.source})
		}
		if m := reGSPInit.FindString(b); m != "" {
			pend(facts.KernelEvent{Kind: facts.EventGSPInitFailed, Message: m, Source: l.source})
		}
		if m := reRmInit.FindStringSubmatch(b); m != nil {
			pend(facts.KernelEvent{Kind: facts.EventRmInitFailed, PCIAddress: m[1], Code: m[2], Message: m[0], Source: l.source})
		}
		if m := reXid.FindStringSubmatch(b); m != nil {
			detail := strings.TrimSpace(m[4])
			if m[2] != "" {
				detail = "GPU instance " + m[2] + ": " + detail
			}
			pend(facts.KernelEvent{Kind: facts.EventXid, PCIAddress: m[1], Code: m[3], Detail: detail, Message: m[0], Source: l.source})
		}
		if m := reLoading.FindStringSubmatch(b); m != nil {
			flavor := "proprietary"
			if m[1] != "" {
				flavor = "open"
			}
			mod = &facts.KernelLogModule{Version: m[2], Flavor: flavor, Source: l.source}
		}
	}
	flush()
	return out, mod
}

func sub(s string, m []int, i int) string {
	if m[2*i] < 0 {
		return ""
	}
	return s[m[2*i]:m[2*i+1]]
}

// normalAddress writes a PCI address as sysfs names it,
// "0000:02:00.0": Xid lines give "0000:02:00" (function 0), older
// drivers "02:00.0".
func normalAddress(a string) string {
	a = strings.ToLower(strings.TrimSuffix(a, ":"))
	if a == "" {
		return ""
	}
	if strings.Count(a, ":") == 1 {
		a = "0000:" + a
	}
	if !strings.Contains(a, ".") {
		a += ".0"
	}
	return a
}
