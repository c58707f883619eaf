package apply

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/host"
)

// DriverVersion tells which driver version NVML reports. Each call starts
// NVML afresh and shuts it down again: after a module reload the library
// started before it talks to a module that is gone.
type DriverVersion interface {
	DriverVersion() (string, error)
}

var _ DriverVersion = (*host.NVMLDriverVersion)(nil)

// Files a reload reads, inside the root.
const (
	procNVIDIAVersion = "/proc/driver/nvidia/version"
	sysNVIDIAVersion  = "/sys/module/nvidia/version"
)

// DefaultReloadWait bounds how long a reload's check waits for NVML to
// answer once the new module is loaded: the device nodes are made, and
// the GPUs initialised, while it waits.
const DefaultReloadWait = 30 * time.Second

// stopWait is how long a stopped process is given to exit after SIGTERM,
// and again after SIGKILL.
var stopWait = 10 * time.Second

// canonical spells a module name as /proc/modules does.
func canonical(module string) string { return strings.ReplaceAll(module, "-", "_") }

// loadedVersion is the loaded nvidia module's version, as procfs says it
// (sysfs where procfs has no file).
func (x kernelExecutor) loadedVersion() (string, error) {
	data, err := x.Host.ReadFile(procNVIDIAVersion)
	if err == nil {
		v, _, err := host.ParseProcVersion(data)
		if err != nil {
			return "", fmt.Errorf("%s: %w", procNVIDIAVersion, err)
		}
		return v, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	data, err = x.Host.ReadFile(sysNVIDIAVersion)
	if err != nil {
		return "", fmt.Errorf("the nvidia module's version: %w", err)
	}
	return strings.TrimSpace(string(data)), nil
}

// loadedIs confirms that the loaded nvidia module is version want.
func (x kernelExecutor) loadedIs(want string) error {
	got, err := x.loadedVersion()
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("the loaded nvidia module is %s, not %s", got, want)
	}
	return nil
}

// checkVersion confirms that the kernel and NVML both report the driver
// version want. The kernel's answer is final; NVML is asked again until
// it answers or the wait is over.
func (x kernelExecutor) checkVersion(ctx context.Context, ws *Workspace, want string) error {
	if err := x.loadedIs(want); err != nil {
		return err
	}
	fmt.Fprintf(ws.Log, "gpuenv: %s reports %s\n", procNVIDIAVersion, want)
	if x.Driver == nil {
		fmt.Fprintf(ws.Log, "gpuenv: NVML is not available to this process; the kernel's answer stands\n")
		return nil
	}
	wait := x.ReloadWait
	if wait == 0 {
		wait = DefaultReloadWait
	}
	deadline := time.Now().Add(wait)
	for {
		got, err := x.Driver.DriverVersion()
		switch {
		case err == nil && got == want:
			fmt.Fprintf(ws.Log, "gpuenv: NVML reports %s\n", got)
			return nil
		case err == nil:
			return fmt.Errorf("NVML reports driver %s, not %s", got, want)
		case time.Now().After(deadline):
			return fmt.Errorf("NVML did not answer within %s of the module load: %w", wait, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// procComm is process pid's command name, "" when it is gone.
func (x kernelExecutor) procComm(pid int) (string, error) {
	data, err := x.Host.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(data)), nil
}

// prepareStop checks that the pid is still the process the plan named:
// a pid taken by another program since is not stopped. A stopped process
// is not started again by an undo (nothing knows how it was started), so
// its inverse is empty.
func (x kernelExecutor) prepareStop(op *plan.KernelOp) (*KernelInverse, error) {
	comm, err := x.procComm(op.PID)
	if err != nil {
		return nil, err
	}
	if comm != "" && comm != op.Process {
		return nil, fmt.Errorf("pid %d is now %s, not the GPU process %s the plan names: not stopping it; plan again", op.PID, comm, op.Process)
	}
	return &KernelInverse{Nothing: "a stopped process is not started again"}, nil
}

// stopProcess sends the process SIGTERM, and SIGKILL when it has not
// exited after stopWait.
func (x kernelExecutor) stopProcess(ctx context.Context, ws *Workspace, op *plan.KernelOp) error {
	pid := strconv.Itoa(op.PID)
	for _, sig := range []string{"TERM", "KILL"} {
		comm, err := x.procComm(op.PID)
		if err != nil {
			return err
		}
		if comm != op.Process {
			// Gone (or the pid taken again after it exited).
			return nil
		}
		if err := x.command(ctx, ws, nil, "kill", "-s", sig, "--", pid); err != nil {
			return err
		}
		for end := time.Now().Add(stopWait); time.Now().Before(end); {
			if comm, err := x.procComm(op.PID); err != nil || comm != op.Process {
				return err
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return fmt.Errorf("process %s (pid %d) did not exit after SIGKILL", op.Process, op.PID)
}
