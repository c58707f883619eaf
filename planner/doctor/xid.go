package doctor

import (
	"strconv"
	"strings"
)

// XidAction is what NVIDIA recommends doing first after an Xid: the
// "Resolution Bucket (Immediate Action)" column of its Xid catalogue.
type XidAction string

// The actions, from least to most disruptive. Their names follow the
// catalogue's buckets (RESTART_APP, RESET_GPU, RESTART_BM,
// CHECK_MECHANICALS, CONTACT_SUPPORT, IGNORE).
const (
	// XidIgnore: the event follows from another one, or is informational.
	XidIgnore XidAction = "ignore"
	// XidRestartApp: the application faulted; the GPU is fine.
	XidRestartApp XidAction = "restart_app"
	// XidResetGPU: the GPU needs a reset (nvidia-smi -r, or a reboot).
	XidResetGPU XidAction = "reset_gpu"
	// XidReboot: the node needs a reboot.
	XidReboot XidAction = "reboot"
	// XidCheckMechanicals: drain the node, check power, cooling, seating
	// and cabling, then reboot.
	XidCheckMechanicals XidAction = "check_mechanicals"
	// XidContactSupport: the hardware is failing: drain, and RMA.
	XidContactSupport XidAction = "contact_support"
)

// Xid is one entry of the catalogue.
type Xid struct {
	Code    int
	Meaning string
	Action  XidAction
	// Then is what to do when the event comes back after Action (the
	// catalogue's investigatory action, in words).
	Then string
}

// xidCatalogue holds the Xids a health check meets, from NVIDIA's Xid
// catalogue for Ampere and later GPUs, "Analyzing Xid Errors with the Xid
// Catalog" (https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html),
// and for the memory errors NVIDIA's "GPU Memory Error Management"
// (https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/user-visible-statistics.html:
// 48 uncorrectable ECC, 63 row remapping recorded, 64 recording failed,
// 94 contained and 95 uncontained ECC errors). A code not here is
// reported with its number and the catalogue's address.
var xidCatalogue = map[int]Xid{
	8:   {8, "GPU stopped processing (idle timeout)", XidRestartApp, "contact NVIDIA support if it recurs"},
	11:  {11, "invalid or corrupted push buffer stream", XidRestartApp, "check the application and CUDA version"},
	13:  {13, "graphics engine exception (often an out-of-range access in the program)", XidRestartApp, "check the application; run verify to tell a program's fault from the GPU's"},
	31:  {31, "GPU memory page fault (an illegal address in the program)", XidRestartApp, "check the application"},
	32:  {32, "invalid or corrupted push buffer stream", XidRestartApp, "check the application and the PCIe link"},
	43:  {43, "GPU stopped processing: a channel was reset after the program's own fault", XidRestartApp, "check the application"},
	45:  {45, "preemptive cleanup after an earlier error, or a program stopped", XidIgnore, "look at the Xid before it"},
	48:  {48, "double-bit (uncorrectable) ECC error", XidResetGPU, "RMA if it recurs"},
	61:  {61, "internal micro-controller breakpoint or warning", XidResetGPU, "contact NVIDIA support if it recurs"},
	62:  {62, "internal micro-controller halt", XidResetGPU, "check cooling; contact NVIDIA support if it recurs"},
	63:  {63, "ECC page retirement or row remapping recorded; it takes effect at the next reset", XidResetGPU, "watch the remapped rows; RMA once remapping fails"},
	64:  {64, "ECC page retirement or row remapping could not be recorded", XidResetGPU, "RMA"},
	69:  {69, "graphics engine class error", XidRestartApp, "contact NVIDIA support if it recurs"},
	74:  {74, "NVLink error", XidResetGPU, "check the NVLink bridges or the NVSwitch tray; RMA if it recurs"},
	79:  {79, "GPU has fallen off the bus: it no longer answers on PCIe", XidCheckMechanicals, "RMA if it recurs with power, cooling and seating in order"},
	92:  {92, "high single-bit ECC error rate", XidIgnore, "watch the ECC counters; RMA if they keep rising"},
	94:  {94, "contained uncorrectable ECC error: the program that touched it was stopped, the page is offlined", XidRestartApp, "reset the GPU at the next maintenance to remap the row"},
	95:  {95, "uncontained uncorrectable ECC error: every program on the GPU is affected", XidResetGPU, "RMA if it recurs"},
	109: {109, "context switch timeout", XidRestartApp, "contact NVIDIA support if it recurs"},
	119: {119, "GSP (GPU System Processor) RPC timeout", XidResetGPU, "update the driver; contact NVIDIA support if it recurs"},
	120: {120, "GSP (GPU System Processor) error", XidResetGPU, "update the driver; contact NVIDIA support if it recurs"},
	140: {140, "unrecovered ECC error", XidResetGPU, "RMA if it recurs"},
	154: {154, "the driver changed the GPU's recovery action", XidResetGPU, "do what the message names"},
}

// XidCatalogueURL is where the catalogue is.
const XidCatalogueURL = "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"

// LookupXid is the catalogue's entry for code, and for Xid 154 the action
// its message names ("GPU recovery action changed from 0x0 (None) to 0x2
// (Node Reboot Required)"). ok is false for a code the catalogue here
// does not hold; the entry then says to look it up.
func LookupXid(code, message string) (x Xid, ok bool) {
	n, err := strconv.Atoi(code)
	if err != nil {
		return Xid{Meaning: "an Xid gpuenv cannot read (" + code + ")", Action: XidContactSupport, Then: "look it up in " + XidCatalogueURL}, false
	}
	x, ok = xidCatalogue[n]
	if !ok {
		return Xid{Code: n, Meaning: "Xid " + code + " (see NVIDIA's catalogue)", Action: XidResetGPU, Then: "look it up in " + XidCatalogueURL}, false
	}
	if n == 154 {
		m := strings.ToLower(message)
		switch {
		case strings.Contains(m, "node reboot"):
			x.Action = XidReboot
		case strings.Contains(m, "drain and reset"), strings.Contains(m, "reset required"):
			x.Action = XidResetGPU
		case strings.Contains(m, "drain p2p"):
			x.Action = XidRestartApp
			x.Then = "drain the programs that use peer-to-peer transfers, then reset the GPU"
		case strings.Contains(m, "(none)") && strings.HasSuffix(strings.TrimSpace(strings.TrimSuffix(m, ".")), "(none)"):
			x.Action = XidIgnore
		}
	}
	return x, true
}

// Text says what to do, for a person.
func (a XidAction) Text() string {
	switch a {
	case XidIgnore:
		return "nothing by itself"
	case XidRestartApp:
		return "restart the application"
	case XidResetGPU:
		return "drain the GPU and reset it (nvidia-smi -r -i <GPU>, or reboot)"
	case XidReboot:
		return "drain the node and reboot it"
	case XidCheckMechanicals:
		return "drain the node, check its power, cooling and the GPU's seating and cabling, and reboot"
	case XidContactSupport:
		return "drain the GPU and contact NVIDIA support (RMA)"
	}
	return string(a)
}

// severe reports whether an Xid with action a makes the GPU unhealthy:
// one the application caused leaves the GPU working.
func (a XidAction) severe() bool {
	return a != XidIgnore && a != XidRestartApp
}
