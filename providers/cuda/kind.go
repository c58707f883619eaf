package cuda

import (
	"context"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/kind"
)

// Kind describes, once, the CUDA toolkit: the layer of each step and the
// facts it is decided from, the planner, and the observers.
var Kind = &kind.Descriptor{
	Name: "cuda",
	Steps: []planner.StepKind{
		{Layer: planner.LayerCUDA, Sections: []string{planner.FactsOS, planner.FactsPCI, planner.FactsNVML, planner.FactsDriver, planner.FactsPackages, planner.FactsCUDA}},
	},
	Planner: Provider{},
	Observers: []kind.Observer{
		{Name: "cuda", Reads: []string{kind.Packages}, Writes: []string{kind.CUDA}, Observe: observe, Predict: predict},
	},
}

// observe takes the package list rather than read the database again.
func observe(_ context.Context, in kind.Input, obs *facts.Observation) []facts.Warning {
	var warns []facts.Warning
	obs.CUDA, warns = Observe(in.Host, obs.Packages)
	return warns
}
