package facts

import "fmt"

// Containers are the host's container GPU support: NVIDIA's container
// toolkit, the engines' configuration files, and the CDI specs that name
// the GPUs.
type Containers struct {
	Toolkit ContainerToolkit `json:"toolkit"`
	// Engines are the engines' configuration files, each whether or not
	// it exists, in the order of EngineConfigPaths.
	Engines []EngineConfig `json:"engines"`
	// CDISpecs are the CDI specs that name nvidia.com devices, in
	// /etc/cdi and /var/run/cdi, by path.
	CDISpecs []CDISpec `json:"cdi_specs"`
	// CDIInUse is the path of the spec engines use for nvidia.com/gpu:
	// the one in the directory of highest priority (/var/run/cdi outranks
	// /etc/cdi, as the CDI project's default cache orders them); "" when
	// there is none.
	CDIInUse string `json:"cdi_in_use,omitempty"`
	// GPUs are the GPUs the driver's /proc files list, in PCI bus order,
	// which is NVML's and CUDA's default numbering: a CDI spec is made
	// from them rather than from NVML, which after a driver upgrade
	// refuses to start until the reboot (only a GPU's MIG devices come
	// from NVML, where it answers).
	GPUs []ContainerGPU `json:"gpus,omitempty"`
	// DriverFiles are the driver's files a container needs (its
	// libraries of the installed version, its GSP firmware, nvidia-smi
	// and the other tools), as the package database lists them.
	DriverFiles []string `json:"driver_files,omitempty"`
	// DriverVersion is the version of those files.
	DriverVersion string `json:"driver_version,omitempty"`
	// DevCharRules are the udev rules named 71-nvidia-dev-char.rules
	// that exist, in /etc/udev/rules.d, /usr/lib/udev/rules.d and
	// /lib/udev/rules.d, by digest: the rule NVIDIA's container toolkit
	// documentation gives to make the /dev/char links when the driver
	// binds.
	DevCharRules []FileDigest `json:"dev_char_rules,omitempty"`
	// MIGMinors are the driver's MIG capabilities and the minor number
	// of the /dev/nvidia-caps/nvidia-cap<minor> node that grants each,
	// as /proc/driver/nvidia-caps/mig-minors lists them ("config",
	// "monitor", "gpu0/gi1/access", "gpu0/gi1/ci0/access"): a container
	// given a MIG device needs the nodes of its GPU and compute
	// instance. Absent where the driver has no MIG support. Added in
	// minor 7.
	MIGMinors []MIGMinor `json:"mig_minors,omitempty"`
}

// MIGManagementCapabilities are the MIG capabilities a MIG manager
// opens to create and list instances (NVIDIA's MIG user guide, "Device
// Nodes and Capabilities": mig/config and mig/monitor).
var MIGManagementCapabilities = []string{"config", "monitor"}

// MIGCapabilityNode is the /dev/nvidia-caps node of a MIG capability the
// driver lists in mig-minors (nvidia-cap<minor>, the guide's "/dev based
// nvidia-capabilities"); ok is false where it lists none.
func (c *Containers) MIGCapabilityNode(capability string) (node string, ok bool) {
	for _, m := range c.MIGMinors {
		if m.Capability == capability {
			return fmt.Sprintf("/dev/nvidia-caps/nvidia-cap%d", m.Minor), true
		}
	}
	return "", false
}

// MIGMinor is one line of /proc/driver/nvidia-caps/mig-minors.
type MIGMinor struct {
	Capability string `json:"capability"`
	Minor      int    `json:"minor"`
}

// ContainerGPU is one GPU as /proc/driver/nvidia/gpus/<bus>/information
// describes it.
type ContainerGPU struct {
	Index    int    `json:"index"`
	Minor    int    `json:"minor"`
	UUID     string `json:"uuid"`
	PCIBusID string `json:"pci_bus_id"`
}

// ContainerToolkit is the toolkit as the package database and its files
// show it.
type ContainerToolkit struct {
	// Version is nvidia-container-toolkit's upstream version ("1.17.8"),
	// "" when it is not installed.
	Version string `json:"version,omitempty"`
	// Packages are the toolkit's installed packages, by name, with the
	// versions the database records.
	Packages []Package `json:"packages,omitempty"`
	// Hooks are the CDI hooks the installed nvidia-cdi-hook (or, before
	// 1.17, nvidia-ctk hook) provides, such as "update-ldcache",
	// "create-symlinks", "enable-cuda-compat".
	Hooks []string `json:"hooks,omitempty"`
	// HookPath is the executable a CDI spec names for its hooks.
	HookPath string `json:"hook_path,omitempty"`
}

// EngineConfig is one engine's configuration file.
type EngineConfig struct {
	// Engine is "docker", "containerd" or "crio".
	Engine string `json:"engine"`
	// Path is inside the root.
	Path   string `json:"path"`
	Exists bool   `json:"exists"`
	// SHA256 is the digest of its bytes, as FileDigest has it.
	SHA256 string `json:"sha256,omitempty"`
	// Mode (permission bits, setuid, setgid and sticky included), UID
	// and GID are the file's, symlinks followed: a merge keeps them, for
	// the file is the administrator's and may hold secrets (a
	// registry's password).
	Mode uint32 `json:"mode,omitempty"`
	UID  int    `json:"uid,omitempty"`
	GID  int    `json:"gid,omitempty"`
	// Content is the file's text, which a plan merges the runtime entry
	// into; configuration files are small.
	Content string `json:"content,omitempty"`
	// Version is containerd's configuration version (2 or 3; 1 when the
	// file says none, as containerd reads it).
	Version int `json:"version,omitempty"`
	// NVIDIARuntime is true when the file names the nvidia runtime.
	NVIDIARuntime bool `json:"nvidia_runtime"`
	// DefaultRuntime is the runtime the file makes the default, if any.
	DefaultRuntime string `json:"default_runtime,omitempty"`
	// Error is why the file could not be parsed; a plan does not rewrite
	// a file it cannot read.
	Error string `json:"error,omitempty"`
}

// CDISpec is one CDI spec for nvidia.com (or management.nvidia.com)
// devices.
type CDISpec struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	// Kind is the spec's vendor/class ("nvidia.com/gpu").
	Kind string `json:"kind"`
	// Devices are the device names it declares ("0", "GPU-…", "all").
	Devices []string `json:"devices,omitempty"`
	// DeviceNodes are the host's device nodes it names, each once, in
	// the spec's order. Added in minor 9, with the management specs
	// (management.nvidia.com/gpu) among the specs read.
	DeviceNodes []string `json:"device_nodes,omitempty"`
	// DriverVersion is the driver version its library paths name
	// (libcuda.so.<version>), "" when none does.
	DriverVersion string `json:"driver_version,omitempty"`
	// Missing are the host paths it names that do not exist.
	Missing []string `json:"missing,omitempty"`
	// Hooks are the hook names it runs.
	Hooks []string `json:"hooks,omitempty"`
	// Error is why it could not be parsed.
	Error string `json:"error,omitempty"`
}
