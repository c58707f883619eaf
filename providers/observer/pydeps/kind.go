package pydeps

import (
	"context"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/kind"
)

// Kind describes, once, the observers of the Python environments'
// distributions and their unmet requirements. The package plans nothing.
var Kind = &kind.Descriptor{
	Name: "pydeps",
	Observers: []kind.Observer{
		{Name: "pydeps", Reads: []string{kind.OS, kind.Python}, Writes: []string{kind.Python}, Observe: observe},
	},
}

func observe(_ context.Context, in kind.Input, obs *facts.Observation) []facts.Warning {
	return Observe(in.Host, obs.Python, obs.OS.Arch)
}
