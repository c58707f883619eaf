package loader

import (
	"context"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/kind"
)

// Kind describes, once, the observers of the dynamic loader's view of the
// GPU libraries. The package plans nothing.
var Kind = &kind.Descriptor{
	Name: "loader",
	Observers: []kind.Observer{
		{Name: "loader", Reads: []string{kind.OS, kind.PackageIndexes, kind.Environment, kind.Session, kind.CUDA, kind.Python}, Writes: []string{kind.Loader}, Observe: observe},
	},
}

func observe(_ context.Context, in kind.Input, obs *facts.Observation) []facts.Warning {
	// A named process's environment is the one its programs load
	// libraries in, not gpuenv's own.
	session := in.Options.Session
	if p := obs.Session.Process; p != nil && p.Error == "" {
		session = p.Variables
	}
	var warns []facts.Warning
	obs.Loader, warns = Observe(in.Host, obs, Options{Programs: in.Options.Programs, Session: session})
	return warns
}
