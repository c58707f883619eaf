package repository

import (
	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/providers/kind"
)

// Kind describes the package sources gpuenv writes to gpuenv.
var Kind = &kind.Descriptor{
	Name: "repository",
	Steps: []planner.StepKind{
		{Layer: planner.LayerRepositories, Sections: []string{planner.FactsOS, planner.FactsPackages, planner.FactsRepos, planner.FactsRepoFiles}},
	},
	Planner: Provider{},
}
