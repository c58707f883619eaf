package apply

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/host"
)

// DeviceSettings reads and changes NVML device settings ("persistence_mode":
// "enabled"/"disabled"; "compute_mode": "default", "exclusive_process",
// "prohibited"), by device UUID. Implementations talk to NVML on the live
// machine only.
type DeviceSettings interface {
	Get(uuid, setting string) (string, error)
	Set(uuid, setting, value string) error
}

// notLive is why kernel and NVML operations are not run on a root that is
// not this machine's own: its kernel and GPUs are not the ones this
// process would change.
func notLive(root, what string) *SkipError {
	return &SkipError{Reason: fmt.Sprintf("%s skipped: the root %s is not the running system; it takes effect when that system boots (reboot required)", what, root)}
}

// kernelExecutor loads and unloads kernel modules and rebuilds the initramfs.
type kernelExecutor struct{ *HostExecutor }

var _ kindOps[plan.KernelOp, KernelInverse] = kernelExecutor{}

func (kernelExecutor) opField(op *plan.Operation) **plan.KernelOp { return &op.Kernel }

func (kernelExecutor) invField(inv *Inverse) **KernelInverse { return &inv.Kernel }

func (kernelExecutor) names(inv *KernelInverse) ([]string, error) {
	return []string{inv.Module}, nil
}

func (x kernelExecutor) prepare(_ context.Context, _ *Workspace, _ int, op *plan.KernelOp) (*KernelInverse, error) {
	if !x.Host.Running() {
		return nil, notLive(x.Host.Root(), describeKernel(op))
	}
	switch op.Action {
	case "rebuild_initramfs":
		return &KernelInverse{Action: "rebuild_initramfs"}, nil
	case plan.KernelCheckVersion:
		return &KernelInverse{Nothing: "a check changes nothing"}, nil
	case plan.KernelStopProcess:
		return x.prepareStop(op)
	case "load_module":
		loaded, err := x.moduleLoaded(op.Module)
		if err != nil {
			return nil, err
		}
		if loaded {
			return &KernelInverse{}, nil
		}
		return &KernelInverse{Action: "unload_module", Module: op.Module}, nil
	default: // unload_module
		loaded, err := x.moduleLoaded(op.Module)
		if err != nil {
			return nil, err
		}
		if !loaded {
			return &KernelInverse{}, nil
		}
		inv := &KernelInverse{Action: "load_module", Module: op.Module, AfterPackages: op.Reload}
		if m := canonical(op.Module); op.Reload && (m == "nvidia" || m == "nvidia_current") {
			v, err := x.loadedVersion()
			if err != nil {
				return nil, err
			}
			inv.Version = v
		}
		return inv, nil
	}
}

func describeKernel(op *plan.KernelOp) string {
	switch op.Action {
	case "rebuild_initramfs":
		return "rebuilding the initramfs"
	case "load_module":
		return "loading module " + op.Module
	case plan.KernelCheckVersion:
		return "checking that the loaded driver is " + op.Version
	case plan.KernelStopProcess:
		return fmt.Sprintf("stopping process %s (pid %d)", op.Process, op.PID)
	}
	return "unloading module " + op.Module
}

// moduleLoaded reads /proc/modules, where names are written with
// underscores.
func (x kernelExecutor) moduleLoaded(name string) (bool, error) {
	data, err := x.Host.ReadFile("/proc/modules")
	if errors.Is(err, fs.ErrNotExist) {
		// A kernel built without module support has no list, and no
		// module loaded.
		return false, nil
	}
	if err != nil {
		return false, err
	}
	want := strings.ReplaceAll(name, "-", "_")
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) > 0 && f[0] == want {
			return true, nil
		}
	}
	return false, sc.Err()
}

func (x kernelExecutor) run(ctx context.Context, ws *Workspace, op *plan.KernelOp) error {
	switch op.Action {
	case plan.KernelCheckVersion:
		return x.checkVersion(ctx, ws, op.Version)
	case plan.KernelStopProcess:
		return x.stopProcess(ctx, ws, op)
	case plan.KernelUnloadModule:
		if op.Reload {
			// rmmod removes the one module: modprobe -r would take
			// the modules it uses along, unplanned, whose own
			// unloads come next in the reload.
			return x.command(ctx, ws, nil, "rmmod", op.Module)
		}
	}
	return x.kernel(ctx, ws, string(op.Action), op.Module)
}

func (x kernelExecutor) kernel(ctx context.Context, ws *Workspace, action, module string) error {
	switch action {
	case "":
		return nil
	case "rebuild_initramfs":
		if _, err := x.Host.Stat("/usr/sbin/update-initramfs"); err == nil {
			return x.command(ctx, ws, nil, "update-initramfs", "-u")
		}
		if _, err := x.Host.Stat("/usr/bin/dracut"); err == nil {
			return x.command(ctx, ws, nil, "dracut", "-f")
		}
		return errors.New("neither update-initramfs nor dracut is installed")
	case "load_module":
		return x.command(ctx, ws, nil, "modprobe", module)
	case "unload_module":
		return x.command(ctx, ws, nil, "modprobe", "-r", module)
	}
	return fmt.Errorf("unknown kernel action %q", action)
}

func (x kernelExecutor) undo(ctx context.Context, ws *Workspace, inv *KernelInverse) error {
	if !x.Host.Running() {
		return nil
	}
	switch inv.Action {
	case "load_module":
		if ok, err := x.moduleLoaded(inv.Module); err != nil || ok {
			if err == nil && inv.Version != "" {
				return x.loadedIs(inv.Version)
			}
			return err
		}
		if inv.Version != "" {
			if err := x.kernel(ctx, ws, inv.Action, inv.Module); err != nil {
				return err
			}
			return x.loadedIs(inv.Version)
		}
	case "unload_module":
		if ok, err := x.moduleLoaded(inv.Module); err != nil || !ok {
			return err
		}
	}
	return x.kernel(ctx, ws, inv.Action, inv.Module)
}

// serviceExecutor enables, disables, starts and stops systemd units.
type serviceExecutor struct{ *HostExecutor }

var _ kindOps[plan.ServiceOp, ServiceInverse] = serviceExecutor{}

func (serviceExecutor) opField(op *plan.Operation) **plan.ServiceOp { return &op.Service }

func (serviceExecutor) invField(inv *Inverse) **ServiceInverse { return &inv.Service }

func (serviceExecutor) names(inv *ServiceInverse) ([]string, error) {
	return []string{inv.Unit}, nil
}

// unitEnabled reports whether a unit has a link in some target's .wants or
// .requires directory, which is what `systemctl enable` makes.
func (x serviceExecutor) unitEnabled(unit string) (bool, error) {
	for _, dir := range []string{"/etc/systemd/system"} {
		for _, kind := range []string{"wants", "requires"} {
			m, err := x.Host.Glob(dir + "/*." + kind + "/" + unit)
			if err != nil {
				return false, err
			}
			if len(m) > 0 {
				return true, nil
			}
		}
	}
	return false, nil
}

func (x serviceExecutor) unitActive(ctx context.Context, ws *Workspace, unit string) bool {
	out, _ := x.output(ctx, ws, nil, "systemctl", "is-active", unit)
	return strings.TrimSpace(string(out)) == "active"
}

func (x serviceExecutor) prepare(ctx context.Context, ws *Workspace, _ int, op *plan.ServiceOp) (*ServiceInverse, error) {
	if op.Run != "" && !x.Host.Running() {
		return nil, notLive(x.Host.Root(), Describe(plan.Operation{Kind: plan.OpService, Service: op}))
	}
	en, err := x.unitEnabled(op.Unit)
	if err != nil {
		return nil, err
	}
	inv := &ServiceInverse{Unit: op.Unit, Enabled: en, RunOnly: op.Run != "", AfterPackages: op.Reload && op.Run == plan.ServiceStop}
	if (op.Now || op.Run != "") && x.Host.Running() {
		active := x.unitActive(ctx, ws, op.Unit)
		inv.Active = &active
	}
	return inv, nil
}

func (x serviceExecutor) run(ctx context.Context, ws *Workspace, op *plan.ServiceOp) error {
	if op.Run != "" {
		return x.command(ctx, ws, nil, "systemctl", op.Run, op.Unit)
	}
	verb := "disable"
	if op.Enable {
		verb = "enable"
	}
	argv := []string{"systemctl", verb}
	// A root that is not the running system has no service manager to
	// start or stop the unit: only its enablement changes, and the unit
	// starts when that system boots.
	if op.Now && x.Host.Running() {
		argv = append(argv, "--now")
	}
	return x.command(ctx, ws, nil, append(argv, op.Unit)...)
}

func (x serviceExecutor) undo(ctx context.Context, ws *Workspace, inv *ServiceInverse) error {
	en, err := x.unitEnabled(inv.Unit)
	if err != nil {
		return err
	}
	if en != inv.Enabled {
		verb := "disable"
		if inv.Enabled {
			verb = "enable"
		}
		if err := x.command(ctx, ws, nil, "systemctl", verb, inv.Unit); err != nil {
			return err
		}
	}
	if inv.Active != nil && x.Host.Running() {
		if active := x.unitActive(ctx, ws, inv.Unit); active != *inv.Active {
			verb := "stop"
			if *inv.Active {
				verb = "start"
			}
			return x.command(ctx, ws, nil, "systemctl", verb, inv.Unit)
		}
	}
	return nil
}

// deviceExecutor changes NVML device settings.
type deviceExecutor struct{ *HostExecutor }

var _ kindOps[plan.DeviceOp, DeviceInverse] = deviceExecutor{}

func (deviceExecutor) opField(op *plan.Operation) **plan.DeviceOp { return &op.Device }

func (deviceExecutor) invField(inv *Inverse) **DeviceInverse { return &inv.Device }

func (deviceExecutor) names(inv *DeviceInverse) ([]string, error) {
	return nil, nil
}

func (x deviceExecutor) prepare(_ context.Context, _ *Workspace, _ int, op *plan.DeviceOp) (*DeviceInverse, error) {
	if !x.Host.Running() {
		return nil, notLive(x.Host.Root(), fmt.Sprintf("setting %s of GPU %d", op.Setting, op.Index))
	}
	if x.Devices == nil {
		return nil, fmt.Errorf("setting %s of GPU %d (%s): NVML is not available", op.Setting, op.Index, op.UUID)
	}
	switch op.Setting {
	case plan.SettingMIGMode, plan.SettingGPUInstance:
		return x.prepareMIG(op)
	}
	prev, err := x.Devices.Get(op.UUID, string(op.Setting))
	if err != nil {
		return nil, fmt.Errorf("reading %s of GPU %d (%s): %w", op.Setting, op.Index, op.UUID, err)
	}
	return &DeviceInverse{UUID: op.UUID, Setting: string(op.Setting), Value: prev}, nil
}

func (x deviceExecutor) run(ctx context.Context, ws *Workspace, op *plan.DeviceOp) error {
	switch op.Setting {
	case plan.SettingMIGMode, plan.SettingGPUInstance:
		return x.runMIG(ws, op)
	}
	return x.Devices.Set(op.UUID, string(op.Setting), op.Value)
}

func (x deviceExecutor) undo(_ context.Context, _ *Workspace, inv *DeviceInverse) error {
	if !x.Host.Running() {
		return nil
	}
	if x.Devices == nil {
		return fmt.Errorf("restoring %s of GPU %s: NVML is not available", inv.Setting, inv.UUID)
	}
	switch plan.DeviceSetting(inv.Setting) {
	case plan.SettingMIGMode, plan.SettingGPUInstance:
		return x.undoMIG(inv)
	}
	cur, err := x.Devices.Get(inv.UUID, inv.Setting)
	if err != nil {
		return err
	}
	if cur == inv.Value {
		return nil
	}
	return x.Devices.Set(inv.UUID, inv.Setting, inv.Value)
}

var _ DeviceSettings = (*host.DeviceSettings)(nil)
