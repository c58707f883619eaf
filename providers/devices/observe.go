package devices

import (
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
)

// ObserveUnit reports the compute modes' boot-time unit: its file's
// digest, when it exists, and whether it is enabled. The device.boot step
// is decided from them.
func ObserveUnit(h *host.Host) facts.Unit {
	u := facts.Unit{Name: BootUnit}
	if _, err := h.Lstat(BootUnitPath); err == nil {
		// "" when the file cannot be read: it then differs from any
		// content the planner wants.
		sum, _ := h.SHA256(BootUnitPath)
		u.File = &facts.FileDigest{Path: BootUnitPath, SHA256: sum}
	}
	_, err := h.Lstat(bootUnitWants)
	u.Enabled = err == nil
	return u
}
