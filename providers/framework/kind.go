package framework

import (
	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/providers/kind"
)

// Kind describes the Python frameworks to gpuenv.
var Kind = &kind.Descriptor{
	Name: "framework",
	Steps: []planner.StepKind{
		{Layer: planner.LayerFrameworks, Sections: []string{planner.FactsOS, planner.FactsPCI, planner.FactsDriver, planner.FactsPackages, planner.FactsCUDA, planner.FactsCuDNN, planner.FactsPython}},
	},
	Planner: Provider{},
}
