package environment

import (
	"context"
	"slices"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/compat/nvidiarepo"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/kind"
)

// Kind describes, once, the system environment (PATH, the loader's paths,
// CUDA_VISIBLE_DEVICES): the layer of each step and the facts it is
// decided from, the planner, and the observers.
var Kind = &kind.Descriptor{
	Name: "environment",
	Steps: []planner.StepKind{
		{Layer: planner.LayerEnvironment, Sections: []string{planner.FactsCUDA, planner.FactsEnvironment, planner.FactsInit, planner.FactsGroups}},
	},
	Planner: Provider{},
	Observers: []kind.Observer{
		{Name: "environment", Reads: []string{kind.OS}, Writes: []string{kind.Environment}, Observe: observe, Predict: predict},
	},
}

func observe(_ context.Context, in kind.Input, obs *facts.Observation) []facts.Warning {
	var warns []facts.Warning
	obs.Environment, warns = Observe(in.Host)
	return warns
}

// predict reads each file a step writes or removes as Observe reads it
// from disk. A file whose content is made at apply says nothing of its
// content before, and leaves the environment as observed. The loader's
// configuration that NVIDIA's toolkit packages bring is read the same
// way, where the host does not have it yet (the files are the packages'
// conffiles: a host's own edit stays).
func predict(end *facts.Observation, steps []plan.Step) {
	for _, s := range steps {
		for _, op := range s.Operations {
			if f := op.File; f != nil && f.Generate == "" {
				end.Environment = Written(end.Environment, f.Path, []byte(f.Content), f.Remove)
			}
			if p := op.Packages; p != nil {
				for _, pin := range p.Install {
					major, _, ok := nvidiarepo.ToolkitRelease(pin.Name)
					if !ok {
						continue
					}
					for _, c := range nvidiarepo.ToolkitLoaderConfs(major, end.OS.Arch) {
						if !slices.ContainsFunc(end.Environment.LoaderPaths, func(lp facts.LoaderPath) bool { return lp.File == c.Path }) {
							end.Environment = Written(end.Environment, c.Path, []byte(c.Content), false)
						}
					}
				}
			}
		}
	}
}
