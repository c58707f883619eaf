// Package devices plans NVML settings of GPUs (device.<selector> steps):
// the compute mode, set through NVML with the value observed before it
// recorded, so that apply can put it back. NVML forgets compute modes
// when the driver unloads, so a boot-time systemd unit (the device.boot
// step) sets them again at every boot.
package devices

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/finding"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/kind"
	"github.com/gpuenv/gpuenv/spec"
)

// Provider plans device.<selector> steps and the device.boot step.
// The boot-time unit is compared from the observed units (ObserveUnit);
// an observation without it plans only the NVML settings.
type Provider struct{}

var _ kind.Planner = Provider{}

// Selected returns the devices a selector picks: "all", an index, or a
// GPU UUID (any case).
func Selected(devs []facts.GPUDevice, selector string) []facts.GPUDevice {
	var out []facts.GPUDevice
	for _, d := range devs {
		switch {
		case selector == spec.AllDevices:
		case strings.EqualFold(selector, d.UUID):
		default:
			if i, err := strconv.Atoi(selector); err != nil || i != d.Index {
				continue
			}
		}
		out = append(out, d)
	}
	return out
}

// Plan compares each device block's settings with what NVML reports, and
// the boot-time unit with the modes the blocks ask for.
func (p Provider) Plan(_ context.Context, req *planner.Request) *planner.Response {
	resp := &planner.Response{}
	devs := req.Facts.NVML.Devices
	// A block for one device takes precedence over device "all" for that
	// device: "all" plans only the GPUs no other block names.
	own := map[int]bool{}
	for _, blk := range req.Spec.Devices {
		if blk.Selector == spec.AllDevices || (!blk.ComputeMode.Set && !blk.IsAbsent()) {
			continue
		}
		for _, d := range Selected(devs, blk.Selector) {
			own[d.Index] = true
		}
	}
	var deviceSteps []string
	for _, blk := range req.Spec.Devices {
		if !blk.ComputeMode.Set && !blk.IsAbsent() {
			continue
		}
		want := string(blk.ComputeMode.Value)
		if blk.IsAbsent() {
			// Removing the block's settings puts the GPUs back to NVML's
			// default.
			want = string(spec.ComputeModeDefault)
		}
		addr := "device." + blk.Selector
		picked := Selected(devs, blk.Selector)
		if blk.Selector == spec.AllDevices && len(own) > 0 {
			var rest []facts.GPUDevice
			for _, d := range picked {
				if !own[d.Index] {
					rest = append(rest, d)
				}
			}
			if len(rest) == 0 {
				continue
			}
			picked = rest
		}
		if len(picked) == 0 {
			if blk.IsAbsent() {
				continue
			}
			ev := "NVML reports no devices"
			if st := req.Facts.NVML.Status; st != "" && st != "ok" {
				ev = "NVML: " + st
				if req.Facts.NVML.Error != "" {
					ev += ": " + req.Facts.NVML.Error
				}
			}
			resp.Warnings = append(resp.Warnings, finding.Finding{
				Summary:  fmt.Sprintf("The settings of device %q cannot be planned yet", blk.Selector),
				Detail:   "Compute modes are set through NVML on a running driver, and NVML does not show the device now. Plan again once the driver is installed and loaded (after the reboot it needs).",
				Evidence: []string{ev},
			})
			continue
		}
		var ops []plan.Operation
		before, after := map[string]string{}, map[string]string{}
		var unknown, migGPUs []string
		for _, d := range picked {
			key := fmt.Sprintf("gpu%d.compute_mode", d.Index)
			if InMIG(req.Spec, devs, d) {
				// The mode is each MIG device's there: the GPU's own
				// does not govern them.
				if want != string(spec.ComputeModeDefault) {
					migGPUs = append(migGPUs, strconv.Itoa(d.Index))
				}
				continue
			}
			if d.ComputeMode == "" {
				unknown = append(unknown, strconv.Itoa(d.Index))
				continue
			}
			if d.ComputeMode == want {
				continue
			}
			before[key], after[key] = d.ComputeMode, want
			ops = append(ops, plan.Operation{Kind: plan.OpDevice, Device: &plan.DeviceOp{UUID: d.UUID, Index: d.Index, Setting: plan.SettingComputeMode, Value: want}})
		}
		if len(unknown) > 0 {
			resp.Warnings = append(resp.Warnings, finding.Finding{
				Summary:  "NVML does not report the compute mode of some GPUs",
				Detail:   fmt.Sprintf("GPUs %s do not support compute modes through NVML, so device %q leaves them alone.", strings.Join(unknown, ", "), blk.Selector),
				Evidence: []string{"NVML: compute mode not supported"},
			})
		}
		if len(migGPUs) > 0 {
			resp.Warnings = append(resp.Warnings, migComputeMode(blk.Selector, want, migGPUs))
		}
		if len(ops) == 0 {
			continue
		}
		reason := fmt.Sprintf("compute_mode = %q and %d of the GPUs it selects %s another mode; NVML sets it on each, and apply records the mode before so that rollback restores it.", want, len(ops), map[bool]string{true: "has", false: "have"}[len(ops) == 1])
		code := plan.ReasonSettingDiffers
		if blk.IsAbsent() {
			reason = "absent = true puts the compute mode back to default on the GPUs it selects."
			code = plan.ReasonAbsentRequested
		}
		resp.Steps = append(resp.Steps, plan.Step{
			Address:    addr,
			Action:     plan.Update,
			Before:     before,
			After:      after,
			Reason:     strings.ToUpper(reason[:1]) + reason[1:],
			ReasonCode: code,
			Operations: ops,
			DependsOn:  []string{"driver"},
		})
		deviceSteps = append(deviceSteps, addr)
	}
	if s := p.bootStep(req, deviceSteps); s != nil {
		resp.Steps = append(resp.Steps, *s)
	}
	p.migSteps(req, resp)
	return resp
}

// CheckMIGComputeMode is the warning of a compute mode asked of GPUs in
// MIG mode.
const CheckMIGComputeMode = "device.compute-mode-mig"

// InMIG tells whether GPU d is in MIG mode once the spec holds: as its
// mig block asks, else as NVML reports it now.
func InMIG(s *spec.Spec, devs []facts.GPUDevice, d facts.GPUDevice) bool {
	if blk := migBlocks(s, devs)[d.Index]; blk != nil && blk.WantMode() != "" {
		return blk.WantMode() == spec.MIGEnabled
	}
	return d.MIGMode == "enabled"
}

// migComputeMode says why compute_mode does not hold on GPUs in MIG mode.
// NVML sets and reads the compute mode of a GPU in MIG mode only through
// the handle of each MIG device (nvml.h, nvmlDeviceSetComputeMode and
// nvmlDeviceGetComputeMode: "If MIG is enabled on a GPU, device must be
// MIG device handle"), and MIG devices come and go with the layout;
// gpuenv sets the mode of whole GPUs, so it leaves these alone rather
// than set a mode that governs nothing.
func migComputeMode(selector, want string, gpus []string) finding.Finding {
	return finding.Finding{
		ID:      CheckMIGComputeMode,
		Summary: fmt.Sprintf("compute_mode = %q does not hold on GPUs in MIG mode", want),
		Detail: fmt.Sprintf("GPU %s %s in MIG mode, where the compute mode belongs to each MIG device rather than the GPU: NVML sets it only through a MIG device's handle, "+
			"and MIG devices come and go with the layout. Device %q leaves %s alone and sets no MIG device's mode. "+
			"Each MIG device is a CUDA device of its own: to keep a job alone on its slice, give it a MIG device to itself (by CDI name or its MIG UUID).",
			strings.Join(gpus, ", "), map[bool]string{true: "is", false: "are"}[len(gpus) == 1], selector, map[bool]string{true: "it", false: "them"}[len(gpus) == 1]),
		Evidence: []string{"MIG mode enabled (or enabled by this spec's mig block) on GPU " + strings.Join(gpus, ", ")},
	}
}
