package containers

import (
	"context"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/kind"
)

// Kind describes, once, the container toolkit, the engines' runtime
// entries and the CDI spec: the layer of each step and the facts it is
// decided from, the planner, and the observers.
var Kind = &kind.Descriptor{
	Name: "container_toolkit",
	Steps: []planner.StepKind{
		{Layer: planner.LayerContainers, Sections: []string{planner.FactsOS, planner.FactsDriver, planner.FactsDeviceNodes, planner.FactsDevices, planner.FactsPackages, planner.FactsInit, planner.FactsContainers}},
	},
	Planner: Provider{},
	Observers: []kind.Observer{
		{Name: "containers", Reads: []string{kind.Packages, kind.Driver}, Writes: []string{kind.Containers}, Observe: observe, Predict: predict},
	},
}

func observe(ctx context.Context, in kind.Input, obs *facts.Observation) []facts.Warning {
	var warns []facts.Warning
	obs.Containers, warns = Observe(ctx, in.Host, obs.Packages, obs.Driver)
	return warns
}
