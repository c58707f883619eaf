package facts

// DeviceAccess is what decides whether a container keeps its GPUs after
// it started: the /dev/char links runc needs to name the NVIDIA device
// nodes when systemd rewrites a container's device rules, the engines'
// cgroup drivers, and, inside a container, the device cgroup's rules.
type DeviceAccess struct {
	// CharLinks are the NVIDIA device nodes' /dev/char/MAJOR:MINOR links;
	// MissingCharLinks the nodes that have none.
	CharLinks        []string `json:"char_links"`
	MissingCharLinks []string `json:"missing_char_links"`
	// CgroupDrivers are the engines' cgroup drivers as their
	// configuration says, and those of the kubelet and CRI-O (engine
	// "kubelet", "cri-o") where a node has them.
	CgroupDrivers []CgroupDriver `json:"cgroup_drivers"`
	// CgroupVersion is "v1" or "v2" (/sys/fs/cgroup's layout), "" when
	// neither shows.
	CgroupVersion string `json:"cgroup_version,omitempty"`
	// DeviceRules are the rules of the cgroup v1 devices.list this
	// process is in (inside a container, the container's); under cgroup
	// v2 device access is an eBPF program that cannot be read back.
	DeviceRules     []string `json:"device_rules,omitempty"`
	DeviceRulesFile string   `json:"device_rules_file,omitempty"`
}

// CgroupDriver is one engine's cgroup driver.
type CgroupDriver struct {
	Engine string `json:"engine"`
	// Driver is "systemd" or "cgroupfs"; Default is true when the file
	// does not choose and the engine's default for the cgroup version
	// applies.
	Driver  string `json:"driver"`
	Default bool   `json:"default,omitempty"`
	File    string `json:"file"`
}
