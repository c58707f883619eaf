package providers

import (
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
)

// EndState predicts the host as the steps leave it, for
// planner.Planner.EndState: every observer that can say how the steps
// change what it reads (kind.Observer.Predict) does, in the order the
// observers run, so that a prediction reads the predictions it depends
// on (Fabric Manager's packages from the predicted package database).
// What no observer predicts stays as observed, and the end state says
// what of the live state the steps reset (facts.Prediction). obs is not
// changed.
func EndState(obs *facts.Observation, steps []plan.Step) *facts.Observation {
	end := *obs
	p := &facts.Prediction{}
	for _, s := range steps {
		p.Reboot = p.Reboot || s.Flags.NeedsReboot
		p.ModuleReload = p.ModuleReload || s.Flags.NeedsModuleReload
		for _, op := range s.Operations {
			p.Packages = p.Packages || op.Packages != nil && op.Packages.Manager != plan.ManagerPip
		}
	}
	end.Predicted = p
	if len(steps) == 0 {
		// Nothing changes: a converged plan judges the host as observed.
		return &end
	}
	for _, o := range mustObservers() {
		if o.Predict != nil {
			o.Predict(&end, steps)
		}
	}
	return &end
}
