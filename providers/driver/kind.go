package driver

import (
	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/providers/kind"
)

// Kind describes the driver packages and the services that come with them to gpuenv.
var Kind = &kind.Descriptor{
	Name: "driver",
	Steps: []planner.StepKind{
		{Address: "driver", Layer: planner.LayerDriver, Sections: driverSections},
		{Address: "driver.purge", Layer: planner.LayerPurge, Sections: driverSections},
		{Address: "driver.hold", Layer: planner.LayerHold, Sections: driverSections},
		{Layer: planner.LayerDriverSettings, Sections: []string{planner.FactsOS, planner.FactsKernel, planner.FactsPCI, planner.FactsNVML, planner.FactsDriver, planner.FactsPackages, planner.FactsInit, planner.FactsUnits}},
	},
	Planner: Provider{},
}

// driverSections decide the driver's packages, and with them the
// kernel's steps (kernel.Kind).
var driverSections = []string{planner.FactsOS, planner.FactsKernel, planner.FactsPCI, planner.FactsNVML, planner.FactsDriver, planner.FactsPackages}
