package doctor

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
)

// computeModeUnit is the unit gpuenv writes to set the spec's compute
// modes at every boot (providers/devices.BootUnit).
const computeModeUnit = "gpuenv-compute-mode.service"

// migBootUnit is the unit gpuenv writes to make the spec's MIG layout
// at every boot (providers/devices.MIGBootUnit).
const migBootUnit = "gpuenv-mig.service"

// instanceArg writes a GPU instance as gpuenv-mig.service's command
// lines do: NVML profile id, placement, compute instances' slices.
func instanceArg(g facts.GPUInstance) string {
	var c []int
	for _, ci := range g.Compute {
		c = append(c, ci.Slices)
	}
	slices.Sort(c)
	parts := make([]string, len(c))
	for i, n := range c {
		parts[i] = strconv.Itoa(n)
	}
	return fmt.Sprintf("%d:%d:%d:%s", g.ProfileID, g.Start, g.Size, strings.Join(parts, "+"))
}

func instanceName(g facts.GPUInstance) string {
	name := g.Profile
	if name == "" {
		name = fmt.Sprintf("profile %d", g.ProfileID)
	}
	return fmt.Sprintf("%s@%d", name, g.Start)
}

// migState checks the GPUs in or entering MIG mode: a mode that waits for
// a reset, persistence mode (nvidia-smi warns, when MIG is enabled, that
// persistence mode is disabled: NVIDIA's MIG user guide, "Enable MIG
// Mode"), the layout against the one gpuenv makes at boot, and the
// processes that hold instances, which gpuenv refuses to destroy.
func (d *doctor) migState() {
	var mig []facts.GPUDevice
	for _, g := range d.obs.NVML.Devices {
		if g.MIGMode == "enabled" || g.MIGModePending == "enabled" {
			mig = append(mig, g)
		}
	}
	if len(mig) == 0 {
		return
	}

	pending := Check{ID: "gpu.mig-pending", Group: GroupGPUState}
	var waits, cmds []string
	for _, g := range mig {
		pending.Evidence = append(pending.Evidence, fmt.Sprintf("GPU %d (%s): MIG mode %s, pending %s (NVML)", g.Index, g.UUID, g.MIGMode, orUnknown(g.MIGModePending)))
		if g.MIGModePending != "" && g.MIGModePending != g.MIGMode {
			waits = append(waits, fmt.Sprintf("GPU %d is %s and becomes %s", g.Index, g.MIGMode, g.MIGModePending))
			cmds = append(cmds, fmt.Sprintf("nvidia-smi -r -i %d", g.Index))
		}
	}
	if len(waits) > 0 {
		pending.Status = Warning
		pending.Summary = "MIG mode waits for a GPU reset: " + strings.Join(waits, "; ")
		pending.Fix = &Fix{Text: "Reset the GPUs once no process uses them (or reboot); gpuenv-mig.service then makes the layout:", Commands: cmds}
	} else {
		pending.Status = OK
		pending.Summary = "No MIG mode waits for a GPU reset"
	}
	d.add(pending)

	persist := Check{ID: "gpu.mig-persistence", Group: GroupGPUState}
	var off []string
	for _, g := range mig {
		persist.Evidence = append(persist.Evidence, fmt.Sprintf("GPU %d: persistence mode %s (NVML)", g.Index, orUnknown(g.PersistenceMode)))
		if g.PersistenceMode == "disabled" {
			off = append(off, strconv.Itoa(g.Index))
		}
	}
	if len(off) > 0 {
		persist.Status = Warning
		persist.Summary = fmt.Sprintf("GPU %s use MIG without persistence mode: the driver tears their state down whenever no program holds them, and nvidia-smi warns of it when MIG is enabled", strings.Join(off, ", "))
		persist.Fix = &Fix{Text: "Keep the driver initialised with nvidia-persistenced:", Spec: "driver {\n  persistence_mode = true\n}"}
	} else {
		persist.Status = OK
		persist.Summary = "Persistence mode is on for the GPUs in MIG mode"
	}
	d.add(persist)

	var unit *facts.Unit
	for i := range d.obs.Units {
		if d.obs.Units[i].Name == migBootUnit && d.obs.Units[i].File != nil {
			unit = &d.obs.Units[i]
		}
	}
	if unit != nil {
		layout := Check{ID: "gpu.mig-layout", Group: GroupGPUState}
		var differ []string
		for _, g := range mig {
			want, ok := unit.MIGLayout[g.UUID]
			if !ok || g.MIGMode != "enabled" {
				continue
			}
			var have, names []string
			for _, in := range g.GPUInstances {
				have = append(have, instanceArg(in))
				names = append(names, instanceName(in))
			}
			slices.Sort(have)
			w := slices.Clone(want)
			slices.Sort(w)
			layout.Evidence = append(layout.Evidence, fmt.Sprintf("GPU %d: %s (NVML); %s makes %s", g.Index, orNone(names), migBootUnit, orNone(want)))
			if !slices.Equal(have, w) {
				differ = append(differ, strconv.Itoa(g.Index))
			}
		}
		switch {
		case len(layout.Evidence) == 0:
		case len(differ) > 0:
			layout.Status = Warning
			layout.Summary = fmt.Sprintf("The MIG layout of GPU %s is not the one the spec last applied (%s makes it at boot): it was changed by hand, or the unit could not make it", strings.Join(differ, ", "), migBootUnit)
			layout.Fix = &Fix{Text: "See what differs and put the spec's layout back:", Commands: []string{"gpuenv plan", "gpuenv apply"}}
			d.add(layout)
		default:
			layout.Status = OK
			layout.Summary = "The MIG layouts are those the spec applied"
			d.add(layout)
		}
	}

	d.migComputeMode(mig)

	held := Check{ID: "gpu.mig-processes", Group: GroupGPUState, Status: OK}
	var busy []string
	for _, g := range mig {
		for _, in := range g.GPUInstances {
			var pids []string
			for _, ci := range in.Compute {
				for _, p := range ci.Processes {
					pids = append(pids, strconv.FormatUint(uint64(p.PID), 10))
				}
			}
			if len(pids) > 0 {
				busy = append(busy, fmt.Sprintf("GPU %d %s", g.Index, instanceName(in)))
				held.Evidence = append(held.Evidence, fmt.Sprintf("GPU %d instance %s: pid %s (NVML)", g.Index, instanceName(in), strings.Join(pids, ", ")))
			}
		}
	}
	if len(busy) > 0 {
		held.Summary = "MIG instances in use, which gpuenv does not destroy until their processes end: " + strings.Join(busy, ", ")
	} else {
		held.Summary = "No process runs on a MIG instance: any layout change can go ahead"
	}
	d.add(held)
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "no instance"
	}
	return strings.Join(s, ", ")
}

// migUUIDs maps every MIG device UUID the host has to where it is.
func (d *doctor) migUUIDs() map[string]string {
	out := map[string]string{}
	for _, g := range d.obs.NVML.Devices {
		for _, in := range g.GPUInstances {
			for _, ci := range in.Compute {
				if ci.UUID != "" {
					out[strings.ToLower(ci.UUID)] = fmt.Sprintf("GPU %d instance %s", g.Index, instanceName(in))
				}
			}
		}
	}
	return out
}

// migComputeMode checks the compute modes gpuenv sets at boot against the
// GPUs in MIG mode: NVML takes the compute mode of a GPU in MIG mode only
// through each MIG device's handle (nvml.h, nvmlDeviceSetComputeMode: "If
// MIG is enabled on a GPU, device must be MIG device handle"), so a mode
// the unit sets on the whole GPU does not govern its MIG devices. Plan no
// longer writes such a line; one is left from before the GPU entered MIG
// mode (by hand, or by a spec that did not say so).
func (d *doctor) migComputeMode(mig []facts.GPUDevice) {
	var unit *facts.Unit
	for i := range d.obs.Units {
		if d.obs.Units[i].Name == computeModeUnit && d.obs.Units[i].File != nil {
			unit = &d.obs.Units[i]
		}
	}
	if unit == nil {
		return
	}
	c := Check{ID: "gpu.mig-compute-mode", Group: GroupGPUState}
	var held []string
	for _, g := range mig {
		mode, ok := unit.ComputeModes[g.UUID]
		if !ok {
			continue
		}
		c.Evidence = append(c.Evidence, fmt.Sprintf("GPU %d (%s): MIG mode %s, pending %s (NVML); %s sets compute mode %s", g.Index, g.UUID, g.MIGMode, orUnknown(g.MIGModePending), computeModeUnit, mode))
		if mode != "default" {
			held = append(held, fmt.Sprintf("GPU %d (%s)", g.Index, mode))
		}
	}
	switch {
	case len(c.Evidence) == 0:
		return
	case len(held) > 0:
		c.Status = Warning
		c.Summary = fmt.Sprintf("%s sets the compute mode of %s, which %s in MIG mode: there the mode is each MIG device's, and the GPU's own does not hold on them", computeModeUnit, strings.Join(held, ", "), map[bool]string{true: "is", false: "are"}[len(held) == 1])
		c.Fix = &Fix{Text: "Plan again: the device step leaves GPUs in MIG mode alone and rewrites the unit without them. Give a job a MIG device to itself to keep it alone on its slice.", Commands: []string{"gpuenv plan", "gpuenv apply"}}
	default:
		c.Status = OK
		c.Summary = "No compute mode is set at boot on the GPUs in MIG mode"
	}
	d.add(c)
}
