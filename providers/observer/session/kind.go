package session

import (
	"context"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/kind"
)

// Kind describes, once, the observers of the environment a user's GPU
// programs start in. The package plans nothing.
var Kind = &kind.Descriptor{
	Name: "session",
	Observers: []kind.Observer{
		{Name: "session", Reads: []string{kind.Environment}, Writes: []string{kind.Session}, Observe: observe},
	},
}

func observe(_ context.Context, in kind.Input, obs *facts.Observation) []facts.Warning {
	var warns []facts.Warning
	o := in.Options
	obs.Session, warns = Observe(in.Host, Options{Home: o.Home, PID: o.PID, Session: o.Session, System: obs.Environment.Variables, LoaderPaths: obs.Environment.LoaderPaths})
	return warns
}
