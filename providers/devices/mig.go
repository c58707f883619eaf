package devices

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/compat"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/finding"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/spec"
)

// MIGAddress is the address of a mig block's step: "device.<selector>.mig".
func MIGAddress(selector string) string { return "device." + selector + ".mig" }

// migBlocks returns, by GPU index, the mig block that governs each GPU:
// a block for one GPU takes precedence over mig "all".
func migBlocks(s *spec.Spec, devs []facts.GPUDevice) map[int]*spec.MIG {
	out := map[int]*spec.MIG{}
	for _, pass := range []bool{true, false} {
		for _, blk := range s.MIG {
			if (blk.Selector == spec.AllDevices) != pass {
				continue
			}
			for _, d := range Selected(devs, blk.Selector) {
				out[d.Index] = blk
			}
		}
	}
	return out
}

// layoutText is a layout as the plan shows it: each GPU instance as
// profile@first memory slice, in placement order.
func layoutText(in []plan.MIGInstance) string {
	in = slices.Clone(in)
	slices.SortFunc(in, func(a, b plan.MIGInstance) int { return a.Start - b.Start })
	parts := make([]string, len(in))
	for i, g := range in {
		parts[i] = fmt.Sprintf("%s@%d", g.Profile, g.Start)
		if len(g.Compute) != 1 {
			parts[i] += fmt.Sprintf("[%d compute]", len(g.Compute))
		}
	}
	if len(parts) == 0 {
		return "(none)"
	}
	return strings.Join(parts, ", ")
}

// observedInstances are a GPU's GPU instances as the plan speaks of them.
func observedInstances(d facts.GPUDevice) []plan.MIGInstance {
	var out []plan.MIGInstance
	for _, g := range d.GPUInstances {
		in := plan.MIGInstance{Profile: g.Profile, ProfileID: g.ProfileID, Start: int(g.Start), Size: int(g.Size)}
		if in.Profile == "" {
			in.Profile = fmt.Sprintf("profile-%d", g.ProfileID)
		}
		for _, c := range g.Compute {
			in.Compute = append(in.Compute, c.Slices)
		}
		slices.Sort(in.Compute)
		out = append(out, in)
	}
	return out
}

// holders lists the processes on a GPU instance.
func holders(d facts.GPUDevice, start int) []string {
	var pids []string
	for _, g := range d.GPUInstances {
		if int(g.Start) != start {
			continue
		}
		for _, c := range g.Compute {
			for _, p := range c.Processes {
				pids = append(pids, strconv.FormatUint(uint64(p.PID), 10))
			}
		}
	}
	return pids
}

// migGPU is what the plan does to one GPU.
type migGPU struct {
	ops           []plan.Operation
	before, after map[string]string
	modeChange    bool
	busy          bool
	// mode and final are the MIG mode and the layout the GPU has once
	// the operations ran: what the boot unit makes again.
	mode  string
	final []plan.MIGInstance
	// assumed, where instances are placed on a model whose placements no
	// NVIDIA source gives, is that model and the one whose placements
	// stand in (compat.MIGModel.UnsourcedPlacements).
	assumed [2]string
}

// planMIGGPU plans one GPU's MIG mode and layout. Instances that are
// already where the layout wants them, with one compute instance of all
// their slices, stay; the others are destroyed, and the missing ones are
// placed around those that stay, or, when they do not fit, the whole
// layout is made again.
func planMIGGPU(blk *spec.MIG, d facts.GPUDevice) (*migGPU, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	gpu := fmt.Sprintf("GPU %d (%s, %s)", d.Index, d.Name, d.UUID)
	wantMode := string(blk.WantMode())
	model, known := compat.MIGModelOf(d.Name, d.MemoryTotal)
	if wantMode == string(spec.MIGEnabled) && (!known || d.MIGMode == "") {
		detail := fmt.Sprintf("%s has no MIG: NVML does not report a MIG mode for it.", gpu)
		if d.MIGMode != "" {
			detail = fmt.Sprintf("%s reports a MIG mode, but gpuenv's table of MIG profiles (NVIDIA's MIG user guide: A30, A100, H100, H200) does not know its model, so no layout can be checked.", gpu)
		}
		return nil, append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "GPU without MIG", Detail: detail, Subject: blk.DefRange.Ptr()})
	}
	var want []string
	if wantMode == string(spec.MIGEnabled) && blk.Instances.Set {
		want = blk.Instances.Value
		bad := false
		for i, name := range want {
			if _, ok := model.Profile(name); !ok {
				bad = true
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Unknown MIG profile",
					Detail:   fmt.Sprintf("%s is an %s, whose MIG profiles are %s; %q is not one of them.", gpu, model.Model, strings.Join(model.Names(), ", "), name),
					Subject:  blk.InstanceRanges[i].Ptr(),
				})
			}
		}
		if bad {
			return nil, diags
		}
		if blk.ComputeInstances.Set {
			for _, name := range slices.Sorted(maps.Keys(blk.ComputeInstances.Value)) {
				sizes := blk.ComputeInstances.Value[name]
				p, _ := model.Profile(name)
				for _, n := range sizes {
					if !slices.Contains(p.ComputeSizes(), n) {
						diags = append(diags, &hcl.Diagnostic{
							Severity: hcl.DiagError,
							Summary:  "Unknown compute instance",
							Detail:   fmt.Sprintf("A GPU instance %s of %s offers compute instances of %s compute slices; %dc is not one of them.", name, gpu, joinInts(p.ComputeSizes()), n),
							Subject:  blk.ComputeInstances.Range.Ptr(),
						})
					}
				}
			}
			if diags.HasErrors() {
				return nil, diags
			}
		}
		if _, err := model.Place(nil, want); err != nil {
			return nil, append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Impossible MIG layout",
				Detail:   fmt.Sprintf("%s cannot hold this layout: %s.", gpu, err),
				Subject:  blk.Instances.Range.Ptr(),
			})
		}
	}
	g := &migGPU{before: map[string]string{}, after: map[string]string{}, busy: len(d.Processes) > 0}
	key := fmt.Sprintf("gpu%d.", d.Index)
	pending := d.MIGModePending
	if pending == "" {
		pending = d.MIGMode
	}
	modeOp := func(v string) plan.Operation {
		return plan.Operation{Kind: plan.OpDevice, Device: &plan.DeviceOp{UUID: d.UUID, Index: d.Index, Setting: plan.SettingMIGMode, Value: v}}
	}
	// The instances there are now: none unless MIG mode is on.
	var have []plan.MIGInstance
	if d.MIGMode == string(spec.MIGEnabled) {
		have = observedInstances(d)
	}
	var destroy, create []plan.MIGInstance
	switch {
	case wantMode == string(spec.MIGDisabled):
		destroy = have
	case blk.Instances.Set:
		destroy, create = layoutDiff(model, have, want, blk.ComputeInstances.Value)
	}
	for _, in := range destroy {
		if pids := holders(d, in.Start); len(pids) > 0 {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "MIG instance in use",
				Detail:   fmt.Sprintf("The layout destroys the GPU instance %s at memory slice %d of %s, and pid %s run on it. Stop them, or keep the instance in the layout.", in.Profile, in.Start, gpu, strings.Join(pids, ", ")),
				Subject:  blk.DefRange.Ptr(),
			})
		}
	}
	if diags.HasErrors() {
		return nil, diags
	}
	if wantMode != "" && wantMode != pending && wantMode == string(spec.MIGEnabled) {
		g.ops = append(g.ops, modeOp(wantMode))
		g.modeChange = true
	}
	for _, in := range destroy {
		in := in
		g.ops = append(g.ops, plan.Operation{Kind: plan.OpDevice, Device: &plan.DeviceOp{UUID: d.UUID, Index: d.Index, Setting: plan.SettingGPUInstance, Value: plan.GPUInstanceAbsent, Instance: &in}})
	}
	for _, in := range create {
		in := in
		g.ops = append(g.ops, plan.Operation{Kind: plan.OpDevice, Device: &plan.DeviceOp{UUID: d.UUID, Index: d.Index, Setting: plan.SettingGPUInstance, Value: plan.GPUInstancePresent, Instance: &in}})
	}
	if len(create) > 0 && model.UnsourcedPlacements != "" {
		g.assumed = [2]string{model.Model, model.UnsourcedPlacements}
	}
	// Leaving MIG mode comes after the instances are gone: NVML does not
	// leave it while instances exist.
	if wantMode == string(spec.MIGDisabled) && pending != wantMode {
		g.ops = append(g.ops, modeOp(wantMode))
		g.modeChange = true
	}
	if wantMode != "" {
		g.before[key+"mig_mode"] = describeMode(d)
		g.after[key+"mig_mode"] = wantMode
	}
	g.mode = wantMode
	for _, in := range have {
		if !slices.ContainsFunc(destroy, func(x plan.MIGInstance) bool { return x.Start == in.Start && x.ProfileID == in.ProfileID }) {
			g.final = append(g.final, in)
		}
	}
	g.final = append(g.final, create...)
	slices.SortFunc(g.final, func(a, b plan.MIGInstance) int { return a.Start - b.Start })
	if len(destroy) > 0 || len(create) > 0 {
		g.before[key+"mig_layout"] = layoutText(have)
		g.after[key+"mig_layout"] = layoutText(g.final)
	}
	return g, nil
}

// describeMode is the MIG mode as the plan shows it, with a mode that
// waits for a reset.
func describeMode(d facts.GPUDevice) string {
	if d.MIGModePending != "" && d.MIGModePending != d.MIGMode {
		return d.MIGMode + " (" + d.MIGModePending + " pending a GPU reset)"
	}
	return d.MIGMode
}

// layoutDiff returns the instances to destroy and to create so that a GPU
// holding have holds want.
func layoutDiff(model compat.MIGModel, have []plan.MIGInstance, want []string, compute map[string][]int) (destroy, create []plan.MIGInstance) {
	// computeOf is the compute instances the spec wants in an instance
	// of profile p: those compute_instances gives, else one of all its
	// slices.
	computeOf := func(p compat.MIGProfile) []int {
		if c, ok := compute[p.Name]; ok {
			c = slices.Clone(c)
			slices.Sort(c)
			return c
		}
		return []int{p.Slices}
	}
	left := slices.Clone(want)
	var keep []compat.Placed
	for _, in := range have {
		p, ok := model.ProfileByID(in.ProfileID)
		same := ok && slices.Equal(in.Compute, computeOf(p))
		if i := slices.Index(left, in.Profile); same && i >= 0 {
			left = slices.Delete(left, i, i+1)
			keep = append(keep, compat.Placed{Profile: in.Profile, Start: in.Start})
			continue
		}
		destroy = append(destroy, in)
	}
	placed, err := model.Place(keep, left)
	if err != nil {
		// What stays blocks the rest: the layout is made again whole.
		destroy, keep = have, nil
		placed, _ = model.Place(nil, want)
	}
	for _, pl := range placed {
		p, _ := model.Profile(pl.Profile)
		create = append(create, plan.MIGInstance{Profile: p.Name, ProfileID: p.ID, Start: pl.Start, Size: p.Size, Compute: computeOf(p)})
	}
	slices.SortFunc(create, func(a, b plan.MIGInstance) int { return a.Start - b.Start })
	return destroy, create
}

// MIGChanges lists the addresses of the MIG steps a plan of req has:
// the mig blocks that change a GPU's MIG mode or instances. What is made
// from the instances (the CDI management spec, which names their
// capability nodes) is then made after them, at apply.
func MIGChanges(req *planner.Request) []string {
	devs := req.Facts.NVML.Devices
	governs := migBlocks(req.Spec, devs)
	var out []string
	for _, blk := range req.Spec.MIG {
		for _, d := range devs {
			if governs[d.Index] != blk {
				continue
			}
			if g, diags := planMIGGPU(blk, d); g != nil && !diags.HasErrors() && len(g.ops) > 0 {
				out = append(out, MIGAddress(blk.Selector))
				break
			}
		}
	}
	return out
}

// migSteps plans a step per mig block: the mode and layout of each GPU
// it governs.
func (p Provider) migSteps(req *planner.Request, resp *planner.Response) {
	devs := req.Facts.NVML.Devices
	governs := migBlocks(req.Spec, devs)
	finals := map[int]*migGPU{}
	var addrs []string
	defer func() {
		if s := migBootStep(req, devs, finals, addrs); s != nil && !resp.Diagnostics.HasErrors() {
			resp.Steps = append(resp.Steps, *s)
		}
	}()
	for _, blk := range req.Spec.MIG {
		var picked []facts.GPUDevice
		for _, d := range devs {
			if governs[d.Index] == blk {
				picked = append(picked, d)
			}
		}
		if len(picked) == 0 {
			if blk.IsAbsent() || blk.Selector == spec.AllDevices && len(devs) > 0 {
				continue
			}
			resp.Warnings = append(resp.Warnings, finding.Finding{
				ID:       "device.mig",
				Summary:  fmt.Sprintf("The MIG layout of device %q cannot be planned yet", blk.Selector),
				Detail:   "MIG modes and instances are set through NVML on a running driver, and NVML does not show the device now. Plan again once the driver is installed and loaded.",
				Evidence: []string{"NVML: " + orWord(req.Facts.NVML.Status, "no devices")},
			})
			continue
		}
		step := plan.Step{
			Address:    MIGAddress(blk.Selector),
			Action:     plan.Update,
			Before:     map[string]string{},
			After:      map[string]string{},
			ReasonCode: plan.ReasonSettingDiffers,
			DependsOn:  []string{"driver", "driver.persistence"},
		}
		var modeGPUs, busyGPUs, assumed []string
		entering := false
		for _, d := range picked {
			g, diags := planMIGGPU(blk, d)
			resp.Diagnostics = append(resp.Diagnostics, diags...)
			if g == nil {
				continue
			}
			finals[d.Index] = g
			step.Operations = append(step.Operations, g.ops...)
			if m := g.assumed; m[0] != "" {
				if n := fmt.Sprintf("NVIDIA publishes no MIG placements for the %s, so gpuenv places its instances as on the %s, the same GH100 layout; NVML refuses a placement the GPU does not have, and apply then reverts the step", m[0], m[1]); !slices.Contains(assumed, n) {
					assumed = append(assumed, n)
				}
			}
			for k, v := range g.before {
				step.Before[k] = v
			}
			for k, v := range g.after {
				step.After[k] = v
			}
			if g.modeChange {
				entering = entering || g.mode == string(spec.MIGEnabled)
				modeGPUs = append(modeGPUs, strconv.Itoa(d.Index))
				if g.busy {
					busyGPUs = append(busyGPUs, strconv.Itoa(d.Index))
				}
			}
		}
		if len(step.Operations) == 0 {
			continue
		}
		var why []string
		if blk.IsAbsent() {
			step.ReasonCode = plan.ReasonAbsentRequested
			why = append(why, "absent = true destroys the GPU instances and disables MIG mode")
		} else {
			why = append(why, "the MIG layout differs from the mig block's")
		}
		if len(modeGPUs) > 0 {
			w := fmt.Sprintf("the MIG mode of GPU %s changes: NVML activates it by resetting the GPU, which it can do only while no process uses the GPU; otherwise the mode waits for a GPU reset (nvidia-smi -r) or a reboot", strings.Join(modeGPUs, ", "))
			if entering {
				w += fmt.Sprintf(", and the instances are created then by %s", MIGBootUnit)
			}
			why = append(why, w)
		}
		if len(busyGPUs) > 0 {
			// Processes use the GPU now: its reset cannot happen under
			// them.
			step.Flags.NeedsReboot = true
			why = append(why, fmt.Sprintf("GPU %s run processes now, so expect the reset to wait for a reboot", strings.Join(busyGPUs, ", ")))
		}
		why = append(why, assumed...)
		why = append(why, "apply records each instance it destroys, with its profile and placement, so that rollback creates it again")
		r := strings.Join(why, "; ") + "."
		step.Reason = strings.ToUpper(r[:1]) + r[1:]
		resp.Steps = append(resp.Steps, step)
		addrs = append(addrs, step.Address)
	}
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}

func orWord(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}
