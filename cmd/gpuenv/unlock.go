package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpuenv/gpuenv/apply"
)

func newUnlockCmd(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "force-unlock",
		Short: "Remove the state directory's lock left by a gpuenv that is gone",
		Long: `Force-unlock removes the lock of the state directory when the gpuenv that
took it is no longer running (it was killed, or the machine went down), and
says whose it was. It refuses while that gpuenv still runs.

The generation the lost process was running may be unfinished: gpuenv plan
warns about it, apply refuses, and gpuenv rollback finishes reverting it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, err := openHost(g)
			if err != nil {
				return err
			}
			info, removed, err := apply.ForceUnlock(h, g.stateDir())
			if err != nil {
				return err
			}
			if !removed {
				fmt.Fprintln(g.Stdout, "The state directory is not locked.")
				return nil
			}
			if info.PID == 0 {
				fmt.Fprintln(g.Stdout, "Removed an empty lock file, left by a gpuenv that died while taking the lock.")
			} else {
				fmt.Fprintf(g.Stdout, "Removed the lock left by %s.\n", info)
			}
			st, err := apply.ReadStatus(h, g.stateDir())
			if err == nil && st.Unfinished {
				fmt.Fprintf(g.Stdout, "Generation %d is unfinished: run gpuenv rollback to finish reverting it.\n", st.Generation)
			}
			return nil
		},
	}
}
