package facts

// Health is what tells whether GPUs that are installed, configured and
// visible will hold up under load: the counters the driver keeps on each
// GPU (through NVML), the PCIe link each trained to (from sysfs, without
// NVML), GPUs the driver knows that the bus has lost, and the GPUs a
// verify passed on since. Reading it starts no work on a GPU. The Xid
// events are in Kernel.Log, joined to each GPU by its PCI address.
type Health struct {
	// GPUs are the NVIDIA GPUs on the PCI bus and those NVML lists, by
	// PCI address.
	GPUs []GPUHealth `json:"gpus"`
	// Missing are GPUs the driver lists (/proc/driver/nvidia/gpus) that
	// are gone from /sys/bus/pci/devices: fallen off the bus.
	Missing []string `json:"missing_from_bus,omitempty"`
	// BootID is the kernel's boot id (/proc/sys/kernel/random/boot_id):
	// a verify record of another boot says nothing of this one's Xids.
	BootID string `json:"boot_id,omitempty"`
	// Verified is the last verify's record, when there is one.
	Verified *VerifyRecord `json:"verified,omitempty"`
}

// GPUHealth is one GPU's health facts.
type GPUHealth struct {
	PCIAddress string `json:"pci_address"`
	// Index and UUID are NVML's, when NVML answered.
	Index *int   `json:"index,omitempty"`
	UUID  string `json:"uuid,omitempty"`
	Name  string `json:"name,omitempty"`
	// Link is the PCIe link from sysfs; nil when the device has none
	// (not PCIe, or the files are missing).
	Link *PCIeLink `json:"pcie_link,omitempty"`
	// NVML holds the driver's counters; nil when NVML did not answer.
	NVML *NVMLHealth `json:"nvml,omitempty"`
}

// PCIeLink is a device's link as the kernel reports it: what it trained
// to and the most it can do.
type PCIeLink struct {
	// Speeds as sysfs writes them ("16.0 GT/s PCIe"), and in GT/s.
	CurrentSpeed    string  `json:"current_speed"`
	MaxSpeed        string  `json:"max_speed"`
	CurrentSpeedGTs float64 `json:"current_speed_gts"`
	MaxSpeedGTs     float64 `json:"max_speed_gts"`
	CurrentWidth    int     `json:"current_width"`
	MaxWidth        int     `json:"max_width"`
}

// NVMLHealth are one GPU's health counters and states as NVML reports
// them. A field the GPU does not support stays at its zero value (nil for
// pointers), which is not a fault.
type NVMLHealth struct {
	// ECCMode is "enabled" or "disabled"; ECCPending the mode after the
	// next reset.
	ECCMode    string `json:"ecc_mode,omitempty"`
	ECCPending string `json:"ecc_pending_mode,omitempty"`
	// ECC errors since the driver loaded (volatile) and over the GPU's
	// life (aggregate).
	ECCVolatile  *ECCCounts `json:"ecc_volatile,omitempty"`
	ECCAggregate *ECCCounts `json:"ecc_aggregate,omitempty"`
	// RetiredPages is the page retirement of GPUs before Ampere.
	RetiredPages *RetiredPages `json:"retired_pages,omitempty"`
	// RowRemap is the row remapping of Ampere and later.
	RowRemap *RowRemap `json:"row_remapping,omitempty"`
	// ThrottleReasons are the clock event reasons now active, by name
	// ("hw_slowdown", "sw_thermal_slowdown"); ThrottleMask the raw mask.
	ThrottleReasons []string `json:"throttle_reasons,omitempty"`
	ThrottleMask    uint64   `json:"throttle_mask"`
	// Temperatures in °C; 0 where not reported.
	Temperature  int `json:"temperature_c,omitempty"`
	SlowdownTemp int `json:"slowdown_temperature_c,omitempty"`
	ShutdownTemp int `json:"shutdown_temperature_c,omitempty"`
	// Power in milliwatts.
	PowerUsage int `json:"power_usage_mw,omitempty"`
	PowerLimit int `json:"power_limit_mw,omitempty"`
	// NVLinks are the GPU's NVLinks that report a state.
	NVLinks []NVLinkHealth `json:"nvlinks,omitempty"`
	// PCIeReplays counts PCIe packets the GPU had to send again.
	PCIeReplays *uint64 `json:"pcie_replays,omitempty"`
	// RecoveryAction is what the driver says the GPU needs: "none",
	// "gpu_reset", "node_reboot", "drain_p2p", "drain_and_reset", or
	// "" where the driver does not say (before R565).
	RecoveryAction string `json:"recovery_action,omitempty"`
	// ResetRequired is set when a query answered that the GPU needs a
	// reset (ERROR_RESET_REQUIRED), or a reset is pending to finish a
	// remapping or retirement.
	ResetRequired bool `json:"reset_required"`
	// Lost is set when NVML answered ERROR_GPU_IS_LOST.
	Lost            bool   `json:"lost,omitempty"`
	PersistenceMode string `json:"persistence_mode,omitempty"`
	// Errors are queries that failed for a reason other than "not
	// supported".
	Errors []string `json:"errors,omitempty"`
}

// ECCCounts are corrected (single-bit) and uncorrected (double-bit)
// memory errors.
type ECCCounts struct {
	Corrected   uint64 `json:"corrected"`
	Uncorrected uint64 `json:"uncorrected"`
}

// RetiredPages are pages taken out of use after ECC errors.
type RetiredPages struct {
	SingleBit int `json:"single_bit"`
	DoubleBit int `json:"double_bit"`
	// Pending: a page waits for a reset to be retired.
	Pending bool `json:"pending"`
}

// RowRemap is row remapping's state.
type RowRemap struct {
	Corrected   int  `json:"corrected_rows"`
	Uncorrected int  `json:"uncorrected_rows"`
	Pending     bool `json:"pending"`
	Failure     bool `json:"failure"`
	// Histogram counts memory banks by how many spare rows they have
	// left: max, high, partial, low, none.
	Histogram *RowRemapHistogram `json:"histogram,omitempty"`
}

// RowRemapHistogram is NVML's row remapper histogram.
type RowRemapHistogram struct {
	Max     int `json:"max"`
	High    int `json:"high"`
	Partial int `json:"partial"`
	Low     int `json:"low"`
	None    int `json:"none"`
}

// NVLinkHealth is one NVLink.
type NVLinkHealth struct {
	Link  int    `json:"link"`
	State string `json:"state"` // "active", "inactive"
	// Version is the link's NVLink version ("4.0"), as NVML's
	// nvmlNvlinkVersion_t numbers them; "" where NVML does not say.
	Version string `json:"version,omitempty"`
	// Remote is the PCI address of what the link reaches and RemoteType
	// what that is: "gpu" (a bridge between two GPUs), "switch" (an
	// NVSwitch, which reaches every GPU of the board), "ibmnpu"; "" where
	// NVML does not say.
	Remote     string `json:"remote_pci_address,omitempty"`
	RemoteType string `json:"remote_type,omitempty"`
	Replay     uint64 `json:"replay_errors"`
	// Recovery counts link recoveries; CRCFlit and CRCData CRC errors.
	Recovery uint64 `json:"recovery_errors"`
	CRCFlit  uint64 `json:"crc_flit_errors"`
	CRCData  uint64 `json:"crc_data_errors"`
}

// VerifyRecord is what the last verify found on each GPU, kept so that a
// GPU failed by a transient fault is healthy again once a verify passes
// on it after the fault.
type VerifyRecord struct {
	// Time is when the verify ran, and BootID the boot it ran in.
	Time   string        `json:"time"`
	BootID string        `json:"boot_id"`
	GPUs   []VerifiedGPU `json:"gpus"`
}

// VerifiedGPU is one GPU's verify result.
type VerifiedGPU struct {
	UUID       string `json:"uuid"`
	PCIAddress string `json:"pci_address,omitempty"`
	Passed     bool   `json:"passed"`
	// Xids are the Xid events of this GPU the kernel log held when the
	// verify ran, code → count: those are older than the verify.
	Xids map[string]int `json:"xids,omitempty"`
}
