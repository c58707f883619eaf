package groups

import (
	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/providers/kind"
)

// Kind describes who may open the device nodes to gpuenv.
var Kind = &kind.Descriptor{
	Name: "group",
	Steps: []planner.StepKind{
		{Layer: planner.LayerGroups, Sections: []string{planner.FactsGroups, planner.FactsDeviceNodes}},
	},
	Planner: Provider{},
}
