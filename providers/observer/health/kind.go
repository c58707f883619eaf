package health

import (
	"context"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/kind"
)

// Kind describes, once, the observers of the GPUs' health: those on the
// bus and those gone from it, and their links. The package plans nothing.
var Kind = &kind.Descriptor{
	Name: "health",
	Observers: []kind.Observer{
		{Name: "health", Reads: []string{kind.PCI, kind.Health}, Writes: []string{kind.Health}, Observe: observe},
	},
}

func observe(_ context.Context, in kind.Input, obs *facts.Observation) []facts.Warning {
	Observe(in.Host, obs)
	return nil
}
