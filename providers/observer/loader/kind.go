package loader

import (
	"context"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/environment"
	"github.com/gpuenv/gpuenv/providers/kind"
)

// Kind describes, once, the observers of the dynamic loader's view of the
// GPU libraries. The package plans nothing.
var Kind = &kind.Descriptor{
	Name: "loader",
	Observers: []kind.Observer{
		{Name: "loader", Reads: []string{kind.OS, kind.PackageIndexes, kind.Environment, kind.Session, kind.CUDA, kind.Python}, Writes: []string{kind.Loader}, Observe: observe, Predict: predict},
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

// predict leaves what each program, toolkit and framework loads unknown
// once a step installs or removes packages (a package's files, and the
// loader's cache ldconfig rebuilds from them, are known once it is
// unpacked) or writes a file the environment is read from (the loader's
// paths, LD_LIBRARY_PATH): no resolution is judged then. A plan without
// such a step leaves the resolution as observed.
func predict(end *facts.Observation, steps []plan.Step) {
	for _, s := range steps {
		for _, op := range s.Operations {
			if op.Packages != nil || op.File != nil && environment.Reads(op.File.Path) {
				end.Loader.Consumers = nil
				return
			}
		}
	}
}
