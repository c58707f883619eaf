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
