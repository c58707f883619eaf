package runtime

import (
	"context"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/kind"
)

// Kind describes, once, the observers of the context GPU programs run in.
// The package plans nothing.
var Kind = &kind.Descriptor{
	Name: "runtime",
	Observers: []kind.Observer{
		{Name: "runtime", Reads: []string{kind.DeviceNodes, kind.CUDA}, Writes: []string{kind.Context}, Observe: observe},
	},
}

func observe(_ context.Context, in kind.Input, obs *facts.Observation) []facts.Warning {
	obs.Context = Observe(in.Host, obs)
	return nil
}
