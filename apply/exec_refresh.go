package apply

import (
	"context"
	"fmt"

	"github.com/gpuenv/gpuenv/planner/plan"
)

// refreshExecutor fetches a package manager's indexes. Its inverse
// changes nothing: the indexes are a cache of the archives that the
// package manager refreshes whenever it is told to, and the inverses of
// the package steps after it restore saved package files, not versions
// from the indexes; restoring the old indexes would only bring back what
// the archives have since replaced.
type refreshExecutor struct{ *HostExecutor }

var _ kindOps[plan.RefreshOp, RefreshInverse] = refreshExecutor{}

func (refreshExecutor) opField(op *plan.Operation) **plan.RefreshOp { return &op.Refresh }

func (refreshExecutor) invField(inv *Inverse) **RefreshInverse { return &inv.Refresh }

func (refreshExecutor) names(inv *RefreshInverse) ([]string, error) {
	if plan.RefreshCommand(plan.Manager(inv.Manager)) == nil {
		return nil, fmt.Errorf("refresh inverse of package manager %q", inv.Manager)
	}
	return []string{inv.Manager}, nil
}

func (refreshExecutor) prepare(_ context.Context, _ *Workspace, _ int, op *plan.RefreshOp) (*RefreshInverse, error) {
	return &RefreshInverse{Manager: string(op.Manager)}, nil
}

func (x refreshExecutor) run(ctx context.Context, ws *Workspace, op *plan.RefreshOp) error {
	argv := plan.RefreshCommand(op.Manager)
	if err := x.command(ctx, ws, aptEnv, argv...); err != nil {
		return fmt.Errorf("fetching %s's package indexes: %w", op.Manager, err)
	}
	return nil
}

func (refreshExecutor) undo(context.Context, *Workspace, *RefreshInverse) error { return nil }
