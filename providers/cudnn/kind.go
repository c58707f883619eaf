package cudnn

import (
	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/providers/kind"
)

// Kind describes cuDNN to gpuenv.
var Kind = &kind.Descriptor{
	Name: "cudnn",
	Steps: []planner.StepKind{
		{Layer: planner.LayerCuDNN, Sections: []string{planner.FactsOS, planner.FactsPackages, planner.FactsCUDA, planner.FactsCuDNN}},
	},
	Planner: Provider{},
}
