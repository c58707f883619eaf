package devaccess

import (
	"context"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/kind"
)

// Kind describes, once, the observers of who may open the device nodes,
// and the container engines' access to them. The package plans nothing.
var Kind = &kind.Descriptor{
	Name: "devaccess",
	Observers: []kind.Observer{
		{Name: "devaccess", Reads: []string{kind.DeviceNodes, kind.Containers}, Writes: []string{kind.DeviceAccess}, Observe: observe, Predict: predict},
	},
}

func observe(_ context.Context, in kind.Input, obs *facts.Observation) []facts.Warning {
	obs.DeviceAccess = Observe(in.Host, obs)
	return nil
}
