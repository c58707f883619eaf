package driver

import (
	"slices"

	"github.com/gpuenv/gpuenv/planner/compat"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/host/pkgdb"
	"github.com/gpuenv/gpuenv/spec"
)

// predictedFrom is where a predicted module version comes from, as
// evidence says it.
const predictedFrom = "the plan's driver step"

// predictDriver is what the driver observer reads once the steps are
// applied: the GPUs' settings (predictDevices), and the driver that runs
// once the plan's driver step is applied and its module reload or reboot
// done: the module (its version and flavour), the library
// libnvidia-ml.so.1 leads to and the version NVML reports are those of
// the driver package it installs. Where that version is known only after
// apply, so are they. A driver of userspace only (kernel_modules =
// "none") leaves the host's as they are.
func predictDriver(end *facts.Observation, steps []plan.Step) {
	predictDevices(end, steps)
	for _, s := range steps {
		if s.Address != "driver" || s.After["kernel_modules"] == string(spec.KernelModulesNone) {
			continue
		}
		for _, op := range s.Operations {
			p := op.Packages
			if p == nil || len(p.Install) == 0 {
				continue
			}
			// The driver's main package comes first (planFabric reads it
			// so too).
			v, from := "", ""
			if up, err := pkgdb.UpstreamVersion(string(p.Manager), p.Install[0].Version); err == nil {
				v, from = up.String(), predictedFrom
			}
			end.Driver.ModuleVersion, end.Driver.ModuleVersionFrom = v, from
			// The module loaded is the flavour the step installs.
			end.Driver.ModuleFlavor = ""
			if f := s.After["kernel_modules"]; f == string(spec.KernelModulesOpen) || f == string(spec.KernelModulesProprietary) {
				end.Driver.ModuleFlavor = f
			}
			// The library files are the new package's, named by a
			// version that may not be known yet.
			end.Driver.LibraryVersion, end.Driver.Libraries = v, nil
			if end.NVML.DriverVersion != "" {
				end.NVML.DriverVersion = v
			}
			return
		}
	}
}

// predictFabric is Fabric Manager as the steps leave it: its packages as
// the predicted package database holds them, enabled where a step
// enables it, and running where a step starts it, or where it is enabled
// and the plan ends in a reboot.
func predictFabric(end *facts.Observation, steps []plan.Step) {
	fabricPackages(end)
	fm := &end.Fabric.Manager
	if len(end.Fabric.NVSwitches) == 0 && fm.Package == "" {
		return
	}
	reboot := end.Predicted != nil && end.Predicted.Reboot
	for _, s := range steps {
		for _, op := range s.Operations {
			svc := op.Service
			if svc == nil || svc.Unit != compat.FabricManagerUnit {
				continue
			}
			switch svc.Run {
			case plan.ServiceStart:
				fm.Running = "yes"
			case plan.ServiceStop:
				fm.Running = "no"
			case "":
				fm.Enabled = svc.Enable
				if svc.Now {
					fm.Running = yesNo(svc.Enable)
				}
			}
		}
	}
	if reboot && fm.Package != "" {
		fm.Running = yesNo(fm.Enabled)
	}
}

// predictDevices is the GPUs' settings NVML reports once the steps are
// applied, with the GPU reset or reboot the plan says they need: each
// device operation's persistence, compute and MIG mode on its GPU, and
// persistence on every GPU where the plan enables nvidia-persistenced
// (off where it disables it), and the GPU instances each MIG step makes
// or destroys, with their compute instances' slices (their IDs, which
// NVML gives as it makes them, are not predicted). A plan that reboots
// makes a pending MIG mode the GPU's.
func predictDevices(end *facts.Observation, steps []plan.Step) {
	devs := end.NVML.Devices
	cloned := false
	edit := func() {
		if !cloned {
			devs, cloned = slices.Clone(devs), true
		}
	}
	if end.Predicted != nil && end.Predicted.Reboot {
		// The reboot is the reset a pending MIG mode waits for.
		for i := range devs {
			if p := devs[i].MIGModePending; p != "" && p != devs[i].MIGMode {
				edit()
				devs[i].MIGMode = p
			}
		}
	}
	for _, s := range steps {
		for _, op := range s.Operations {
			if svc := op.Service; svc != nil && svc.Unit == PersistencedUnit && svc.Run == "" {
				edit()
				for i := range devs {
					devs[i].PersistenceMode = persistence(svc.Enable)
				}
			}
			d := op.Device
			if d == nil {
				continue
			}
			i := slices.IndexFunc(devs, func(g facts.GPUDevice) bool { return g.UUID == d.UUID })
			if i < 0 {
				continue
			}
			edit()
			switch d.Setting {
			case plan.SettingPersistenceMode:
				devs[i].PersistenceMode = d.Value
			case plan.SettingComputeMode:
				devs[i].ComputeMode = d.Value
			case plan.SettingMIGMode:
				devs[i].MIGMode, devs[i].MIGModePending = d.Value, d.Value
				if d.Value != string(spec.MIGEnabled) {
					// Leaving MIG mode destroys every instance.
					devs[i].GPUInstances = nil
				}
			case plan.SettingGPUInstance:
				if d.Instance != nil {
					devs[i].GPUInstances = predictInstance(devs[i].GPUInstances, d)
				}
			}
		}
	}
	end.NVML.Devices = devs
}

// predictInstance is gis once the device operation d has made or
// destroyed its GPU instance.
func predictInstance(gis []facts.GPUInstance, d *plan.DeviceOp) []facts.GPUInstance {
	in := d.Instance
	same := func(g facts.GPUInstance) bool {
		return g.ProfileID == in.ProfileID && g.Start == uint32(in.Start) && g.Size == uint32(in.Size)
	}
	out := slices.DeleteFunc(slices.Clone(gis), same)
	if d.Value != plan.GPUInstancePresent {
		return out
	}
	g := facts.GPUInstance{ProfileID: in.ProfileID, Profile: in.Profile, Start: uint32(in.Start), Size: uint32(in.Size)}
	for _, n := range in.Compute {
		g.Compute = append(g.Compute, facts.ComputeInstance{Slices: n})
	}
	return append(out, g)
}

// yesNo is a running state as facts.FabricManager.Running writes it.
func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// persistence is a persistence mode as NVML reports it.
func persistence(on bool) string {
	if on {
		return plan.PersistenceEnabled
	}
	return plan.PersistenceDisabled
}
