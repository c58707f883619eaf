package planner

import (
	"fmt"
	"strings"

	"github.com/gpuenv/gpuenv/planner/compat"
	"github.com/gpuenv/gpuenv/planner/compat/nvidiarepo"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/spec"
	"github.com/gpuenv/gpuenv/spec/version"
)

// Desired is the spec completed and resolved against the compatibility
// tables and the host, as Resolve returns it: what each managed resource
// must become. A nil field is a block the spec does not have, which no
// provider touches. Package versions that only the package manager can
// name (which 535 release the archive has) stay constraints here; the
// providers resolve them through Candidates when a change is needed.
type Desired struct {
	// GPUs are the host's NVIDIA GPUs as the tables know them, in PCI
	// order; empty on a host without one.
	GPUs []HostGPU

	Driver     *DesiredDriver
	CUDA       *DesiredCUDA
	CuDNN      *DesiredCuDNN
	Frameworks []*DesiredFramework

	// Components are the archive components of the distribution that the
	// spec's distro packages come from ("contrib", "non-free"), which must
	// be enabled in the host's package sources; sorted.
	Components []string

	// Manager is the host's package manager: "apt", "dnf", or "" when
	// gpuenv does not know the host's family.
	Manager plan.Manager

	// Inferred are the values Resolve completed, each with its table row.
	Inferred []plan.Inference

	// Archive is what the package indexes on disk offer, by source; nil
	// when the host has none of its package manager's (NewArchive).
	Archive *Archive

	// NoKernel says why the root's kernel is not this plan's to change
	// (a container's root, whose kernel and driver are the host's); empty
	// when it is. No provider plans a kernel-side step while it is set:
	// no module, DKMS build, headers, initramfs, blacklist or reload.
	NoKernel string

	// NVIDIARepository is NVIDIA's repository for the host that the plan
	// adds, because a block's packages come from it and no package source
	// of the host or repository block of the spec configures it; nil
	// when none is needed.
	NVIDIARepository *NVIDIARepository
}

// NVIDIARepository is NVIDIA's CUDA repository from gpuenv's table
// (nvidiarepo), added for the blocks For ("cuda", "cudnn").
type NVIDIARepository struct {
	nvidiarepo.Repository
	For []string
}

// PackageName is a package a resource installs, named by the package
// tables for the host's operating system and the resource's source.
type PackageName struct {
	Name string
	// Version is the version the tables derive from the request
	// ("12.4.1-1" for cuda-toolkit-12-4 and CUDA 12.4.1); empty when only
	// the archive can say.
	Version string
	// From is the table row that names it.
	From  string
	Notes string
	// row is the table row that names it.
	row compat.Source
}

// HostGPU is one GPU of the host with what the tables say about it.
type HostGPU struct {
	// Address is the PCI address ("0000:17:00.0").
	Address string
	// Index is NVML's index, or -1 when NVML did not see the GPU.
	Index int
	UUID  string
	Model string
	// Arch is the architecture's table name ("hopper"); empty when unknown.
	Arch string
	// CC is the compute capability; zero when unknown.
	CC version.Version
	// OpenRequired is true for GPUs only the open kernel modules drive.
	OpenRequired bool
	// Row is the GPU table's row, when the device id is in it.
	Row *compat.GPU
}

// Describe names the GPU for messages: "H100 SXM5 80GB (Hopper, compute
// capability 9.0) at 0000:17:00.0".
func (g HostGPU) Describe() string {
	var b strings.Builder
	b.WriteString(g.Model)
	var what []string
	if a, ok := compat.Arch(g.Arch); ok {
		what = append(what, a.Title)
	}
	if !g.CC.IsZero() {
		what = append(what, "compute capability "+g.CC.String())
	}
	if len(what) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(what, ", "))
	}
	if g.Address != "" {
		b.WriteString(" at " + g.Address)
	}
	return b.String()
}

// DesiredDriver is the driver block resolved.
type DesiredDriver struct {
	Block  *spec.Driver
	Absent bool
	Source spec.Source
	// Versions is what the installed driver must satisfy: the spec's
	// constraint narrowed by what the toolkit, the frameworks and the GPUs
	// need. The zero Constraint admits every version.
	Versions version.Constraint
	// Floor is the oldest driver the rest of the spec runs on, and FloorFor
	// says who needs it ("CUDA 12.4.0"); zero when nothing does.
	Floor    version.Version
	FloorFor string
	// Branches are the known driver branches Versions admits, oldest first.
	Branches []uint64
	// KernelModules is the flavour to install: the spec's, or the default
	// for the host's GPUs and the branch.
	KernelModules spec.KernelModules
	Hold          bool
	// PersistenceMode is managed when Set.
	PersistenceMode  spec.Attr[bool]
	BlacklistNouveau bool
	// Branch is the branch whose package names were chosen; zero when the
	// names are the repository's "latest" ones.
	Branch uint64
	// Packages are installed together at one version.
	Packages []PackageName
	// FromHost is set in a container when the driver is the host's: its
	// kernel module runs in the host's kernel and the NVIDIA Container
	// Toolkit mounts its libraries in, so no driver package is planned.
	FromHost bool
	// Signed are Ubuntu's signed prebuilt kernel modules, installed with
	// the driver instead of a DKMS build; nil when DKMS builds the module
	// (or the host is not Ubuntu, or the source is NVIDIA's).
	Signed *SignedModules
	// ModulesSeries is the driver series Ubuntu's module packages are
	// named by ("550-open"), and ModulesWhy says why the modules are
	// Signed or built by DKMS; both empty where the choice does not
	// arise.
	ModulesSeries string
	ModulesWhy    string

	// latestNames is set when the source's indexes offer the chosen
	// branch under the repository's latest names only.
	latestNames bool
}

// DesiredCUDA is the cuda block resolved.
type DesiredCUDA struct {
	Block  *spec.CUDA
	Absent bool
	Source spec.Source
	// Versions is the spec's constraint (zero when unset).
	Versions version.Constraint
	// Minor is the release line chosen ("12.4"): the package name depends
	// on it (cuda-toolkit-12-4).
	Minor version.Version
	// Release is the table row of the release the driver floor comes from:
	// the exact release the spec names, or the minor's first release.
	Release compat.CUDARelease
	// Path is where the toolkit lives inside the root.
	Path           string
	SetEnvironment bool
	Packages       []PackageName
}

// DesiredCuDNN is the cudnn block resolved.
type DesiredCuDNN struct {
	Block    *spec.CuDNN
	Absent   bool
	Source   spec.Source
	Versions version.Constraint
	// Major is the cuDNN major the constraint admits (9 for "9.*"); zero
	// when it admits several.
	Major uint64
	// CUDAMajor is the CUDA major of the build to install.
	CUDAMajor uint64
	// CUDA is the toolkit's release line when known: cuDNN 8's packages
	// carry it in their version (8.9.7.29-1+cuda12.2).
	CUDA     version.Version
	Packages []PackageName
}

// DesiredFramework is a framework block resolved to one exact build.
type DesiredFramework struct {
	Block *spec.Framework
	// Address is the step address: "framework.pytorch", with the
	// environment added when the spec has the framework more than once.
	Address string
	Name    spec.FrameworkName
	Absent  bool
	Source  spec.Source
	// Versions is the spec's constraint; an installed build that satisfies
	// it (and has the right CUDA build) needs no change.
	Versions version.Constraint
	// Package is what is installed: "torch", "tensorflow", "jax" from pip,
	// or the distribution's package ("python3-torch").
	Package string
	// Version is the exact version to pin for pip ("2.5.1+cu124"); zero
	// for a distribution package, whose version the package manager names.
	Version version.Version
	// Variant is PyTorch's wheel variant ("cu124"); CUDA the CUDA release
	// the build targets (zero for a CPU-only build).
	Variant string
	CUDA    version.Version
	Extras  []string
	// IndexURL is the index pip installs from.
	IndexURL string
	// Python is the interpreter pip runs with: the spec's, or the venv's
	// bin/python. Venv is set when gpuenv creates the environment, and
	// BasePython is the interpreter that creates it.
	Python     string
	Venv       string
	BasePython string
	// NeedsCuDNN is the cuDNN the build needs from the system (zero when
	// its wheels bring their own).
	NeedsCuDNN version.Version
}

// SystemPython is the interpreter that creates virtual environments.
const SystemPython = "/usr/bin/python3"
