package spec

import (
	"fmt"

	"github.com/gpuenv/gpuenv/spec/version"
)

// Every default of the spec language is here, so that code and the spec
// reference (docs/spec-reference.md, "Defaults") agree. A Spec keeps attributes the user left out unset; these are what the
// planner uses in their place when a block is managed. An attribute without
// an entry is left alone when unset.

const (
	// The sources of the driver, CUDA and cuDNN are inferred from the
	// host (what is installed, what its package indexes offer: the spec
	// reference, "Sources and branches"); these are the planner's when nothing on
	// the host can say, as for a block that removes.
	DefaultDriverSource    = SourceDistro
	DefaultCUDASource      = SourceDistro
	DefaultCuDNNSource     = SourceDistro
	DefaultFrameworkSource = SourcePip
	// DefaultPriority is APT's own priority for a repository without a pin.
	DefaultPriority = 500
	// DefaultIndexURL is PyPI's simple index.
	DefaultIndexURL = "https://pypi.org/simple"
)

// DefaultSuites makes a repository flat, the layout of NVIDIA's CUDA
// repository and of a directory prepared with dpkg-scanpackages.
var DefaultSuites = []string{"/"}

// Default documents one default.
type Default struct {
	Block, Attribute string
	// Value is the default as the spec reference shows it.
	Value string
	// HostDependent is true when the value depends on the host, which the
	// planner observes.
	HostDependent bool
}

// Defaults lists every default in the order the spec reference shows them.
func Defaults() []Default {
	return []Default{
		{"driver", "kernel_modules", "open for Turing and newer GPUs from driver branch 560; required on Blackwell and Grace Hopper; proprietary before Turing, for older branches, and on hosts that mix pre-Turing with newer GPUs", true},
		{"driver", "source", "the origin of the installed driver when it satisfies the spec; else distro when the distribution's archive offers a fitting version; else nvidia when NVIDIA's repository is configured", true},
		{"cuda", "source", "as the driver's", true},
		{"cuda", "path", "/usr/local/cuda-<major>.<minor> of the installed version for source = \"nvidia\"; /usr for source = \"distro\"", true},
		{"cuda", "set_environment", "false", false},
		{"cudnn", "source", "as the driver's", true},
		{"framework", "source", string(DefaultFrameworkSource), false},
		{"framework", "index_url", fmt.Sprintf("https://download.pytorch.org/whl/cu<major><minor> for pytorch with cuda set; otherwise %s", DefaultIndexURL), false},
		{"repository", "suites", `["/"]`, false},
		{"repository", "components", "[]", false},
		{"repository", "priority", fmt.Sprint(DefaultPriority), false},
		{"group", "exclusive", "false", false},
		{"container_toolkit", "engines", "[]", false},
		{"container_toolkit", "cdi", "true when engines lists \"podman\"; otherwise false", false},
		{"container_toolkit", "cdi_management", "true when the CDI spec is written (cdi)", false},
		{"every block", "absent", "false", false},
	}
}

// KernelModuleHost is what the default kernel-module flavour depends on.
type KernelModuleHost struct {
	// Branch is the major version of the driver to install, such as 550.
	Branch uint64
	// PreTuring is true when the host has a Maxwell, Pascal or Volta GPU,
	// which only the proprietary modules support.
	PreTuring bool
	// OpenOnly is true when the host has a GPU that only the open modules
	// support: Blackwell or Grace Hopper.
	OpenOnly bool
}

// DefaultKernelModules is the flavour gpuenv installs when the spec does not
// say. A host that has both PreTuring and OpenOnly GPUs can run neither
// flavour on all of them; the result is then open, and the planner reports
// the conflict.
func DefaultKernelModules(h KernelModuleHost) KernelModules {
	switch {
	case h.OpenOnly:
		return KernelModulesOpen
	case h.PreTuring:
		return KernelModulesProprietary
	case h.Branch >= 560:
		return KernelModulesOpen
	}
	return KernelModulesProprietary
}

// DefaultCUDAPath is where a toolkit of version v from source lives.
func DefaultCUDAPath(source Source, v version.Version) string {
	if source == SourceDistro {
		return "/usr"
	}
	return fmt.Sprintf("/usr/local/cuda-%d.%d", v.Major(), v.Minor())
}

// EffectiveIndexURL is the Python package index a framework installs from:
// the one the spec names, or PyTorch's index for the build's CUDA version,
// or PyPI.
func (f *Framework) EffectiveIndexURL() string {
	if f.IndexURL.Set {
		return f.IndexURL.Value
	}
	if f.Name == PyTorch && f.CUDA.Set {
		return fmt.Sprintf("https://download.pytorch.org/whl/cu%d%d", f.CUDA.Value.Major(), f.CUDA.Value.Minor())
	}
	return DefaultIndexURL
}
