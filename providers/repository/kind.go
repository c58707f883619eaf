package repository

import (
	"context"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/kind"
)

// Kind describes, once, the package sources gpuenv writes: the layer of
// each step and the facts it is decided from, the planner, and the
// observers.
var Kind = &kind.Descriptor{
	Name: "repository",
	Steps: []planner.StepKind{
		{Layer: planner.LayerRepositories, Sections: []string{planner.FactsOS, planner.FactsPackages, planner.FactsRepos, planner.FactsRepoFiles}},
	},
	Planner: Provider{},
	Observers: []kind.Observer{
		{Name: "repository", Reads: []string{kind.OS}, Writes: []string{kind.Repositories}, Observe: observe},
		{Name: "repository.files", Reads: []string{kind.OS, kind.Repositories}, Writes: []string{kind.RepositoryFiles}, Observe: observeFiles},
	},
}

func observe(_ context.Context, in kind.Input, obs *facts.Observation) []facts.Warning {
	var warns []facts.Warning
	obs.Repositories, warns = Observe(in.Host, obs.OS.Family)
	return warns
}

func observeFiles(_ context.Context, in kind.Input, obs *facts.Observation) []facts.Warning {
	obs.RepositoryFiles = ObserveFiles(in.Host, obs.OS.Family, obs.Repositories...)
	return nil
}
