package environment

import (
	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/providers/kind"
)

// Kind describes the system environment: PATH, the loader's paths, CUDA_VISIBLE_DEVICES to gpuenv.
var Kind = &kind.Descriptor{
	Name: "environment",
	Steps: []planner.StepKind{
		{Layer: planner.LayerEnvironment, Sections: []string{planner.FactsCUDA, planner.FactsEnvironment, planner.FactsInit}},
	},
	Planner: Provider{},
}
