package driver

import (
	"context"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/kind"
)

// Kind describes, once, the driver packages and the services that come
// with them: the layer of each step and the facts it is decided from, the
// planner, and the observers.
var Kind = &kind.Descriptor{
	Name: "driver",
	Steps: []planner.StepKind{
		{Address: "driver", Layer: planner.LayerDriver, Sections: PlanSections},
		{Address: "driver.purge", Layer: planner.LayerPurge, Sections: PlanSections},
		{Address: "driver.hold", Layer: planner.LayerHold, Sections: PlanSections},
		{Layer: planner.LayerDriverSettings, Sections: []string{planner.FactsOS, planner.FactsKernel, planner.FactsPCI, planner.FactsNVML, planner.FactsDriver, planner.FactsPackages, planner.FactsInit, planner.FactsUnits}},
	},
	Planner: Provider{},
	Observers: []kind.Observer{
		{Name: "driver", Reads: []string{kind.OS, kind.Kernel}, Writes: []string{kind.Kernel, kind.PCI, kind.NVML, kind.Driver, kind.DeviceNodes, kind.Fabric, kind.Health}, Observe: observe, Predict: predictDriver},
		{Name: "driver.unit", Reads: []string{}, Writes: []string{kind.Units}, Observe: observeUnit},
		{Name: "driver.fabric", Reads: []string{kind.Packages, kind.Fabric}, Writes: []string{kind.Fabric}, Observe: observeFabric, Predict: predictFabric},
	},
}

// PlanSections are the facts the driver's packages are decided from,
// and with them the kernel's steps (kernel.Kind).
var PlanSections = []string{planner.FactsOS, planner.FactsKernel, planner.FactsPCI, planner.FactsNVML, planner.FactsDriver, planner.FactsPackages}

func observe(ctx context.Context, in kind.Input, obs *facts.Observation) []facts.Warning {
	Observe(ctx, in.Host, in.NVML, obs)
	return nil
}

func observeUnit(_ context.Context, in kind.Input, obs *facts.Observation) []facts.Warning {
	obs.Units = append(obs.Units, ObserveUnit(in.Host))
	return nil
}

func observeFabric(_ context.Context, in kind.Input, obs *facts.Observation) []facts.Warning {
	ObserveFabric(in.Host, obs)
	return nil
}
