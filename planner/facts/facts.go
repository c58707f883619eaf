package facts

import "github.com/gpuenv/gpuenv/planner/finding"

// SchemaVersion is the major version of the JSON document. Consumers
// refuse a document of another major version: its fields may have been
// renamed or removed.
const SchemaVersion = 1

// SchemaMinor counts the additions to major version SchemaVersion. A
// reader reads a document of any minor of its major: one of a lower minor
// lacks the facts added since (Additions), one of a higher minor has facts
// the reader ignores. Documents written before minors were counted carry
// no schema_minor, and read as minor 0.
const SchemaMinor = 9

// Observation is everything gpuenv knows about one host at one moment.
type Observation struct {
	// FormatVersion is gpuenv's one JSON format version (internal/
	// jsonformat), which every document carries: "3.0" and on. Observers
	// of schema minors 2 to 5 wrote "1.2" to "1.5" here, their schema
	// version and minor joined. Added in minor 2.
	FormatVersion string `json:"format_version,omitempty"`
	SchemaVersion int    `json:"schema_version"`
	SchemaMinor   int    `json:"schema_minor"`
	// Hostname is the host's name: the kernel's for the running system,
	// else the root's /etc/hostname; "" when neither says. Added in
	// minor 1.
	Hostname string `json:"hostname"`
	Root     string `json:"root"`

	OS          OS           `json:"os"`
	Kernel      Kernel       `json:"kernel"`
	Init        Init         `json:"init"`
	PCI         []PCIDevice  `json:"pci_gpus"`
	NVML        NVML         `json:"nvml"`
	Driver      Driver       `json:"driver"`
	DeviceNodes []DeviceNode `json:"device_nodes"`
	// Fabric is the NVSwitches and the Fabric Manager. Added in minor 2.
	Fabric Fabric `json:"fabric"`

	Packages     Packages     `json:"packages"`
	Repositories []Repository `json:"repositories"`
	// RepositoryFiles are gpuenv's own source files and the keyrings.
	RepositoryFiles RepositoryFiles `json:"repository_files"`
	CUDA            CUDA            `json:"cuda"`
	CuDNN           CuDNN           `json:"cudnn"`
	Python          []PythonEnv     `json:"python_environments"`
	Groups          []Group         `json:"groups"`
	Environment     Environment     `json:"environment"`
	// Session is the invoking user's and a job's environment. Added in
	// minor 2.
	Session Session `json:"session"`
	// DeviceAccess is what keeps a container's GPUs reachable after it
	// started. Added in minor 2.
	DeviceAccess DeviceAccess `json:"device_access"`
	// Units are the systemd units gpuenv enables or writes: the
	// persistence daemon, the compute modes' boot-time unit.
	Units []Unit `json:"units"`
	// Containers are the container toolkit, the engines' configuration
	// and the CDI specs.
	Containers Containers `json:"containers"`

	// PackageIndexes are the indexes of the package sources on disk and
	// the GPU-relevant packages they offer.
	PackageIndexes PackageIndexes `json:"package_indexes"`

	// Context is where programs on the root run: host, container, WSL,
	// batch job.
	Context RuntimeContext `json:"context"`
	// Loader is which library file each GPU program loads.
	Loader Loader `json:"loader"`
	// Health is each GPU's health counters, PCIe link and the last
	// verify. Added in minor 3.
	Health Health `json:"health"`

	// Problems are what the observation shows to be wrong with the GPU
	// stack as it stands, each found from facts above: a driver/library
	// version mismatch, a GPU bound to nouveau, an nvidia module missing
	// for the running kernel. Each is a finding of stage observe, with
	// status problem and the layer (the section above) it concerns.
	Problems finding.Problems `json:"problems"`
	Warnings []Warning        `json:"warnings"`

	// Predicted is set on an observation that was not read from the host
	// but predicted from it: the host as a plan's steps leave it
	// (providers.EndState). It is never written out.
	Predicted *Prediction `json:"-"`
}

// Prediction says what of the live state a plan's steps reset, so that
// what the observation still holds of it (read before the steps) is not
// judged as the host's after apply.
type Prediction struct {
	// Reboot: the plan ends in a reboot, which empties the kernel log,
	// makes /dev afresh and resets every GPU.
	Reboot bool
	// ModuleReload: a step loads the nvidia module anew (an install, an
	// upgrade, a reload), which resets NVML's volatile counters, ends
	// every GPU process and makes the device nodes the driver makes.
	ModuleReload bool
	// Packages: a step installs, upgrades or removes the system's
	// packages, whose maintainer scripts build kernel modules (DKMS),
	// rebuild the initramfs and leave the package database's states as
	// they finish.
	Packages bool
}

// Warning is a problem met while observing: a file that could not be read or
// parsed. Observation goes on after a warning; the fact it concerns is left
// at its zero value.
type Warning struct {
	// Path is the file concerned, inside the root, when there is one.
	Path    string `json:"path,omitempty"`
	Message string `json:"message"`
}
