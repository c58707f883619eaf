package cudnn

import (
	"context"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/kind"
)

// Kind describes, once, cuDNN: the layer of each step and the facts it is
// decided from, the planner, and the observers.
var Kind = &kind.Descriptor{
	Name: "cudnn",
	Steps: []planner.StepKind{
		{Layer: planner.LayerCuDNN, Sections: []string{planner.FactsOS, planner.FactsPackages, planner.FactsCUDA, planner.FactsCuDNN}},
	},
	Planner: Provider{},
	Observers: []kind.Observer{
		{Name: "cudnn", Reads: []string{kind.Packages}, Writes: []string{kind.CuDNN}, Observe: observe, Predict: predict},
	},
}

// observe takes the package list rather than read the database again.
func observe(_ context.Context, in kind.Input, obs *facts.Observation) []facts.Warning {
	var warns []facts.Warning
	obs.CuDNN, warns = Observe(in.Host, obs.Packages)
	return warns
}
