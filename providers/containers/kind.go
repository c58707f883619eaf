package containers

import (
	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/providers/kind"
)

// Kind describes the container toolkit, the engines' runtime entries and the CDI spec to gpuenv.
var Kind = &kind.Descriptor{
	Name: "container_toolkit",
	Steps: []planner.StepKind{
		{Layer: planner.LayerContainers, Sections: []string{planner.FactsOS, planner.FactsDriver, planner.FactsDeviceNodes, planner.FactsPackages, planner.FactsInit, planner.FactsContainers}},
	},
	Planner: Provider{},
}
