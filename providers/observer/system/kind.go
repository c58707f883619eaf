package system

import (
	"context"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/kind"
)

// Kind describes, once, the observers of the operating system, the running
// kernel and process 1. The package plans nothing.
var Kind = &kind.Descriptor{
	Name: "system",
	Observers: []kind.Observer{
		{Name: "system", Reads: []string{}, Writes: []string{kind.OS, kind.Kernel, kind.Init}, Observe: observe},
	},
}

// observe reads what decides what the others read: the package family
// and the kernel release.
func observe(ctx context.Context, in kind.Input, obs *facts.Observation) []facts.Warning {
	Observe(ctx, in.Host, obs)
	return nil
}
