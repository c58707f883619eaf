package devices

import (
	"context"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/kind"
)

// Kind describes, once, the GPUs' NVML settings and their boot-time unit:
// the layer of each step and the facts it is decided from, the planner,
// and the observers.
var Kind = &kind.Descriptor{
	Name: "device",
	Steps: []planner.StepKind{
		{Layer: planner.LayerDevices, Sections: []string{planner.FactsPCI, planner.FactsNVML, planner.FactsDevices, planner.FactsInit, planner.FactsUnits}},
	},
	Planner: Provider{},
	Observers: []kind.Observer{
		{Name: "devices.unit", Reads: []string{}, Writes: []string{kind.Units}, Observe: observeUnit, Predict: predictUnits},
	},
}

func observeUnit(_ context.Context, in kind.Input, obs *facts.Observation) []facts.Warning {
	obs.Units = append(obs.Units, ObserveUnit(in.Host), ObserveMIGUnit(in.Host))
	return nil
}
