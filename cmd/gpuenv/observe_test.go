package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

// Test-only entry points for the observe scripts:
//
//	gpuenv-fixture NAME DIR   lays out testdata/roots/NAME into DIR
//	gpuenv-dgxh100 ARGS...    gpuenv whose NVML is go-nvml's DGX H100 mock
//	gpuenv-dgxa100 ARGS...    the same with go-nvml's DGX A100 mock (MIG off)
//	gpuenv-nvml-mismatch ...  gpuenv whose NVML Init fails with
//	                          LIB_RM_VERSION_MISMATCH, as after an
//	                          upgrade without reboot
//
// The mock NVML is used whatever --root says, so that a fixture stands in
// for the machine NVML talks to.
func init() {
	extraTestCommands["gpuenv-fixture"] = buildFixture
	extraTestCommands["gpuenv-dgxh100"] = withNVML(func() host.NVML { return host.NewNVML(hosttest.NVMLServer("dgxh100")) })
	extraTestCommands["gpuenv-dgxa100"] = withNVML(func() host.NVML { return host.NewNVML(hosttest.NVMLServer("dgxa100")) })
	extraTestCommands["gpuenv-nvml-mismatch"] = withNVML(func() host.NVML {
		return host.NewNVML(hosttest.FailingNVML(nvml.ERROR_LIB_RM_VERSION_MISMATCH))
	})
}

func withNVML(n func() host.NVML) func() {
	return func() {
		hostOptions = append(hostOptions, host.WithNVML(n()))
		os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Environ()))
	}
}

// repoTestdata is the repository's testdata directory, found from this
// file's place in the source tree: scripts run in their own work
// directory, far from it.
func repoTestdata() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata")
}

func buildFixture() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: gpuenv-fixture NAME DIR")
		os.Exit(2)
	}
	if err := os.MkdirAll(os.Args[2], 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := hosttest.BuildNamed(repoTestdata(), os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}
