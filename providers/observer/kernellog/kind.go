package kernellog

import (
	"context"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/kind"
)

// Kind describes, once, the observers of the kernel's log of the driver's
// messages. The package plans nothing.
var Kind = &kind.Descriptor{
	Name: "kernellog",
	Observers: []kind.Observer{
		{Name: "kernellog", Reads: []string{}, Writes: []string{kind.KernelLog}, Observe: observe},
	},
}

func observe(ctx context.Context, in kind.Input, obs *facts.Observation) []facts.Warning {
	obs.Kernel.Log = Observe(ctx, in.Host, DefaultLimits)
	return nil
}
