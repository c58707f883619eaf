package cuda

import (
	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/providers/kind"
)

// Kind describes the CUDA toolkit to gpuenv.
var Kind = &kind.Descriptor{
	Name: "cuda",
	Steps: []planner.StepKind{
		{Layer: planner.LayerCUDA, Sections: []string{planner.FactsOS, planner.FactsPCI, planner.FactsNVML, planner.FactsDriver, planner.FactsPackages, planner.FactsCUDA}},
	},
	Planner: Provider{},
}
