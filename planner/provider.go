package planner

import (
	"context"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/finding"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/spec"
)

// Provider turns the desired and observed state of one kind of resource
// (the driver, CUDA, groups …) into steps. It is the only thing the planner
// needs from a provider package.
//
// The contract:
//   - Plan never changes the host and starts no process of its own; the
//     only questions it may ask the host beyond req.Facts go through
//     req.Candidates, and only for a resource that has to change, so that a
//     host that already matches plans without starting a process.
//   - Plan reads no file: what a step is decided from (the bytes of a file
//     it rewrites, as a digest; a unit's enablement) is in req.Facts, so
//     that a saved plan's fingerprint sees it change. A provider that needs
//     more observes it, and the fingerprint's sections cover it.
//   - A resource that already matches the spec yields no step: after an
//     apply, observing again and planning again gives no steps for it.
//   - A resource the spec does not name is left alone: no step.
//   - Steps are data (see Step); each has a unique address that starts
//     with the provider's kind and that Steps describes, an Action
//     other than NoOp, and the operations that carry it out, in order.
//   - DependsOn may name steps of other providers. A dependency on a step
//     that is not in the plan is met (its resource already matches).
//   - Problems that make the spec impossible on this host are error
//     diagnostics with the spec's ranges, and every one is reported, not
//     only the first. Steps returned alongside errors are discarded.
//   - Plan honours ctx: when it is cancelled, Plan returns promptly with
//     an error diagnostic.
//
// The planner calls providers one at a time, in the order given to New; a
// provider need not be safe for concurrent use.
type Provider interface {
	// Name is the provider's kind, as in "driver": the first word of its
	// steps' addresses, and its name in messages.
	Name() string
	// Steps describes the provider's steps by address: the layer each
	// goes in and the sections of the facts it is decided from. Every step
	// Plan returns has an address of the provider's kind that they place.
	Steps() []StepKind
	Plan(ctx context.Context, req *Request) *Response
}

// Request is what a provider plans from. Every provider of one plan gets
// the same values; it must not modify them.
type Request struct {
	Spec  *spec.Spec
	Facts *facts.Observation
	// Desired are the spec's values completed and resolved against the
	// compatibility tables and the host: concrete versions, package names,
	// the kernel-module flavour. Nil when the planner has no resolver.
	Desired *Desired
	// Candidates asks the package manager which versions it can install.
	// Never nil.
	Candidates Candidates
	// InterruptGPUProcesses allows a step to stop the GPU processes that
	// keep the nvidia modules from being reloaded
	// (--interrupt-gpu-processes).
	InterruptGPUProcesses bool
	// Replace are the addresses -replace names: a provider reinstalls the
	// resource at such an address at its installed versions when nothing
	// else about it changes (Replacing).
	Replace []string
}

// Response is what a provider returns; nil is the same as an empty one.
type Response struct {
	// Steps are the changes for the provider's resources, in no particular
	// order: the planner orders every provider's steps together.
	Steps []plan.Step
	// Inferred are values the spec left out that the provider completed.
	Inferred []plan.Inference
	Warnings []finding.Finding
	// Diagnostics report specs that cannot work on this host.
	Diagnostics hcl.Diagnostics
}

// Candidates answers which versions of a package the host's package
// manager can install. Implementations answer from the package indexes on
// disk (IndexCandidates), or run the manager's query (apt-cache policy,
// dnf --showduplicates) inside the root, and may cache the answer for the
// life of one plan.
type Candidates interface {
	// Versions lists the versions of package name that manager ("apt",
	// "dnf") can install, newest first, written as the manager writes
	// them. A package the manager does not know has no versions and no
	// error; an error means the manager could not be asked.
	Versions(ctx context.Context, manager plan.Manager, name string) ([]string, error)
}

// NoCandidates is a Candidates that knows no package: for roots where no
// package manager can be asked, and for tests.
type NoCandidates struct{}

// Versions returns nothing.
func (NoCandidates) Versions(context.Context, plan.Manager, string) ([]string, error) {
	return nil, nil
}

var _ Candidates = NoCandidates{}
