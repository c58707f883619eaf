package facts

import "time"

// OS identifies the distribution, from /etc/os-release.
type OS struct {
	ID        string   `json:"id"`                 // "ubuntu", "debian", "rhel"
	IDLike    []string `json:"id_like,omitempty"`  // "debian", "rhel fedora"
	VersionID string   `json:"version_id"`         // "22.04", "12", "9.3"
	Codename  string   `json:"codename,omitempty"` // "jammy", "bookworm"
	Name      string   `json:"pretty_name"`        // PRETTY_NAME
	Family    string   `json:"family"`             // "deb", "rpm" or "" when unknown
	Arch      string   `json:"architecture,omitempty"`
}

// Kernel describes the running kernel, its modules, and the kernels
// installed on disk.
type Kernel struct {
	// Release is the running kernel (/proc/sys/kernel/osrelease).
	Release string `json:"release"`
	// SecureBoot is "enabled", "disabled" or "unknown" (no efivars: BIOS boot,
	// a container, or a root that is not a live system).
	SecureBoot string `json:"secure_boot"`
	// Loaded lists the GPU-relevant loaded modules from /proc/modules.
	Loaded []LoadedModule `json:"loaded_modules"`
	// Blacklists are "blacklist <module>" (and "install <module> /bin/false")
	// lines found in modprobe configuration.
	Blacklists []Blacklist `json:"blacklists"`
	// Initramfs is the running kernel's initramfs, when found.
	Initramfs *FileTime `json:"initramfs,omitempty"`
	// Installed lists every kernel with a /lib/modules directory.
	Installed []InstalledKernel `json:"installed"`
	// Holders are what keeps the nvidia modules from unloading: the
	// processes with an NVIDIA device open (/dev/nvidia*, or a /dev/dri
	// node of nvidia-drm), from /proc/PID/fd, and the GPU services
	// gpuenv stops and starts again around a module reload, running
	// whether or not they hold a device. Observed only while the nvidia
	// module is loaded and the modules' reference counts say something
	// besides their own users holds them; a process gpuenv may not look
	// into is missing.
	Holders []Holder `json:"holders,omitempty"`
	// SigningKey tells, with Secure Boot on, whether the key DKMS signs
	// the modules it builds with is enrolled: "enrolled" (the key's
	// certificate is in the firmware's MOK list), "not_enrolled", or ""
	// when it cannot be told (no key yet, no MOK list to read).
	SigningKey string `json:"signing_key,omitempty"`
	// Log is what the kernel logged about the GPUs in the boot its log
	// last records (the running one on a live host); nil when no log
	// was found to read.
	Log *KernelLog `json:"log,omitempty"`
}

// Holder is a process that holds an nvidia module.
type Holder struct {
	PID     int    `json:"pid"`
	Command string `json:"command"` // /proc/PID/comm
	// Devices are the NVIDIA device nodes it has open.
	Devices []string `json:"devices,omitempty"`
	// Module is the module its devices belong to: "nvidia_drm" for a
	// /dev/dri node, "nvidia_uvm", "nvidia_modeset", else "nvidia".
	Module string `json:"module,omitempty"`
	// Unit is the GPU service the process is the daemon of
	// ("nvidia-persistenced.service"), when it is one gpuenv restarts.
	Unit string `json:"unit,omitempty"`
}

// Init is the root's process 1, as far as steps need it: whether a
// service manager runs the system being changed, so that a changed unit or
// manager setting is loaded now rather than at the next boot.
type Init struct {
	// PID1 is process 1's command name as /proc/1/comm inside the root
	// says: "systemd" on a host booted with systemd; a container's entry
	// point ("bash", "tini", "sleep") otherwise; "" when the root has no
	// /proc/1 (a disk image, a root without /proc mounted).
	PID1 string `json:"pid1"`
	// Live is true when the root is the running system ("/"), whose
	// process 1 commands started by gpuenv can reach.
	Live bool `json:"live"`
	// Systemd is true when systemd is process 1 of the running system
	// (Live, and PID1 is "systemd"): only then can systemctl reload units
	// and manager settings, and start or stop services, now. Otherwise
	// they take effect when the root next boots with systemd.
	Systemd bool `json:"systemd"`
	// Chroot says, of a live root, whether gpuenv runs in a chroot, whose
	// kernel and modules are the machine's, not the root's: "yes" when
	// "/" is not process 1's root (/proc/1/root) or no /proc is mounted
	// at all, "unknown" when gpuenv,
	// run as root, may not look at process 1's root (a sandbox that
	// hides it); "" when "/" is process 1's root, when gpuenv is not root
	// (which may never look). Of a root that is not this machine's, it is
	// "image" when the root's /proc is an empty directory (an image no
	// system runs from, built from outside it), and "" otherwise.
	Chroot string `json:"chroot,omitempty"`
}

// LoadedModule is one line of /proc/modules.
type LoadedModule struct {
	Name     string   `json:"name"`
	Size     uint64   `json:"size"`
	RefCount int      `json:"refcount"`
	UsedBy   []string `json:"used_by,omitempty"`
	// State is "Live", "Loading" or "Unloading".
	State string `json:"state,omitempty"`
	// Taints are the kernel's taint letters for the module: "P"
	// (proprietary licence: the closed nvidia flavour), "O" (out of tree),
	// "E" (unsigned).
	Taints string `json:"taints,omitempty"`
}

// Blacklist is a module kept from loading by modprobe configuration.
type Blacklist struct {
	Module string `json:"module"`
	// Directive is how: "blacklist" (no loading by alias), "install"
	// (an install command such as /bin/false: no loading at all),
	// "alias off" (the name leads to a module "off" that does not
	// exist: no loading by that name), or from the kernel command line
	// (File /proc/cmdline) "modprobe.blacklist" (as blacklist),
	// "rd.driver.blacklist" (dracut's, in the initramfs only) and
	// "module_blacklist" (the kernel refuses the module).
	Directive string `json:"directive"`
	File      string `json:"file"`
	Line      int    `json:"line,omitempty"`
	// ModTime is the configuration file's modification time, compared
	// with the initramfs's to tell whether the blacklist reached it.
	ModTime time.Time `json:"mtime,omitzero"`
}

// FileTime is a file and its modification time.
type FileTime struct {
	Path    string    `json:"path"`
	ModTime time.Time `json:"mtime"`
}

// InstalledKernel is a kernel with modules on disk.
type InstalledKernel struct {
	Release string `json:"release"`
	Running bool   `json:"running"`
	// Headers tells whether the kernel's build headers are installed
	// (/lib/modules/<release>/build resolves to a directory), which DKMS
	// needs to build the nvidia module.
	Headers bool `json:"headers"`
	// NvidiaModules are nvidia.ko files found for this kernel (DKMS's
	// updates/dkms, or a distribution's prebuilt module).
	NvidiaModules []ModuleFile `json:"nvidia_modules,omitempty"`
	// DKMS lists the DKMS build records for this kernel.
	DKMS []DKMSBuild `json:"dkms,omitempty"`
}

// ModuleFile is one kernel module file on disk.
type ModuleFile struct {
	Path string `json:"path"`
	// Version is read from the file name or DKMS tree when it says;
	// empty when only the module's own metadata would tell.
	Version string `json:"version,omitempty"`
	// Tree is who put it there, from its directory: "dkms"
	// (updates/dkms), "akmods" (extra/nvidia, RPM Fusion's akmod), "runfile"
	// (kernel/drivers/video, NVIDIA's .run installer), "kmod" (a
	// distribution's or NVIDIA's prebuilt package); "" when unknown.
	Tree string `json:"tree,omitempty"`
}

// DKMSBuild is one /var/lib/dkms/<module>/<version>/<kernel>/<arch> entry.
type DKMSBuild struct {
	Module  string `json:"module"`
	Version string `json:"version"`
	Arch    string `json:"arch"`
	Built   bool   `json:"built"`
}

// PCIDevice is an NVIDIA GPU on the PCI bus, seen in /sys/bus/pci/devices
// whether or not any driver is bound to it.
type PCIDevice struct {
	Address         string `json:"address"` // "0000:17:00.0"
	VendorID        uint16 `json:"vendor_id"`
	DeviceID        uint16 `json:"device_id"`
	SubsystemVendor uint16 `json:"subsystem_vendor_id,omitempty"`
	SubsystemDevice uint16 `json:"subsystem_device_id,omitempty"`
	// PCIID and SubsystemID are the same ids as lspci -nn prints them
	// ("10de:2330"), for people and tools that search by that form.
	PCIID       string `json:"pci_id"`
	SubsystemID string `json:"subsystem_id,omitempty"`
	Class       uint32 `json:"class"`
	// Driver is the bound kernel driver: "nvidia", "nouveau", "vfio-pci",
	// or "" when none is bound.
	Driver string `json:"driver"`
	// Model and Architecture come from gpuenv's device table when it knows
	// the device id.
	Model        string `json:"model,omitempty"`
	Architecture string `json:"architecture,omitempty"`
	// ComputeCapability from the device table ("9.0"), so that a host
	// without a driver still has one.
	ComputeCapability string `json:"compute_capability,omitempty"`
}

// NVML is what the NVIDIA Management Library reported, or why it could not.
type NVML struct {
	// Status is "ok", or the class of failure: "not_attempted" (a root
	// other than /), "library_not_found", "driver_not_loaded",
	// "driver_library_mismatch", "no_permission", "other".
	Status string `json:"status"`
	// From is "files" when the status was told from the root's files
	// instead of by starting NVML: no nvidia module is loaded, and NVML,
	// started as root, would create the device files it talks to
	// (/dev/nvidiactl), changing the host it was asked to look at.
	From string `json:"from,omitempty"`
	// Error is the failure in words, for a person.
	Error             string      `json:"error,omitempty"`
	DriverVersion     string      `json:"driver_version,omitempty"`
	CUDADriverVersion string      `json:"cuda_driver_version,omitempty"` // "12.4"
	NVMLVersion       string      `json:"nvml_version,omitempty"`
	Devices           []GPUDevice `json:"devices,omitempty"`
}

// GPUDevice is one device as NVML reports it.
type GPUDevice struct {
	Index             int    `json:"index"`
	Name              string `json:"name"`
	UUID              string `json:"uuid"`
	PCIBusID          string `json:"pci_bus_id"`
	MemoryTotal       uint64 `json:"memory_total_bytes"`
	MemoryUsed        uint64 `json:"memory_used_bytes"`
	ComputeCapability string `json:"compute_capability"`
	// PersistenceMode, ComputeMode and MIGMode are "" when NVML did not
	// say (not supported on the device).
	PersistenceMode string       `json:"persistence_mode,omitempty"` // "enabled", "disabled"
	ComputeMode     string       `json:"compute_mode,omitempty"`     // "default", "exclusive_process", "prohibited"
	MIGMode         string       `json:"mig_mode,omitempty"`         // "enabled", "disabled"
	MIGDevices      int          `json:"mig_devices,omitempty"`
	Processes       []GPUProcess `json:"processes,omitempty"`
	// MIGModePending is the MIG mode the GPU takes at its next reset
	// ("enabled", "disabled"): one that differs from MIGMode waits for a
	// GPU reset or a reboot. "" when NVML did not say. Added in minor 6.
	MIGModePending string `json:"mig_mode_pending,omitempty"`
	// GPUInstances are the MIG GPU instances, in the order of their
	// placements; read only while MIG mode is enabled. Added in minor 6.
	GPUInstances []GPUInstance `json:"gpu_instances,omitempty"`
}

// GPUInstance is a MIG GPU instance.
type GPUInstance struct {
	// ID is NVML's id of the instance on its GPU.
	ID uint32 `json:"id"`
	// ProfileID is NVML's GPU instance profile id, Profile its name
	// ("3g.40gb") from gpuenv's table of the GPU's model; "" for a model
	// the table lacks.
	ProfileID int    `json:"profile_id"`
	Profile   string `json:"profile,omitempty"`
	// Start and Size are its placement: the first memory slice it holds
	// and how many.
	Start uint32 `json:"placement_start"`
	Size  uint32 `json:"placement_size"`
	// Compute are its compute instances.
	Compute []ComputeInstance `json:"compute_instances,omitempty"`
}

// ComputeInstance is a compute instance of a GPU instance: a MIG device
// programs see.
type ComputeInstance struct {
	ID        uint32 `json:"id"`
	ProfileID int    `json:"profile_id"`
	// Slices is the number of the GPU instance's compute slices it has;
	// Profile names it as nvidia-smi does ("1c.3g.40gb", or the GPU
	// instance's own name when it has every slice).
	Slices  int    `json:"slices"`
	Profile string `json:"profile,omitempty"`
	// UUID is the MIG device's ("MIG-…"), which CUDA_VISIBLE_DEVICES
	// and container runtimes name it by.
	UUID string `json:"uuid,omitempty"`
	// MIGIndex is the MIG device's index on its GPU as NVML enumerates
	// MIG devices (nvmlDeviceGetMigDeviceHandleByIndex): the j of the
	// "i:j" that CDI specs and nvidia-smi name it by; -1 where NVML did
	// not list it. Added in minor 7: in a document of an older minor
	// every MIG device reads as 0, and the CDI spec made from it is
	// refused for naming a device twice.
	MIGIndex  int          `json:"mig_index"`
	Processes []GPUProcess `json:"processes,omitempty"`
}

// GPUProcess is a compute process running on a device.
type GPUProcess struct {
	PID        uint32 `json:"pid"`
	UsedMemory uint64 `json:"used_memory_bytes"`
	Name       string `json:"name,omitempty"`
}

// Driver is the installed driver as files show it, independent of NVML.
type Driver struct {
	// ModuleVersion is the loaded kernel module's version, from
	// /proc/driver/nvidia/version or /sys/module/nvidia/version; empty when
	// the module is not loaded.
	ModuleVersion string `json:"module_version,omitempty"`
	// ModuleVersionFrom names the file ModuleVersion was read from.
	ModuleVersionFrom string `json:"module_version_from,omitempty"`
	// ModuleFlavor is "open" or "proprietary" when it can be told.
	ModuleFlavor string `json:"module_flavor,omitempty"`
	// Libraries are the installed libnvidia-ml.so.<version> files; their
	// version is the userspace driver's. One that differs from
	// ModuleVersion is the "driver/library version mismatch" after an
	// upgrade without reboot.
	Libraries []Library `json:"libraries,omitempty"`
	// LibraryVersion is the version of the libnvidia-ml.so.1 the dynamic
	// loader finds first (through alternatives symlinks on Debian): the
	// library NVML tools run with.
	LibraryVersion string `json:"library_version,omitempty"`
}

// Library is a versioned shared library file.
type Library struct {
	Path    string `json:"path"`
	Version string `json:"version"`
}

// DeviceNode is one /dev/nvidia* node.
type DeviceNode struct {
	Path  string `json:"path"`
	Char  bool   `json:"char_device"`
	Major uint32 `json:"major"`
	Minor uint32 `json:"minor"`
	Mode  string `json:"mode"` // "0666"
	UID   uint32 `json:"uid"`
	GID   uint32 `json:"gid"`
	Group string `json:"group,omitempty"`
}
