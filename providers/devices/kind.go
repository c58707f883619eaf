package devices

import (
	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/providers/kind"
)

// Kind describes the GPUs' NVML settings to gpuenv.
var Kind = &kind.Descriptor{
	Name: "device",
	Steps: []planner.StepKind{
		{Layer: planner.LayerDevices, Sections: []string{planner.FactsPCI, planner.FactsNVML, planner.FactsDevices, planner.FactsInit, planner.FactsUnits}},
	},
	Planner: Provider{},
}
