package pydeps

import (
	"context"
	"slices"
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/kind"
)

// Kind describes, once, the observers of the Python environments'
// distributions and their unmet requirements. The package plans nothing.
var Kind = &kind.Descriptor{
	Name: "pydeps",
	Observers: []kind.Observer{
		{Name: "pydeps", Reads: []string{kind.OS, kind.Python}, Writes: []string{kind.Python}, Observe: observe, Predict: predict},
	},
}

func observe(_ context.Context, in kind.Input, obs *facts.Observation) []facts.Warning {
	return Observe(in.Host, obs.Python, obs.OS.Arch)
}

// predict leaves the distributions of an environment a step installs
// into or removes from unknown, and with them the requirements they
// leave unmet, which are known once the packages are unpacked: pip's
// into the environment it names, the system's into the system's own
// interpreters (/usr/bin), whose site-packages the distribution's
// packages fill. Other environments stay as observed.
func predict(end *facts.Observation, steps []plan.Step) {
	touched := func(e facts.PythonEnv, p *plan.PackagesOp) bool {
		if p.Manager != plan.ManagerPip {
			return strings.HasPrefix(e.Interpreter, "/usr/bin/")
		}
		return p.PipInto(e.Prefix, e.Interpreter)
	}
	var envs []facts.PythonEnv
	for _, s := range steps {
		for _, op := range s.Operations {
			p := op.Packages
			if p == nil {
				continue
			}
			for i := range end.Python {
				if !touched(end.Python[i], p) {
					continue
				}
				if envs == nil {
					envs = slices.Clone(end.Python)
				}
				envs[i].Libraries, envs[i].Unmet = nil, nil
			}
		}
	}
	if envs != nil {
		end.Python = envs
	}
}
