package kernellog

import (
	"context"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/kind"
)

// Kind describes, once, the observers of the kernel's log of the driver's
// messages. The package plans nothing.
var Kind = &kind.Descriptor{
	Name: "kernellog",
	Observers: []kind.Observer{
		{Name: "kernellog", Reads: []string{}, Writes: []string{kind.KernelLog}, Observe: observe, Predict: predict},
	},
}

func observe(ctx context.Context, in kind.Input, obs *facts.Observation) []facts.Warning {
	obs.Kernel.Log = Observe(ctx, in.Host, DefaultLimits)
	return nil
}

// predict is the log of the boot the steps leave the host in: a plan that
// ends in a reboot starts a new boot, whose log holds nothing of this
// one's (no event, no module seen loading). Without a reboot the boot's
// log goes on, and its events stay.
func predict(end *facts.Observation, _ []plan.Step) {
	if end.Kernel.Log == nil || end.Predicted == nil || !end.Predicted.Reboot {
		return
	}
	l := *end.Kernel.Log
	l.Module, l.Events = nil, []facts.KernelEvent{}
	end.Kernel.Log = &l
}
