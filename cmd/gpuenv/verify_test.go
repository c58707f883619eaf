package main

import (
	"context"
	"os"
	"strings"

	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
	"github.com/gpuenv/gpuenv/providers/probe/cudacheck/cudachecktest"
	"github.com/gpuenv/gpuenv/providers/probe/verify"
)

// gpuenv-unchrooted is gpuenv whose workloads run the root's interpreter
// directly rather than under chroot: the fake interpreters of the verify
// scripts are shell scripts inside a fixture root that has no shell of its
// own. The interpreter's path is resolved inside the root, as chroot
// would, so that a symlink of the fixture never leads to this machine's
// Python. The user chroot would switch to (--userspec, --groups) is handed
// to the fake as GPUENV_TEST_USERSPEC and GPUENV_TEST_GROUPS instead: the
// fixture lives in a directory only this test's user can read. The runner
// is verify's own, so timeouts kill the process group as in gpuenv itself.
//
// gpuenv-unchrooted-dgxh100 is the same with go-nvml's DGX H100 mock for
// NVML, as gpuenv-dgxh100: eight GPUs for the workloads to run on.
//
// gpuenv-fakecuda DIR builds the fake libcuda.so.1 into DIR, for scripts
// that run the framework-free check with LD_LIBRARY_PATH=DIR.
func init() {
	extraTestCommands["gpuenv-unchrooted"] = func() {
		verifyRunner = unchrooted{}
		os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Environ()))
	}
	extraTestCommands["gpuenv-unchrooted-dgxh100"] = func() {
		verifyRunner = unchrooted{}
		withNVML(func() host.NVML { return host.NewNVML(hosttest.NVMLServer("dgxh100")) })()
	}
	extraTestCommands["gpuenv-fakecuda"] = func() {
		if len(os.Args) != 2 {
			die(errUsage("gpuenv-fakecuda DIR"))
		}
		if _, err := cudachecktest.Build(os.Args[1]); err != nil {
			die(err)
		}
	}
}

type errUsage string

func (e errUsage) Error() string { return "usage: " + string(e) }

type unchrooted struct{}

func (unchrooted) Run(ctx context.Context, c verify.Command) error {
	if len(c.Argv) > 2 && c.Argv[0] == "chroot" {
		args := c.Argv[1:]
		for len(args) > 0 && strings.HasPrefix(args[0], "--") {
			if v, ok := strings.CutPrefix(args[0], "--userspec="); ok {
				c.Env = verify.SetEnv(c.Env, "GPUENV_TEST_USERSPEC", v)
			}
			if v, ok := strings.CutPrefix(args[0], "--groups="); ok {
				c.Env = verify.SetEnv(c.Env, "GPUENV_TEST_GROUPS", v)
			}
			args = args[1:]
		}
		h, err := host.New(args[0])
		if err != nil {
			return err
		}
		p, err := h.Resolve(args[1])
		if err != nil {
			return err
		}
		c.Argv = append([]string{p}, args[2:]...)
	}
	return verify.ProcessGroupRunner{}.Run(ctx, c)
}
