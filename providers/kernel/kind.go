package kernel

import (
	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/providers/driver"
	"github.com/gpuenv/gpuenv/providers/kind"
)

// Kind describes the kernel's side of the driver: nouveau kept out, and the running kernel's headers for DKMS to gpuenv.
var Kind = &kind.Descriptor{
	Name: "kernel",
	Steps: []planner.StepKind{
		{Address: "kernel.headers", Layer: planner.LayerKernelHeaders, Sections: driverSections},
		{Layer: planner.LayerNouveau, Sections: driverSections},
	},
	Planner: Provider{},
}

// driverSections are the driver's: the kernel's steps are decided with it.
var driverSections = driver.Kind.Steps[0].Sections
