package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/hashicorp/hcl/v2"
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
			var st *eventStream
			if g.JSON {
				st = newEventStream(g.Stdout)
			}
			progress, events, live := runViews(g, st)
			devices := newDeviceSettings(h)
			if c, ok := devices.(io.Closer); ok {
				defer c.Close()
			}
			var confirmErr error
			ctx, stop := interruptible(cmd.Context())
			defer stop()
			if err := waitForLockOnly(ctx, g, h, lockTimeout); err != nil {
				if st != nil {
					return st.fail(apply.KindRollback, err)
				}
				return err
			}
			if forwardTarget(h, g.stateDir(), to) {
				if err := rollForward(ctx, g, h, to, autoApprove, st); err != nil {
					if st != nil {
						return st.fail(apply.KindApply, err)
					}
					return err
				}
				return nil
			}
			res, err := apply.Rollback(ctx, h, apply.RollbackOptions{
				StateDir: g.stateDir(),
				To:       to,
				Out:      progress,
				Events:   events,
				Progress: live,
				Executor: &apply.HostExecutor{Host: h, Devices: devices, Indexes: providers.IndexesOf(h)},
				Confirm: func(p *apply.RollbackPlan) bool {
					if st != nil {
						st.write(map[string]any{"type": "rollback_plan", "rollback": p})
					} else {
						showRollback(g, p)
					}
					ok, err := confirm(g, autoApprove, "Do you want to roll back?")
					confirmErr = err
					return ok
				},
				JournalPoint: applyHooks.journalPoint,
			})
			if st != nil {
				return rollbackStream(st, res, err, confirmErr)
			}
			if confirmErr != nil {
				return confirmErr
			}
			if errors.Is(err, apply.ErrDeclined) {
				fmt.Fprintln(g.Stderr, "Rollback cancelled: nothing was changed.")
				return &exitCodeError{code: exitError}
			}
			if err != nil && res != nil && res.ExitCode() == exitAttention {
				// The journal could not be written part-way (the disk
				// full): the next rollback, once there is space, goes on
				// from its last whole record.
				fmt.Fprintf(g.Stderr, "Error: %v\nThe host needs attention: free space in the state directory, then run gpuenv rollback again.\n", err)
				return &exitCodeError{code: exitAttention}
			}
			if err != nil {
				return err
			}
			if res.Generation != 0 {
				fmt.Fprintln(g.Stdout)
				if res.Status == apply.StatusDone {
					fmt.Fprintf(g.Stdout, "Rollback complete: %d inverses run (generation %d).\n", len(res.Reverted), res.Generation)
					if res.NeedsReboot {
						fmt.Fprintln(g.Stdout, "A reboot is needed for the restored driver or kernel configuration to take effect.")
					}
				} else {
					reportReverted(g.Stdout, res)
				}
				fmt.Fprintf(g.Stdout, "Log: %s\n", res.LogPath)
			}
			if code := res.ExitCode(); code != 0 {
				return &exitCodeError{code: code}
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&to, "to", 0, "restore the host as it was right after generation `N` (0: before the first apply)")
	cmd.Flags().BoolVar(&autoApprove, "auto-approve", false, "roll back without asking for confirmation")
	addLockTimeoutFlag(cmd, &lockTimeout)
	addJSONFlag(cmd, g)
	return cmd
}

// showRollback is the human view of what a rollback will undo; the JSON
// view prints it as a rollback_plan event.
func showRollback(g *globalOptions, p *apply.RollbackPlan) {
	w := g.Stdout
	switch {
	case p.Continues != 0:
		fmt.Fprintf(w, "Finishing rollback generation %d, which did not finish.\n", p.Continues)
	case p.Finishing:
		fmt.Fprintf(w, "Generation %d did not finish; rollback finishes reverting it.\n", p.Generations[0])
	}
	fmt.Fprintf(w, "Rollback will undo generation %s, running %d inverses:\n", joinInts(p.Generations), len(p.Undo))
	for _, u := range p.Undo {
		fmt.Fprintf(w, "  %s\n", u)
	}
}

func joinInts(ids []int) string {
	s := ""
	for i, id := range ids {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprint(id)
	}
	return s
}

// rollbackStream ends rollback's JSON view: a diagnostic for what refused
// or stopped it, and the summary.
func rollbackStream(st *eventStream, res *apply.Result, err, confirmErr error) error {
	switch {
	case confirmErr != nil:
		return st.fail(apply.KindRollback, confirmErr)
	case errors.Is(err, apply.ErrDeclined):
		return st.fail(apply.KindRollback, errors.New("rollback cancelled: nothing was changed"))
	case err != nil && res != nil && res.ExitCode() == exitAttention:
		st.diagnostics(hcl.Diagnostics{{Severity: hcl.DiagError, Summary: err.Error(), Detail: "The host needs attention: free space in the state directory, then run gpuenv rollback again."}})
		return st.end(res, exitAttention)
	case err != nil:
		return st.fail(apply.KindRollback, err)
	}
	return st.end(res, res.ExitCode())
}
