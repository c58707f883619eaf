// Package health observes what tells whether GPUs that are installed and
// visible will hold up under load, beyond what NVML's counters say (the
// driver provider reads those in its NVML session): each GPU's PCIe link
// as the kernel trained it, and GPUs the driver lists that the bus has
// lost. It reads files only, under /sys and /proc of the root, and never
// starts work on a GPU.
package health

import (
	"slices"
	"strconv"
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
)

// The kernel's files.
const (
	// PCIDevices holds a directory per PCI function, named by address,
	// each with the link files (drivers/pci/pci-sysfs.c:
	// current_link_speed, current_link_width, max_link_speed,
	// max_link_width).
	PCIDevices = "/sys/bus/pci/devices"
	// DriverGPUs holds a directory per GPU the nvidia driver probed,
	// named by PCI address; it stays when the GPU leaves the bus.
	DriverGPUs = "/proc/driver/nvidia/gpus"
	// BootID changes at every boot.
	BootID = "/proc/sys/kernel/random/boot_id"
)

// Observe completes obs.Health: the GPUs NVML listed (already there, from
// the driver provider) and those on the PCI bus, each with its PCIe link;
// the GPUs missing from the bus; the boot id. It reads obs.PCI and
// obs.Health.GPUs, so it runs after the driver provider.
func Observe(h *host.Host, obs *facts.Observation) {
	hl := &obs.Health
	byAddr := map[string]int{}
	for i, g := range hl.GPUs {
		byAddr[g.PCIAddress] = i
	}
	for _, p := range obs.PCI {
		if _, ok := byAddr[p.Address]; !ok {
			byAddr[p.Address] = len(hl.GPUs)
			hl.GPUs = append(hl.GPUs, facts.GPUHealth{PCIAddress: p.Address, Name: p.Model})
		}
	}
	for i := range hl.GPUs {
		if a := hl.GPUs[i].PCIAddress; a != "" {
			hl.GPUs[i].Link = ReadLink(h, a)
		}
	}
	slices.SortStableFunc(hl.GPUs, func(a, b facts.GPUHealth) int { return strings.Compare(a.PCIAddress, b.PCIAddress) })
	hl.Missing = Missing(h)
	if b, err := h.ReadFileLimit(BootID, 64); err == nil {
		hl.BootID = strings.TrimSpace(string(b))
	}
	if hl.GPUs == nil {
		hl.GPUs = []facts.GPUHealth{}
	}
}

// ReadLink reads the PCIe link of the device at addr; nil when the
// device has no link files (it is gone, or not PCIe).
func ReadLink(h *host.Host, addr string) *facts.PCIeLink {
	dir := PCIDevices + "/" + addr + "/"
	read := func(name string) string {
		b, err := h.ReadFileLimit(dir+name, 64)
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	l := &facts.PCIeLink{CurrentSpeed: read("current_link_speed"), MaxSpeed: read("max_link_speed")}
	if l.CurrentSpeed == "" && l.MaxSpeed == "" {
		return nil
	}
	l.CurrentSpeedGTs, l.MaxSpeedGTs = SpeedGTs(l.CurrentSpeed), SpeedGTs(l.MaxSpeed)
	l.CurrentWidth, _ = strconv.Atoi(read("current_link_width"))
	l.MaxWidth, _ = strconv.Atoi(read("max_link_width"))
	return l
}

// SpeedGTs reads a link speed as the kernel writes it ("16.0 GT/s PCIe",
// "8.0 GT/s", "2.5 GT/s"; "Unknown" when the link is down): GT/s, or 0.
func SpeedGTs(s string) float64 {
	f, _, _ := strings.Cut(s, " ")
	v, err := strconv.ParseFloat(f, 64)
	if err != nil {
		return 0
	}
	return v
}

// Missing lists the GPUs the nvidia driver probed that are gone from the
// PCI bus, sorted. After "fallen off the bus" the kernel removes the
// device once hot-unplug or an AER recovery gives up, and the driver's
// entry is what remains.
func Missing(h *host.Host) []string {
	ents, err := h.ReadDir(DriverGPUs)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		addr := strings.ToLower(e.Name())
		if _, err := h.Lstat(PCIDevices + "/" + addr); err != nil {
			out = append(out, addr)
		}
	}
	slices.Sort(out)
	return out
}
