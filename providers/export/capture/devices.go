package capture

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/zclconf/go-cty/cty"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/devices"
	"github.com/gpuenv/gpuenv/spec"
)

// devices captures the GPUs' compute modes that are not the default,
// which the driver starts every GPU in. NVML forgets a mode when the
// driver unloads, so a device block also keeps gpuenv's boot-time unit
// that sets it again: a host without that unit has a mode that lasts
// until its next reboot, and init says so instead of writing a block
// whose plan would add the unit.
func (w *writer) devices(obs *facts.Observation) {
	modes := map[string][]string{} // mode → GPU indices
	var order []string
	for _, d := range obs.NVML.Devices {
		m := d.ComputeMode
		if m == "" || m == string(spec.ComputeModeDefault) {
			continue
		}
		if _, ok := modes[m]; !ok {
			order = append(order, m)
		}
		modes[m] = append(modes[m], strconv.Itoa(d.Index))
	}
	if len(order) == 0 {
		return
	}
	if !bootUnitEnabled(obs) {
		var lines []string
		for _, m := range order {
			lines = append(lines, fmt.Sprintf("GPU %s in %s mode", strings.Join(modes[m], ", "), m))
		}
		w.comment(fmt.Sprintf("%s, set by hand: NVML forgets it at the next driver reload. A device block "+
			"(device \"0\" { compute_mode = \"exclusive_process\" }) would keep it with gpuenv's boot-time unit %s, "+
			"which this host lacks, so none is written.", strings.Join(lines, "; "), devices.BootUnit))
		return
	}
	// One block for every GPU when they share the mode, else one per GPU.
	if len(order) == 1 && len(modes[order[0]]) == len(obs.NVML.Devices) {
		b := w.block("device", []string{spec.AllDevices}, fmt.Sprintf("Every GPU is in %s mode, which %s sets at boot.", order[0], devices.BootUnit))
		b.SetAttributeValue("compute_mode", cty.StringVal(order[0]))
		return
	}
	for _, m := range order {
		for _, i := range modes[m] {
			b := w.block("device", []string{i}, fmt.Sprintf("GPU %s is in %s mode, which %s sets at boot.", i, m, devices.BootUnit))
			b.SetAttributeValue("compute_mode", cty.StringVal(m))
		}
	}
}

func bootUnitEnabled(obs *facts.Observation) bool {
	for _, u := range obs.Units {
		if u.Name == devices.BootUnit {
			return u.Enabled && u.File != nil
		}
	}
	return false
}
