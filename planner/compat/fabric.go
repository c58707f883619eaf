package compat

// NVSwitchClass is the PCI class of an NVSwitch (bridge, other), which
// nvidia.ko binds besides the display classes (NVIDIA/open-gpu-kernel-
// modules, kernel-open/nvidia/nv-pci-table.c).
const NVSwitchClass = 0x068000

// NVSwitch is one NVSwitch model as it shows on the PCI bus.
type NVSwitch struct {
	DeviceID uint16
	Model    string
	// Board is the baseboard it is found on.
	Board string
}

// nvSwitches are the NVSwitches that are PCI devices. Source: pci.ids
// (pci-ids.ucw.cz), vendor 10de, and lspci -nn output of HGX boards:
// "Bridge [0680]: NVIDIA Corporation GA100 [A100 NVSwitch] [10de:1af1]",
// "Bridge: NVIDIA Corporation GH100 [H100 NVSwitch]" (10de:22a3, on H100,
// H200, H800 and H20 boards alike). The fourth generation (HGX B200)
// does not appear as PCIe devices (NVIDIA Fabric Manager user guide), so
// it has no row: those boards are told by their GPUs.
var nvSwitches = []NVSwitch{
	{DeviceID: 0x1af1, Model: "A100 NVSwitch", Board: "HGX A100"},
	{DeviceID: 0x22a3, Model: "H100 NVSwitch", Board: "HGX H100/H200"},
}

// NVSwitchByPCIID returns the NVSwitch with an NVIDIA device id.
func NVSwitchByPCIID(id uint16) (NVSwitch, bool) {
	for _, s := range nvSwitches {
		if s.DeviceID == id {
			return s, true
		}
	}
	return NVSwitch{}, false
}

// FabricManagerUnit is Fabric Manager's systemd service.
const FabricManagerUnit = "nvidia-fabricmanager.service"

// FabricManagerCommand is the daemon's name as /proc/PID/comm shows it:
// nv-fabricmanager cut to the kernel's 15 bytes.
const FabricManagerCommand = "nv-fabricmanage"
