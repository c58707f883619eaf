package kernel

import (
	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/providers/driver"
	"github.com/gpuenv/gpuenv/providers/kind"
)

// Kind describes, once, the kernel's side of the driver (nouveau kept out,
// the running kernel's headers for DKMS): the layer of each step and the
// facts it is decided from, and the planner.
var Kind = &kind.Descriptor{
	Name: "kernel",
	Steps: []planner.StepKind{
		{Address: "kernel.headers", Layer: planner.LayerKernelHeaders, Sections: driver.PlanSections},
		{Layer: planner.LayerNouveau, Sections: driver.PlanSections},
	},
	Planner: Provider{},
}
