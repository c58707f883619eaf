package main

import (
	"context"
	"os"

	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/verify"
)

// gpuenv-unchrooted is gpuenv whose workloads run the root's interpreter
// directly rather than under chroot: the fake interpreters of the verify
// scripts are shell scripts inside a fixture root that has no shell of its
// own. The interpreter's path is resolved inside the root, as chroot
// would, so that a symlink of the fixture never leads to this machine's
// Python. The runner is verify's own, so timeouts kill the process group
// as in gpuenv itself.
func init() {
	extraTestCommands["gpuenv-unchrooted"] = func() {
		verifyRunner = unchrooted{}
		os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Environ()))
	}
}

type unchrooted struct{}

func (unchrooted) Run(ctx context.Context, c host.Command) error {
	if len(c.Argv) > 2 && c.Argv[0] == "chroot" {
		h, err := host.New(c.Argv[1])
		if err != nil {
			return err
		}
		p, err := h.Resolve(c.Argv[2])
		if err != nil {
			return err
		}
		c.Argv = append([]string{p}, c.Argv[3:]...)
	}
	return verify.ProcessGroupRunner{}.Run(ctx, c)
}
