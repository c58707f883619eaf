package facts

// KernelLog is what the kernel said about the NVIDIA GPUs and driver in
// the boot the log last records: the running one on a live host. The
// driver names there why it refused a GPU, which no file under /sys or
// /proc says.
type KernelLog struct {
	// Sources are the logs read, in the order they were read.
	Sources []KernelLogSource `json:"sources"`
	// Module is the nvidia module the log shows loading in that boot,
	// when it does: its flavour and version even where the module is no
	// longer loaded (a probe that failed unloads it).
	Module *KernelLogModule `json:"module,omitempty"`
	// Events are the driver's messages that matter for diagnosis, oldest
	// first; a message repeated for the same GPU is one event with a
	// count.
	Events []KernelEvent `json:"events"`
}

// KernelLogSource is one log read.
type KernelLogSource struct {
	// Path is the file inside the root ("/dev/kmsg", "/var/log/kern.log",
	// "/var/log/journal"), the journal's directory when it was read with
	// journalctl.
	Path string `json:"path"`
	// Bytes is how much of it was scanned, from its end.
	Bytes int64 `json:"bytes_read"`
	// BootStart tells whether the start of the boot was found in it: a
	// log that starts after the boot began (rotated) or whose boot is
	// larger than the bound holds only its end.
	BootStart bool `json:"boot_start_found"`
	// Truncated is set when the scan stopped at its bound in bytes,
	// lines or time before it reached the start of the boot.
	Truncated bool `json:"truncated,omitempty"`
	// Error says why the log could not be read, when it could not.
	Error string `json:"error,omitempty"`
}

// KernelLogModule is the "NVRM: loading NVIDIA UNIX ... Kernel Module"
// line.
type KernelLogModule struct {
	Version string `json:"version"`
	// Flavor is "open" or "proprietary".
	Flavor string `json:"flavor"`
	Source string `json:"source"`
}

// The kinds of kernel events.
const (
	// The GPU needs the open modules (Blackwell and later) and the
	// proprietary ones were loaded.
	EventOpenModulesRequired = "open_modules_required"
	// The GPU has no GSP (before Turing) and the open modules were
	// loaded.
	EventGSPRequired = "gsp_required"
	// A branch that dropped the GPU's generation: "supported through the
	// NVIDIA NNN.xx Legacy drivers ... will ignore this GPU".
	EventLegacyGPU = "legacy_gpu"
	// "is not supported by the NVIDIA NNN driver release": a GPU too new
	// or too old for the driver.
	EventUnsupportedGPU = "unsupported_gpu"
	// "is already bound to NovaCore": the in-tree nova driver holds it.
	EventBoundToNova = "bound_to_nova"
	// "RmInitAdapter failed! (code)": the driver could not initialise
	// the GPU.
	EventRmInitFailed = "rm_init_failed"
	// "RmInitAdapter: Cannot initialize GSP firmware RM": the GPU
	// System Processor's firmware did not start.
	EventGSPInitFailed = "gsp_init_failed"
	// An Xid: an error the driver reports for a GPU while it runs.
	EventXid = "xid"
)

// KernelEvent is one of the driver's messages.
type KernelEvent struct {
	Kind string `json:"kind"`
	// PCIAddress is the GPU's address as the message gives it
	// ("0000:02:00.0"), normalised to the domain:bus:device.function
	// form; "" when the message names none.
	PCIAddress string `json:"pci_address,omitempty"`
	// PCIID is "10de:2c58" when the message gives it.
	PCIID string `json:"pci_id,omitempty"`
	// GPUName is the product name the message gives instead of an
	// address (legacy_gpu).
	GPUName string `json:"gpu_name,omitempty"`
	// Driver is the driver release the message names: the one that
	// refused the GPU ("595.71.05"; "470.256.02").
	Driver string `json:"driver,omitempty"`
	// Branch is the legacy branch the message sends the GPU to ("580").
	Branch string `json:"branch,omitempty"`
	// Code is RmInitAdapter's code ("0x22:0x56:884") or the Xid number
	// ("79"), with Detail the rest of an Xid's line.
	Code   string `json:"code,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Message is the message as logged, whitespace collapsed, bounded.
	Message string `json:"message"`
	Source  string `json:"source"`
	// Count is how many times the boot logged it.
	Count int `json:"count"`
}
