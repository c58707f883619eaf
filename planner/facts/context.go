package facts

// RuntimeContext is where programs on the root run: a bare host, a
// container (and whether it was given the GPUs), a user namespace, a
// batch job, WSL. Each fact names the files it was read from.
type RuntimeContext struct {
	// Kind is "host", "container" or "wsl".
	Kind string `json:"kind"`
	// Container is set when the root is a container's.
	Container *Container `json:"container,omitempty"`
	// UserNamespace is set when the root's processes run in a user
	// namespace that does not map the host's ids one to one.
	UserNamespace *UserNamespace `json:"user_namespace,omitempty"`
	// Job is set inside a batch scheduler's job.
	Job *BatchJob `json:"job,omitempty"`
	// WSL is set under Windows Subsystem for Linux.
	WSL *WSL `json:"wsl,omitempty"`
	// Suspend is the driver's support for suspend and resume.
	Suspend *Suspend `json:"suspend,omitempty"`
	// Evidence lists every file looked at and what it said.
	Evidence []ContextEvidence `json:"evidence"`
}

// ContextEvidence is one fact the context was told from.
type ContextEvidence struct {
	File string `json:"file"`
	Fact string `json:"fact"`
}

// Container describes a container root.
type Container struct {
	// Engine is "docker", "podman", "kubernetes", "containerd", "lxc",
	// "systemd-nspawn", another name a container manager gives itself
	// (/run/systemd/container, process 1's container=), or "unknown".
	Engine string `json:"engine"`
	// Rootless is true when /run/.containerenv says so.
	Rootless bool `json:"rootless,omitempty"`
	// OverlayRoot is true when / is an overlay mount.
	OverlayRoot bool `json:"overlay_root,omitempty"`
	// DeviceNodes and DriverLibraries say whether the GPU reached the
	// container: /dev/nvidia* nodes, and the driver's libcuda.so.1 mounted
	// in (the compute capability; libnvidia-ml alone is "utility").
	DeviceNodes     bool `json:"device_nodes"`
	DriverLibraries bool `json:"driver_libraries"`
	// CUDAVersion is the image's CUDA (its CUDA_VERSION or the
	// toolkit's), and RequireCUDA the NVIDIA_REQUIRE_CUDA constraint the
	// image declares.
	CUDAVersion string `json:"cuda_version,omitempty"`
	RequireCUDA string `json:"require_cuda,omitempty"`
}

// UserNamespace describes the mapping of a user namespace.
type UserNamespace struct {
	// UIDMap is /proc/self/uid_map's first line.
	UIDMap string `json:"uid_map"`
	// OverflowUID is the id unmapped owners appear as (65534).
	OverflowUID uint32 `json:"overflow_uid"`
	// UnmappedNodes are device nodes whose owner or group is the overflow
	// id: the host's owner is not mapped.
	UnmappedNodes []string `json:"unmapped_nodes,omitempty"`
}

// BatchJob is the job of a batch scheduler a process runs in.
type BatchJob struct {
	Scheduler string `json:"scheduler"` // "slurm"
	ID        string `json:"id"`
	// GPUs are the GPUs the scheduler allocated (SLURM_JOB_GPUS,
	// SLURM_STEP_GPUS, or the CUDA_VISIBLE_DEVICES it set); empty when
	// none.
	GPUs []string `json:"gpus"`
	// NodeGPUs are the GPUs the node's scheduler configuration declares
	// (gres.conf), when readable.
	NodeGPUs []string `json:"node_gpus,omitempty"`
	// Constrained is true when the job's device cgroup admits no
	// /dev/nvidia* node of a GPU (cgroup v1 devices.list).
	Constrained bool `json:"constrained,omitempty"`
}

// WSL describes Windows Subsystem for Linux.
type WSL struct {
	// DXG is true when /dev/dxg, the Windows GPU's paravirtual device,
	// exists.
	DXG bool `json:"dxg"`
	// Libraries are the Windows driver's CUDA libraries in
	// /usr/lib/wsl/lib.
	Libraries []string `json:"libraries,omitempty"`
	// LinuxDriver are libcuda files of a Linux driver installed inside
	// WSL, which must not be there.
	LinuxDriver []string `json:"linux_driver,omitempty"`
}

// Suspend is the NVIDIA driver's suspend and resume support.
type Suspend struct {
	// CanSuspend is true when the kernel offers suspend to memory.
	CanSuspend bool `json:"can_suspend"`
	// PreserveVideoMemory is NVreg_PreserveVideoMemoryAllocations as the
	// loaded module reports it (or modprobe configuration sets it): "1",
	// "0" or "" when unknown.
	PreserveVideoMemory string `json:"preserve_video_memory,omitempty"`
	// Services are the driver's nvidia-suspend, -hibernate and -resume
	// units that are enabled.
	Services []string `json:"services,omitempty"`
	// Resumes counts the resumes since boot (successful suspends): with
	// the driver's suspend support off, CUDA is broken now, not later.
	Resumes int `json:"resumes_since_boot,omitempty"`
}
