package providers

import (
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/environment"
)

// EndState predicts the host as the steps leave it, for
// planner.Planner.EndState: each file a step writes or removes is read as
// its observer reads it from disk. Only the facts such files hold are
// predicted (the environment's variables and gpuenv's files among them);
// the rest stays as observed. obs is not changed.
func EndState(obs *facts.Observation, steps []plan.Step) *facts.Observation {
	end := *obs
	for _, s := range steps {
		for _, op := range s.Operations {
			f := op.File
			if f == nil || f.Generate != "" {
				// A file whose content is made at apply says nothing of
				// its content before.
				continue
			}
			end.Environment = environment.Written(end.Environment, f.Path, []byte(f.Content), f.Remove)
		}
	}
	return &end
}
