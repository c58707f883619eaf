// Package kind is how a package under providers/ describes itself, once:
// the kind of resource it plans, with the layer and the fact sections of
// each of its steps, and the observers that read the host for it, with
// the sections of the observation each reads and writes. The providers
// package runs the observers in the order those sections give and hands
// the planners to the planner; nothing else lists the packages.
package kind

import (
	"context"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/host"
)

// Descriptor describes one package of providers/.
type Descriptor struct {
	// Name is the kind's: the first word of its steps' addresses
	// ("driver"). A package that plans nothing is named for what it
	// observes ("kernellog").
	Name string
	// Steps place the kind's steps in the stack's order and name the
	// facts each is decided from (planner.StepKind); none for a package
	// that plans nothing.
	Steps []planner.StepKind
	// Planner plans the kind's resources; nil for a package that plans
	// nothing.
	Planner Planner
	// Observers read the host for the kind, or for what the package
	// observes; none for a kind decided from others' facts alone.
	Observers []Observer
}

// Planner is what plans one kind of resource (planner.Provider's Plan).
type Planner interface {
	Plan(ctx context.Context, req *planner.Request) *planner.Response
}

// Provider returns d as the planner's provider of its kind, or nil when
// d plans nothing.
func (d *Descriptor) Provider() planner.Provider {
	if d.Planner == nil {
		return nil
	}
	return provider{d}
}

type provider struct{ d *Descriptor }

func (p provider) Name() string              { return p.d.Name }
func (p provider) Steps() []planner.StepKind { return p.d.Steps }
func (p provider) Plan(ctx context.Context, req *planner.Request) *planner.Response {
	return p.d.Planner.Plan(ctx, req)
}

// Sections of the observation that observers read and write, named as
// its JSON document names them. A section may have several writers: one
// that also reads it completes what the others wrote, after them.
const (
	OS              = "os"
	Kernel          = "kernel"
	KernelLog       = "kernel.log"
	Init            = "init"
	PCI             = "pci_gpus"
	NVML            = "nvml"
	Driver          = "driver"
	DeviceNodes     = "device_nodes"
	Fabric          = "fabric"
	Packages        = "packages"
	Repositories    = "repositories"
	RepositoryFiles = "repository_files"
	PackageIndexes  = "package_indexes"
	CUDA            = "cuda"
	CuDNN           = "cudnn"
	Python          = "python_environments"
	Groups          = "groups"
	Environment     = "environment"
	Session         = "session"
	Units           = "units"
	Containers      = "containers"
	Context         = "context"
	DeviceAccess    = "device_access"
	Loader          = "loader"
	Health          = "health"
)

// Options are what an observation needs besides the host.
type Options struct {
	// Pythons are interpreters, as paths inside the root, whose
	// environments are observed besides the system's: --python and the
	// spec's.
	Pythons []string
	// NVML replaces the host's own (host.Host.NVML); tests hand in
	// go-nvml's mock through host.NewNVML. Nil: the host's.
	NVML host.NVML
	// Programs are native programs, as paths inside the root, whose
	// libraries the loader model resolves (doctor --program).
	Programs []string
	// Session holds variables of the environment gpuenv was started
	// from; the loader model adds its LD_LIBRARY_PATH. Leave it empty
	// when the root is not this machine's.
	Session []facts.Assignment
	// Home is the invoking user's home directory inside the root, whose
	// shell start-up files are read; "" for none.
	Home string
	// PID names a running process whose environment (/proc/PID/environ)
	// is the one its GPU programs run in (doctor --pid); 0 for none.
	PID int
}

// Input is what every observer is given besides the observation: the
// host, and the options of this observation with the NVML to ask.
type Input struct {
	Host    *host.Host
	NVML    host.NVML
	Options Options
}

// Observer reads one part of the host into the observation: it fills
// the sections Writes names from the host and from the sections Reads
// names, which every writer of them has filled before it runs, and
// returns a warning for each thing it could not read. Warnings are
// appended in the order observers run; problems are no observer's: they
// are doctor's, judged once every observer has run.
type Observer struct {
	// Name is the descriptor's, or the descriptor's with what this one
	// observes ("driver.fabric"), for messages.
	Name    string
	Reads   []string
	Writes  []string
	Observe func(ctx context.Context, in Input, obs *facts.Observation) []facts.Warning
	// Predict changes the sections Writes names into what Observe would
	// read once the steps are applied (and the host rebooted where they
	// say it must be), from the steps' operations and the sections Reads
	// names, already predicted; end.Predicted says whether the steps
	// reboot, reload the module or change packages. Nil: the steps
	// change nothing this observer reads, or nothing that can be known
	// before apply, and its sections stay as observed. It must not change slices it did not
	// allocate: end shares them with the observation.
	Predict func(end *facts.Observation, steps []plan.Step)
}
