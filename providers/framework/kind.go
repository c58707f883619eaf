package framework

import (
	"context"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/kind"
)

// Kind describes, once, the Python frameworks: the layer of each step and
// the facts it is decided from, the planner, and the observers.
var Kind = &kind.Descriptor{
	Name: "framework",
	Steps: []planner.StepKind{
		{Layer: planner.LayerFrameworks, Sections: []string{planner.FactsOS, planner.FactsPCI, planner.FactsDriver, planner.FactsPackages, planner.FactsCUDA, planner.FactsCuDNN, planner.FactsPython}},
	},
	Planner: Provider{},
	Observers: []kind.Observer{
		{Name: "framework", Reads: []string{kind.Packages}, Writes: []string{kind.Python}, Observe: observe, Predict: predict},
	},
}

// observe reads the system's Python environments and those of the
// interpreters the options name, taking the package list rather than
// reading the database again.
func observe(_ context.Context, in kind.Input, obs *facts.Observation) []facts.Warning {
	var warns []facts.Warning
	obs.Python, warns = Observe(in.Host, obs.Packages, in.Options.Pythons)
	return warns
}
