package devaccess

import (
	"context"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/kind"
)

// Kind describes who may open the device nodes, and the containers' access to them to gpuenv: it observes, and plans nothing.
var Kind = &kind.Descriptor{
	Name: "devaccess",
	Observers: []kind.Observer{
		{Name: "devaccess", Reads: []string{kind.DeviceNodes, kind.Containers}, Writes: []string{kind.DeviceAccess}, Observe: observe},
	},
}

func observe(_ context.Context, in *kind.Input, obs *facts.Observation) []facts.Warning {
	obs.DeviceAccess = Observe(in.Host, obs)
	return nil
}
