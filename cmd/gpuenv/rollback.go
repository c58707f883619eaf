package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuenv/gpuenv/apply"
	"github.com/gpuenv/gpuenv/providers"
)

func newRollbackCmd(g *globalOptions) *cobra.Command {
	var to int
	var autoApprove bool
	var lockTimeout time.Duration
	cmd := &cobra.Command{
		Use:   "rollback [--to N]",
		Short: "Undo the newest apply, or return to the host as it was after generation N",
		Long: `Rollback undoes the newest apply that is not undone yet; run again, it walks
further back. With --to N it restores the host as it was right after generation
N finished (--to 0: before the first apply); N may also be an apply that a
rollback undid, to go forward again, as NixOS switches to any generation:
its recorded plan is applied again, as a new generation, once the host is
what the plan was made from (checked as a saved plan is) and no apply made
after it is in effect. It shows what it will undo and asks
for "yes" on a terminal (without one it needs --auto-approve), then runs the
inverses journaled by the applies, newest first: package versions reinstalled
from the package files saved in the generations (offline), files restored
byte for byte, groups, holds, services and device settings as they were. A
rollback is a generation of its own.

When a generation is unfinished (an apply killed, or failed with its revert
incomplete), a plain rollback finishes reverting it, running dpkg's own
recovery first.

Exit status: 0 done or nothing to roll back; 1 error or refused; 3 an inverse
failed and the host needs attention (rollback again after fixing the cause).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, err := openHost(g)
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("to") {
				to = -1
			} else if to < 0 {
				return fmt.Errorf("--to %d: generations are numbered from 1, and 0 is before the first", to)
			}
			v := newRunView(g, apply.KindRollback)
			devices := newDeviceSettings(h)
			if c, ok := devices.(io.Closer); ok {
				defer c.Close()
			}
			var confirmErr error
			ctx, stop := interruptible(cmd.Context())
			defer stop()
			if err := waitForLockOnly(ctx, g, h, lockTimeout); err != nil {
				return v.Failed(err)
			}
			if forwardTarget(h, g.stateDir(), to) {
				return rollForward(ctx, g, h, to, autoApprove, v)
			}
			res, err := apply.Rollback(ctx, h, apply.RollbackOptions{
				StateDir: g.stateDir(),
				To:       to,
				Hook:     v,
				Executor: &apply.HostExecutor{Host: h, Devices: devices, Indexes: providers.IndexesOf(h)},
				Confirm: func(p *apply.RollbackPlan) bool {
					v.RollbackPlan(p)
					ok, err := confirm(g, autoApprove, "Do you want to roll back?")
					confirmErr = err
					return ok
				},
				JournalPoint: applyHooks.journalPoint,
			})
			switch {
			case confirmErr != nil:
				return v.Failed(confirmErr)
			case errors.Is(err, apply.ErrDeclined):
				return v.Failed(v.Cancelled())
			case err != nil && res != nil && res.ExitCode() == exitAttention:
				// The journal could not be written part-way (the disk
				// full): the next rollback, once there is space, goes on
				// from its last whole record.
				return v.Attention(res, err)
			case err != nil:
				return v.Failed(err)
			}
			return v.Result(res, false)
		},
	}
	cmd.Flags().IntVar(&to, "to", 0, "restore the host as it was right after generation `N` (0: before the first apply)")
	cmd.Flags().BoolVar(&autoApprove, "auto-approve", false, "roll back without asking for confirmation")
	addLockTimeoutFlag(cmd, &lockTimeout)
	addJSONFlag(cmd, g)
	return cmd
}
