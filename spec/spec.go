package spec

import (
	"slices"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/gpuenv/gpuenv/spec/lazyregexp"
	"github.com/gpuenv/gpuenv/spec/version"
)

// Spec is a loaded spec. A block that is nil or missing from a list is not
// managed: gpuenv never changes or removes what the spec does not name.
// Blocks and lists keep the order of the source files (sorted by name) and,
// within a file, the order of the text.
type Spec struct {
	// Files holds every file Load parsed, spec files and variable files, by
	// the name used in diagnostic ranges; pass it to
	// hcl.NewDiagnosticTextWriter to render diagnostics with source lines.
	Files map[string]*hcl.File
	// Paths lists the spec files that make up the spec, in reading order.
	Paths []string
	// Sources are the bytes Load read, spec files and var files, for a
	// saved plan to keep: loaded again from them (LoadOptions.Saved), the
	// spec is this one.
	Sources Sources

	Driver       *Driver
	CUDA         *CUDA
	CuDNN        *CuDNN
	Frameworks   []*Framework
	Repositories []*Repository
	Groups       []*Group
	Environment  *Environment
	// Teams are the team blocks: a CUDA_VISIBLE_DEVICES per Unix group.
	Teams   []*Team
	Devices []*Device
	// MIG are the mig blocks: MIG mode and layout by GPU selector.
	MIG []*MIG
	// ContainerToolkit is the host's container GPU support: NVIDIA's
	// container toolkit, the engines' runtime entries, the CDI spec.
	ContainerToolkit *ContainerToolkit

	Variables []*Variable
	// Locals holds the value of every local, by name.
	Locals map[string]cty.Value
}

// Block holds what every resource block has.
type Block struct {
	// DefRange covers the block's type and labels, the place a diagnostic
	// about the block as a whole points at.
	DefRange hcl.Range
	// Absent, when true, asks gpuenv to remove what the block describes.
	Absent Attr[bool]
}

// IsAbsent reports whether the block asks for removal.
func (b *Block) IsAbsent() bool {
	return b.Absent.Value
}

// Source says where packages come from.
type Source string

const (
	// SourceDistro is the distribution's own archive (Debian's nvidia-driver,
	// nvidia-cuda-toolkit, python3-torch).
	SourceDistro Source = "distro"
	// SourceNVIDIA is NVIDIA's CUDA package repository.
	SourceNVIDIA Source = "nvidia"
	// SourcePip is a Python package index.
	SourcePip Source = "pip"
)

// KernelModules is the kernel-module flavour of the driver.
type KernelModules string

const (
	// KernelModulesOpen is NVIDIA's open kernel modules (Turing and newer).
	KernelModulesOpen KernelModules = "open"
	// KernelModulesProprietary is the closed kernel modules (required before
	// Turing, unsupported on Blackwell and Grace Hopper).
	KernelModulesProprietary KernelModules = "proprietary"
	// KernelModulesNone installs the driver's userspace only: containers, or
	// hosts whose kernel module comes from elsewhere.
	KernelModulesNone KernelModules = "none"
)

// Driver is the driver block: the NVIDIA kernel driver and its userspace.
type Driver struct {
	Block
	Version       Attr[version.Constraint]
	KernelModules Attr[KernelModules]
	Source        Attr[Source]
	// PersistenceMode keeps the driver initialised while no client uses
	// the GPU (nvidia-persistenced).
	PersistenceMode  Attr[bool]
	BlacklistNouveau Attr[bool]
	// Hold protects the installed driver packages from upgrades that were
	// not planned, such as unattended-upgrades.
	Hold Attr[bool]
}

// CUDA is the cuda block: the CUDA toolkit.
type CUDA struct {
	Block
	Version Attr[version.Constraint]
	Source  Attr[Source]
	// Path is the toolkit's installation directory inside the root.
	Path Attr[string]
	// SetEnvironment puts the toolkit's bin directory on PATH for login
	// shells and its library directory into the dynamic linker's cache.
	SetEnvironment Attr[bool]
}

// CuDNN is the cudnn block.
type CuDNN struct {
	Block
	Version Attr[version.Constraint]
	Source  Attr[Source]
}

// FrameworkName names a machine-learning framework gpuenv knows.
type FrameworkName string

const (
	PyTorch    FrameworkName = "pytorch"
	TensorFlow FrameworkName = "tensorflow"
	JAX        FrameworkName = "jax"
)

// Framework is a framework block: one framework in one Python environment.
type Framework struct {
	Block
	Name      FrameworkName
	NameRange hcl.Range
	Version   Attr[version.Constraint]
	Source    Attr[Source]
	// Python is an existing virtual environment's interpreter.
	Python Attr[string]
	// Venv is a directory where gpuenv creates a virtual environment.
	Venv Attr[string]
	// CUDA is the CUDA version of the framework build to install, such as
	// 12.4 for PyTorch's cu124 wheels.
	CUDA     Attr[version.Version]
	IndexURL Attr[string]
	// Extras are the pip extras to install with the framework, such as
	// "and-cuda" for TensorFlow or "cuda12" for JAX.
	Extras Attr[[]string]
}

// EnvironmentKey identifies the Python environment the framework lives in:
// the interpreter or venv path, or "distro" for the system's packages. At
// most one framework block per name and key is allowed.
func (f *Framework) EnvironmentKey() string {
	switch {
	case f.Source.Value == SourceDistro:
		return string(SourceDistro)
	case f.Python.Set:
		// The interpreter of a virtual environment lives in its bin
		// directory, so python = "/opt/a/bin/python3" and venv = "/opt/a"
		// name the same environment.
		if m := venvInterpreter.FindStringSubmatch(f.Python.Value); m != nil {
			return "venv:" + m[1]
		}
		return "python:" + f.Python.Value
	case f.Venv.Set:
		return "venv:" + f.Venv.Value
	}
	return ""
}

var venvInterpreter = lazyregexp.New(`^(/.*)/bin/python[0-9.]*$`)

// Repository is a repository block: an APT package repository gpuenv
// configures.
type Repository struct {
	Block
	Name      string
	NameRange hcl.Range
	URL       Attr[string]
	// Keyring is the OpenPGP key that signs the repository: an absolute path
	// inside the root, or an https or file URL gpuenv fetches it from.
	Keyring Attr[string]
	// KeyFingerprint is the fingerprint of the one key the keyring must
	// hold, in upper-case hex without spaces: plan and apply refuse a
	// keyring that holds another key, or more keys than this one.
	KeyFingerprint Attr[string]
	Suites         Attr[[]string]
	Components     Attr[[]string]
	// Priority is the APT pin priority of packages from this repository.
	Priority Attr[int]
}

// Group is a group block: a Unix group and users that must be in it.
type Group struct {
	Block
	Name      string
	NameRange hcl.Range
	Members   Attr[[]string]
	// Exclusive removes users who are not listed in Members from the group.
	Exclusive Attr[bool]
}

// DeviceOrder is the order in which CUDA numbers devices.
type DeviceOrder string

const (
	DeviceOrderPCIBusID     DeviceOrder = "PCI_BUS_ID"
	DeviceOrderFastestFirst DeviceOrder = "FASTEST_FIRST"
)

// Environment is the environment block: variables gpuenv sets system-wide.
type Environment struct {
	Block
	// CUDAVisibleDevices entries are device indices, GPU-<uuid> or MIG
	// device identifiers, in the order CUDA numbers them; an empty list
	// hides every device.
	CUDAVisibleDevices Attr[[]string]
	CUDADeviceOrder    Attr[DeviceOrder]
	Variables          Attr[map[string]string]
}

// ComputeMode is a GPU's NVML compute mode.
type ComputeMode string

const (
	ComputeModeDefault          ComputeMode = "default"
	ComputeModeExclusiveProcess ComputeMode = "exclusive_process"
	ComputeModeProhibited       ComputeMode = "prohibited"
)

// Device is a device block: settings for the GPUs a selector picks.
type Device struct {
	Block
	// Selector is "all", a device index or a GPU-<uuid> as written.
	Selector      string
	SelectorRange hcl.Range
	ComputeMode   Attr[ComputeMode]
}

// Engine names a container engine whose GPU support gpuenv configures.
type Engine string

const (
	EngineDocker     Engine = "docker"
	EngineContainerd Engine = "containerd"
	EngineCRIO       Engine = "crio"
	// EnginePodman reads GPUs from the CDI spec and has no runtime entry.
	EnginePodman Engine = "podman"
)

// ContainerToolkit is the container_toolkit block: NVIDIA's container
// toolkit, the NVIDIA runtime in each engine's configuration, and the CDI
// spec that names the GPUs for engines that read one.
type ContainerToolkit struct {
	Block
	Version Attr[version.Constraint]
	// Engines are the engines whose configuration gains the NVIDIA
	// runtime (podman's needs none: it reads the CDI spec).
	Engines Attr[[]Engine]
	// CDI writes the CDI spec for every GPU, /etc/cdi/nvidia.yaml.
	CDI Attr[bool]
	// CDIManagement writes, with the CDI spec, the management spec that
	// gives a container every NVIDIA device node (management.nvidia.com/
	// gpu=all), for nvidia-smi, DCGM and MIG managers (on unless set to
	// false).
	CDIManagement Attr[bool]
	// DefaultRuntime makes the NVIDIA runtime the engines' default, as
	// nvidia-ctk runtime configure --set-as-default does.
	DefaultRuntime Attr[bool]
	// DevCharLinks makes the /dev/char links of the NVIDIA device nodes,
	// now and whenever the driver binds, so that containers keep their
	// GPUs when systemd reloads (on unless set to false).
	DevCharLinks Attr[bool]
}

// HasEngine reports whether the block configures engine e.
func (c *ContainerToolkit) HasEngine(e Engine) bool {
	return slices.Contains(c.Engines.Value, e)
}

// AllDevices is the selector that picks every GPU.
const AllDevices = "all"

// Variable is a declared input variable and the value it ended up with.
type Variable struct {
	Name        string
	DefRange    hcl.Range
	Type        cty.Type
	Default     cty.Value // cty.NilVal when the declaration has none
	Description string
	Value       cty.Value
	// ValueFrom says where Value came from.
	ValueFrom ValueSource
}

// ValueSource says where a variable's value came from, from weakest to
// strongest.
type ValueSource int

const (
	FromDefault ValueSource = iota
	FromEnvironment
	FromVarFile
	FromCommandLine
)

func (s ValueSource) String() string {
	switch s {
	case FromDefault:
		return "default"
	case FromEnvironment:
		return "environment"
	case FromVarFile:
		return "var-file"
	case FromCommandLine:
		return "command line"
	}
	return "unknown"
}
