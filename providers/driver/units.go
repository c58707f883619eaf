package driver

import (
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
)

// ObserveUnit reports whether nvidia-persistenced is enabled: the link
// systemctl enable makes for it, which the driver.persistence step
// decides from where NVML does not report every device's persistence.
func ObserveUnit(h *host.Host) facts.Unit {
	_, err := h.Lstat(persistencedWants)
	return facts.Unit{Name: PersistencedUnit, Enabled: err == nil}
}
