package groups

import (
	"context"
	"slices"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/kind"
)

// Kind describes, once, the groups that may open the device nodes: the
// layer of each step and the facts it is decided from, the planner, and
// the observers.
var Kind = &kind.Descriptor{
	Name: "group",
	Steps: []planner.StepKind{
		{Layer: planner.LayerGroups, Sections: []string{planner.FactsGroups, planner.FactsDeviceNodes}},
	},
	Planner: Provider{},
	Observers: []kind.Observer{
		{Name: "groups", Reads: []string{}, Writes: []string{kind.Groups}, Observe: observe, Predict: predict},
		{Name: "groups.device_nodes", Reads: []string{kind.Groups, kind.DeviceNodes}, Writes: []string{kind.DeviceNodes}, Observe: nameDeviceGroups, Predict: predictDeviceGroups},
	},
}

func observe(_ context.Context, in kind.Input, obs *facts.Observation) []facts.Warning {
	var warns []facts.Warning
	obs.Groups, warns = Observe(in.Host)
	return warns
}

// nameDeviceGroups gives each device node its group's name from the
// groups already read, rather than reading /etc/group a second time.
func nameDeviceGroups(_ context.Context, _ kind.Input, obs *facts.Observation) []facts.Warning {
	names := make(map[uint32]string, len(obs.Groups))
	for _, g := range obs.Groups {
		names[g.GID] = g.Name
	}
	for i := range obs.DeviceNodes {
		obs.DeviceNodes[i].Group = names[obs.DeviceNodes[i].GID]
	}
	return nil
}

// predictDeviceGroups names the device nodes' groups again from the
// predicted groups: a group the steps delete names no node.
func predictDeviceGroups(end *facts.Observation, steps []plan.Step) {
	if !slices.ContainsFunc(steps, func(s plan.Step) bool {
		return slices.ContainsFunc(s.Operations, func(op plan.Operation) bool { return op.Group != nil })
	}) {
		return
	}
	end.DeviceNodes = slices.Clone(end.DeviceNodes)
	nameDeviceGroups(context.Background(), kind.Input{}, end)
}
