package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/gpuenv/gpuenv/apply"
	"github.com/gpuenv/gpuenv/apply/applytest"
	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/reload"
	"github.com/gpuenv/gpuenv/providers"
	"github.com/gpuenv/gpuenv/providers/driver"
	"github.com/gpuenv/gpuenv/providers/host"
)

// Test-only programs for the module reload scripts:
//
//	gpuenv-reloadhost DIR          lays out applytest's reload host in
//	                               DIR/root, its nvidia modules loaded,
//	                               and saves the driver upgrade that
//	                               reloads them as DIR/plan.saved
//	gpuenv-running ARGS...         gpuenv taking --root for the running
//	                               system (host.AsRunningSystem): its
//	                               kernel operations run, through the fake
//	                               kernel, with NVML mocked on it
//	gpuenv-running-exit N ARGS...  the same, succeeding when it exits N
//	gpuenv-startprocess ROOT PID COMM DEVICE...
//	                               a program holding GPU devices
func init() {
	extraTestCommands["gpuenv-reloadhost"] = reloadHostCmd
	extraTestCommands["gpuenv-running"] = func() {
		asRunningSystem()
		os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Environ()))
	}
	extraTestCommands["gpuenv-running-exit"] = func() {
		asRunningSystem()
		exitIs()
	}
	extraTestCommands["gpuenv-startprocess"] = func() {
		if len(os.Args) < 4 {
			die(fmt.Errorf("usage: gpuenv-startprocess ROOT PID COMM DEVICE..."))
		}
		pid, err := strconv.Atoi(os.Args[2])
		if err != nil {
			die(err)
		}
		if err := applytest.StartProcess(os.Args[1], pid, os.Args[3], os.Args[4:]...); err != nil {
			die(err)
		}
	}
}

// asRunningSystem makes every root this process opens stand for the
// running system, and answers NVML from the root's fake kernel.
func asRunningSystem() {
	hostOptions = append(hostOptions, host.AsRunningSystem())
	newDriverVersion = func(h *host.Host) apply.DriverVersion {
		return &host.NVMLDriverVersion{Lib: applytest.KernelNVML(h.Root())}
	}
}

func reloadHostCmd() {
	if len(os.Args) != 2 {
		die(fmt.Errorf("usage: gpuenv-reloadhost DIR"))
	}
	f, err := applytest.BuildReloadHost(os.Args[1])
	if err != nil {
		die(err)
	}
	h, err := host.New(f.Root, host.AsRunningSystem(), host.WithRunner(&applytest.Runner{Env: f.Env}))
	if err != nil {
		die(err)
	}
	obs := providers.Observe(context.Background(), h, providers.ObserveOptions{})
	p, err := applytest.ReloadPlan(obs, reload.Options{}, driver.ReloadOperations)
	if err != nil {
		die(err)
	}
	out, err := os.Create(filepath.Join(os.Args[1], "plan.saved"))
	if err != nil {
		die(err)
	}
	if err := planner.WriteSavedPlan(out, p, obs, nil, providers.Kinds()); err != nil {
		die(err)
	}
	if err := out.Close(); err != nil {
		die(err)
	}
}
