package main

import (
	"github.com/spf13/cobra"

	"github.com/gpuenv/gpuenv/providers/probe/cudacheck"
)

// newCUDACheckCmd is the child of verify's framework-free check: verify
// starts gpuenv itself with it, as the user being verified, so that a
// driver that crashes takes only this process down. It is hidden: its
// output is lines for verify to read, not for a person.
func newCUDACheckCmd(g *globalOptions) *cobra.Command {
	var from int
	cmd := &cobra.Command{
		Use:    cudaCheckCommand,
		Short:  "Check every GPU through the CUDA driver API alone (run by verify)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if code := cudacheck.Child(g.Stdout, from); code != 0 {
				return &exitCodeError{code: code}
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&from, "from", 0, "check the GPUs from CUDA ordinal `N` on")
	return cmd
}
