package apply

import (
	"fmt"
	"slices"

	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/host"
)

// MIGDevices changes MIG modes and GPU instances, by GPU UUID; a GPU
// instance is named by its profile and placement. HostExecutor.Devices
// has it where NVML can make MIG changes.
type MIGDevices interface {
	MIGMode(uuid string) (current, pending string, err error)
	// SetMIGMode tells whether NVML activated the mode at once; when it
	// did not, the mode waits for a GPU reset or a reboot.
	SetMIGMode(uuid, mode string) (activated bool, err error)
	// GPUInstance reads the instance at a placement: nil when none is.
	GPUInstance(uuid string, profileID int, start uint32) (*host.MIGInstance, error)
	// CreateGPUInstance creates an instance and its compute instances,
	// completing one already there.
	CreateGPUInstance(uuid string, in host.MIGInstance) error
	// DestroyGPUInstance destroys an instance, refusing one processes
	// hold; one already gone is not an error.
	DestroyGPUInstance(uuid string, profileID int, start uint32) error
}

var _ MIGDevices = (*host.DeviceSettings)(nil)

func (x deviceExecutor) mig(op string, index int, uuid string) (MIGDevices, error) {
	m, ok := x.Devices.(MIGDevices)
	if !ok {
		return nil, fmt.Errorf("%s of GPU %d (%s): NVML cannot make MIG changes here", op, index, uuid)
	}
	return m, nil
}

func hostInstance(in *plan.MIGInstance) host.MIGInstance {
	return host.MIGInstance{ProfileID: in.ProfileID, Start: uint32(in.Start), Size: uint32(in.Size), Compute: slices.Clone(in.Compute)}
}

// prepareMIG records what a MIG operation changes: the pending MIG mode
// (the one NVML moves to, which is what setting the mode changes), or
// the instance at the operation's placement, with its compute
// instances. An instance cannot be made while the GPU's MIG mode waits
// for a reset: that operation is skipped, and the boot unit makes the
// instance after the reboot.
func (x deviceExecutor) prepareMIG(op *plan.DeviceOp) (*DeviceInverse, error) {
	m, err := x.mig(string(op.Setting), op.Index, op.UUID)
	if err != nil {
		return nil, err
	}
	cur, pending, err := m.MIGMode(op.UUID)
	if err != nil {
		return nil, fmt.Errorf("reading the MIG mode of GPU %d (%s): %w", op.Index, op.UUID, err)
	}
	if op.Setting == plan.SettingMIGMode {
		return &DeviceInverse{UUID: op.UUID, Setting: string(op.Setting), Value: pending}, nil
	}
	in := op.Instance
	if cur != "enabled" {
		if op.Value == plan.GPUInstanceAbsent {
			// No instance exists outside MIG mode: nothing to destroy.
			return &DeviceInverse{UUID: op.UUID, Setting: string(op.Setting), Value: plan.GPUInstanceAbsent, Instance: in}, nil
		}
		return nil, &SkipError{Reason: fmt.Sprintf("creating MIG instance %s on GPU %d skipped: its MIG mode is %s and waits for a GPU reset (nvidia-smi -r -i %d) or a reboot; %s makes the layout at the next boot", in.Profile, op.Index, pending+" pending", op.Index, "gpuenv-mig.service")}
	}
	have, err := m.GPUInstance(op.UUID, in.ProfileID, uint32(in.Start))
	if err != nil {
		return nil, fmt.Errorf("reading MIG instance %s at memory slice %d of GPU %d: %w", in.Profile, in.Start, op.Index, err)
	}
	inv := &DeviceInverse{UUID: op.UUID, Setting: string(op.Setting), Value: plan.GPUInstanceAbsent, Instance: in}
	if have != nil {
		was := *in
		was.Size = int(have.Size)
		was.Compute = slices.Clone(have.Compute)
		inv.Value, inv.Instance = plan.GPUInstancePresent, &was
	}
	return inv, nil
}

func (x deviceExecutor) runMIG(ws *Workspace, op *plan.DeviceOp) error {
	m, err := x.mig(string(op.Setting), op.Index, op.UUID)
	if err != nil {
		return err
	}
	if op.Setting == plan.SettingMIGMode {
		activated, err := m.SetMIGMode(op.UUID, op.Value)
		if err != nil {
			return err
		}
		if !activated {
			ws.say("The MIG mode of GPU %d is now %s pending: NVML could not reset the GPU (a process uses it, or the platform does not allow it); it takes effect at the next GPU reset (nvidia-smi -r -i %d) or reboot.", op.Index, op.Value, op.Index)
		}
		return nil
	}
	if op.Value == plan.GPUInstanceAbsent {
		// Outside MIG mode no instance exists, and NVML may refuse even
		// to list them.
		if cur, _, err := m.MIGMode(op.UUID); err != nil || cur != "enabled" {
			return err
		}
		return m.DestroyGPUInstance(op.UUID, op.Instance.ProfileID, uint32(op.Instance.Start))
	}
	return m.CreateGPUInstance(op.UUID, hostInstance(op.Instance))
}

// undoMIG puts back what prepareMIG recorded. It compares first, so that
// it is right after a run that finished, stopped half-way (a GPU
// instance without its compute instances) or never started.
func (x deviceExecutor) undoMIG(inv *DeviceInverse) error {
	m, ok := x.Devices.(MIGDevices)
	if !ok {
		return fmt.Errorf("restoring %s of GPU %s: NVML cannot make MIG changes here", inv.Setting, inv.UUID)
	}
	if plan.DeviceSetting(inv.Setting) == plan.SettingMIGMode {
		_, pending, err := m.MIGMode(inv.UUID)
		if err != nil {
			return err
		}
		if pending == inv.Value {
			return nil
		}
		_, err = m.SetMIGMode(inv.UUID, inv.Value)
		return err
	}
	in := inv.Instance
	cur, _, err := m.MIGMode(inv.UUID)
	if err != nil {
		return err
	}
	if inv.Value == plan.GPUInstanceAbsent {
		if cur != "enabled" {
			return nil
		}
		return m.DestroyGPUInstance(inv.UUID, in.ProfileID, uint32(in.Start))
	}
	if cur != "enabled" {
		return fmt.Errorf("creating MIG instance %s at memory slice %d of GPU %s again: its MIG mode is %s", in.Profile, in.Start, inv.UUID, cur)
	}
	have, err := m.GPUInstance(inv.UUID, in.ProfileID, uint32(in.Start))
	if err != nil {
		return err
	}
	if have != nil && len(have.Compute) > len(in.Compute) {
		// More compute instances than it had: made again from nothing.
		if err := m.DestroyGPUInstance(inv.UUID, in.ProfileID, uint32(in.Start)); err != nil {
			return err
		}
	}
	return m.CreateGPUInstance(inv.UUID, hostInstance(in))
}
