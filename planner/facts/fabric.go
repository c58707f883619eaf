package facts

// Fabric is the NVLink fabric of a board whose GPUs reach each other
// through NVSwitches (HGX and DGX boards of the A100 and H100
// generations), and the Fabric Manager that must program those switches
// before CUDA can use any GPU of the board: without it running at the
// driver's own version, every CUDA program fails with error 802
// ("system not yet initialized").
type Fabric struct {
	// NVSwitches are the switches on the PCI bus (class 0x068000,
	// NVIDIA's vendor id). Empty on every other board.
	NVSwitches []PCIDevice `json:"nvswitches,omitempty"`
	// Manager is the installed Fabric Manager; its zero value where none
	// is installed.
	Manager FabricManager `json:"manager,omitzero"`
}

// FabricManager is the Fabric Manager as the package database, the
// unit's enablement and the process table show it.
type FabricManager struct {
	// Package and Version are the installed Fabric Manager package
	// (nvidia-fabricmanager-550 550.54.15-1, nvidia-fabricmanager, or
	// nvidia-fabric-manager on RPM systems before 580); "" when none is.
	Package string `json:"package,omitempty"`
	Version string `json:"version,omitempty"`
	// Upstream is Version's driver part ("550.54.15"), which must be the
	// driver's version.
	Upstream string `json:"upstream_version,omitempty"`
	Hold     bool   `json:"hold,omitempty"`
	// NSCQ is the installed NVSwitch Configuration and Query library
	// package (libnvidia-nscq-550, libnvidia-nscq) and NSCQVersion its
	// version; "" when none is.
	NSCQ        string `json:"nscq_package,omitempty"`
	NSCQVersion string `json:"nscq_version,omitempty"`
	// Enabled is true when the link systemctl enable makes for
	// nvidia-fabricmanager.service exists.
	Enabled bool `json:"enabled"`
	// Running is "yes" when a process of the root runs the daemon
	// (nv-fabricmanager, whose name the kernel keeps as
	// "nv-fabricmanage"), "no" when the root's /proc lists processes
	// and none is, "" when the root has no process table to look at (an
	// image, a root without /proc).
	Running string `json:"running,omitempty"`
	// PID is the daemon's process when Running is "yes".
	PID int `json:"pid,omitempty"`
}
