package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuenv/gpuenv/apply"
	"github.com/gpuenv/gpuenv/providers/host"
)

// lockPoll is how often a command waiting for the state directory's lock
// looks again.
const lockPoll = 200 * time.Millisecond

func addLockTimeoutFlag(cmd *cobra.Command, d *time.Duration) {
	cmd.Flags().DurationVar(d, "lock-timeout", 0, "wait up to `DURATION` (30s, 5m) for another gpuenv to release the state directory's lock, instead of refusing at once")
}

// waitForStateLock says, as apply.CheckReady does, why a change to the
// state directory would be refused now; while the reason is a lock held
// by a gpuenv that is running, it waits up to timeout for it to go, as
// Terraform's -lock-timeout does. A lock left by a gpuenv that is gone is
// not waited for: only force-unlock removes it.
func waitForStateLock(ctx context.Context, g *globalOptions, h *host.Host, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	said := false
	for {
		err := apply.CheckReady(h, g.stateDir())
		le, ok := errors.AsType[*apply.LockedError](err)
		if !ok || le.Stale || timeout <= 0 {
			return err
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("%w; gave up after waiting %s (--lock-timeout)", err, timeout)
		}
		if !said {
			said = true
			debugFrom(ctx)("waiting up to %s for the lock: %v", timeout, err)
			if !g.JSON {
				fmt.Fprintf(g.Stderr, "Waiting up to %s for the state directory's lock: %v\n", timeout, err)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("interrupted while waiting for the state directory's lock: %v", err)
		case <-time.After(min(lockPoll, time.Until(deadline))):
		}
	}
}

// waitForLockOnly is waitForStateLock for rollback, which runs where
// apply is refused (an unfinished generation is what it finishes): only
// a held lock is an error here.
func waitForLockOnly(ctx context.Context, g *globalOptions, h *host.Host, timeout time.Duration) error {
	err := waitForStateLock(ctx, g, h, timeout)
	if le, ok := errors.AsType[*apply.LockedError](err); ok && !le.Stale {
		return err
	}
	return nil
}
