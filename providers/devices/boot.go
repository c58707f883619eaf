package devices

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/spec"
)

// BootUnit is the systemd unit that sets the compute modes again at boot:
// NVML keeps a compute mode only while the driver stays loaded.
const BootUnit = "gpuenv-compute-mode.service"

// BootAddress is the address of the step that writes or removes BootUnit.
const BootAddress = "device.boot"

const (
	// BootUnitPath is where the unit is written: the administrator's unit
	// directory, which no package owns.
	BootUnitPath = "/etc/systemd/system/" + BootUnit
	// bootUnitWants is the link `systemctl enable` makes from the unit's
	// WantedBy= target.
	bootUnitWants = "/etc/systemd/system/multi-user.target.wants/" + BootUnit
)

// smiComputeMode is how nvidia-smi's -c/--compute-mode names each mode.
var smiComputeMode = map[string]string{
	string(spec.ComputeModeDefault):          "DEFAULT",
	string(spec.ComputeModeExclusiveProcess): "EXCLUSIVE_PROCESS",
	string(spec.ComputeModeProhibited):       "PROHIBITED",
}

// wantedModes returns the compute mode the spec asks of each GPU, by
// index, a block for one device taking precedence over device "all"; an
// absent block asks for the default. managed tells whether any block
// manages compute modes, nonDefault whether any asks for another mode
// than the default.
func wantedModes(s *spec.Spec, devs []facts.GPUDevice) (modes map[int]string, managed, nonDefault bool) {
	modes = map[int]string{}
	for _, pass := range []bool{true, false} {
		for _, blk := range s.Devices {
			if (blk.Selector == spec.AllDevices) != pass || (!blk.ComputeMode.Set && !blk.IsAbsent()) {
				continue
			}
			managed = true
			want := string(spec.ComputeModeDefault)
			if !blk.IsAbsent() {
				want = string(blk.ComputeMode.Value)
			}
			if want != string(spec.ComputeModeDefault) {
				nonDefault = true
			}
			for _, d := range Selected(devs, blk.Selector) {
				modes[d.Index] = want
			}
		}
	}
	return modes, managed, nonDefault
}

// bootUnit returns the unit's content and, by GPU, the modes it sets: one
// ExecStart= per GPU whose wanted mode is not the default (the driver
// starts every GPU in the default mode), in the order of the GPUs'
// indices so that the same spec always writes the same bytes. GPUs whose
// compute mode NVML does not report are left out, as their device steps
// leave them alone. The content is empty when no GPU needs a line.
func bootUnit(devs []facts.GPUDevice, modes map[int]string) (string, map[string]string) {
	devs = slices.Clone(devs)
	slices.SortFunc(devs, func(a, b facts.GPUDevice) int { return a.Index - b.Index })
	var exec []string
	set := map[string]string{}
	for _, d := range devs {
		want, ok := modes[d.Index]
		if !ok || want == string(spec.ComputeModeDefault) || d.ComputeMode == "" || d.UUID == "" {
			continue
		}
		exec = append(exec, fmt.Sprintf("ExecStart=/usr/bin/nvidia-smi -i %s -c %s\n", d.UUID, smiComputeMode[want]))
		set[fmt.Sprintf("gpu%d.compute_mode_at_boot", d.Index)] = want
	}
	if len(exec) == 0 {
		return "", nil
	}
	var b strings.Builder
	b.WriteString("# Written by gpuenv from the spec's device blocks. The driver starts every\n")
	b.WriteString("# GPU in the default compute mode, so the modes are set again at each boot.\n")
	b.WriteString("[Unit]\n")
	b.WriteString("Description=Set the GPU compute modes (gpuenv)\n")
	b.WriteString("After=nvidia-persistenced.service systemd-modules-load.service\n")
	b.WriteString("\n[Service]\n")
	b.WriteString("Type=oneshot\n")
	b.WriteString("RemainAfterExit=yes\n")
	for _, l := range exec {
		b.WriteString(l)
	}
	b.WriteString("\n[Install]\n")
	b.WriteString("WantedBy=multi-user.target\n")
	return b.String(), set
}

// reload is the follow-up of a change to the unit file: systemd reads
// unit files when told to, where it runs the root. Elsewhere (a root that
// is not the running system, a container whose process 1 is not systemd)
// systemctl reaches no manager, and the unit is read when the root boots
// with systemd.
func reload(in facts.Init) []string {
	if !in.Systemd {
		return nil
	}
	return []string{"systemctl", "daemon-reload"}
}

// bootStep writes and enables the boot-time unit, or disables and removes
// it once no block asks for a mode other than the default. It is planned
// only when some block manages compute modes: without one the unit is
// left as it is. While NVML shows no GPU the unit cannot name them, and
// an existing unit is left alone then too (the device blocks warn).
func (Provider) bootStep(req *planner.Request, deviceSteps []string) *plan.Step {
	unit := observedUnit(req.Facts.Units, BootUnit)
	if unit == nil {
		// Not observed: the unit cannot be compared with what it must
		// hold.
		return nil
	}
	devs := req.Facts.NVML.Devices
	modes, managed, nonDefault := wantedModes(req.Spec, devs)
	if !managed || (nonDefault && len(devs) == 0) {
		return nil
	}
	// The unit sets whole GPUs' modes; on a GPU in MIG mode that mode
	// governs no MIG device (InMIG).
	whole := slices.DeleteFunc(slices.Clone(devs), func(d facts.GPUDevice) bool { return InMIG(req.Spec, devs, d) })
	content, set := bootUnit(whole, modes)
	return unitStep(req, unit, unitFile{
		name:      BootUnit,
		path:      BootUnitPath,
		address:   BootAddress,
		dependsOn: append([]string{"driver"}, deviceSteps...),
		content:   content,
		after:     set,
		removed:   fmt.Sprintf("No device block asks for a compute mode other than default, so %s, which set the modes at boot, is disabled and removed.", BootUnit),
		kept: func(does string) string {
			return fmt.Sprintf("NVML forgets compute modes when the driver unloads, so gpuenv %s: at each boot it runs nvidia-smi to set the modes the spec asks for again.", does)
		},
	})
}

// unitFile is a systemd unit gpuenv writes and enables so that a device
// setting NVML forgets is made again at every boot.
type unitFile struct {
	name, path, address string
	dependsOn           []string
	// content is what the unit must hold; "" when it must go.
	content string
	// after are values the step shows besides the unit's state.
	after map[string]string
	// removed says why the unit goes; kept why it is written or
	// enabled, given what the step does ("writes … and enables it").
	removed string
	kept    func(does string) string
}

// observedUnit is the unit named name in units, nil when it was not
// observed.
func observedUnit(units []facts.Unit, name string) *facts.Unit {
	for i := range units {
		if units[i].Name == name {
			return &units[i]
		}
	}
	return nil
}

// unitStep writes and enables u, or disables and removes it when its
// content is "", as unit, its observed state, requires; nil when unit
// is as u must be.
func unitStep(req *planner.Request, unit *facts.Unit, u unitFile) *plan.Step {
	exists, enabled := unit.File != nil, unit.Enabled
	state := "absent"
	switch {
	case exists && enabled:
		state = "enabled"
	case exists:
		state = "disabled"
	}
	step := plan.Step{
		Address:   u.address,
		Before:    map[string]string{"unit": state},
		DependsOn: u.dependsOn,
	}
	if u.content == "" {
		if !exists && !enabled {
			return nil
		}
		step.Action = plan.Delete
		step.After = map[string]string{"unit": "absent"}
		// Disabled first: systemctl reads the unit's [Install] section to
		// find the links to remove.
		if enabled {
			step.Operations = append(step.Operations, plan.Operation{Kind: plan.OpService, Service: &plan.ServiceOp{Unit: u.name}})
		}
		if exists {
			step.Operations = append(step.Operations, plan.Operation{Kind: plan.OpFile, File: &plan.FileOp{Path: u.path, Remove: true, After: reload(req.Facts.Init)}})
		}
		step.Reason = u.removed
		step.ReasonCode = plan.ReasonNotRequested
		return &step
	}
	same := exists && unit.File.SHA256 != "" && unit.File.SHA256 == planner.Digest(u.content)
	if same && enabled {
		return nil
	}
	step.Action = plan.Update
	if !exists {
		step.Action = plan.Create
		step.Before = nil
	}
	step.After = map[string]string{"unit": "enabled"}
	for k, v := range u.after {
		step.After[k] = v
	}
	var why []string
	switch {
	case !exists:
		step.ReasonCode = plan.ReasonMissing
	case !same:
		step.ReasonCode = plan.ReasonContentDiffers
	default:
		step.ReasonCode = plan.ReasonSettingDiffers // written, not enabled
	}
	if !same {
		step.Operations = append(step.Operations, plan.Operation{Kind: plan.OpFile, File: &plan.FileOp{Path: u.path, Content: u.content, Mode: 0o644, After: reload(req.Facts.Init)}})
		why = append(why, "writes "+u.path)
	}
	if !enabled {
		// Enabled only, not started: the device steps make the settings
		// now, and the unit repeats them at the next boot.
		step.Operations = append(step.Operations, plan.Operation{Kind: plan.OpService, Service: &plan.ServiceOp{Unit: u.name, Enable: true}})
		why = append(why, "enables it")
	}
	step.Reason = u.kept(strings.Join(why, " and "))
	return &step
}
