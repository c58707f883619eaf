package apply

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpuenv/gpuenv/planner/plan"
)

// packagesExecutor carries out package transactions through the package
// manager each one names.
type packagesExecutor struct{ *HostExecutor }

var _ kindOps[plan.PackagesOp, PackagesInverse] = packagesExecutor{}

func (packagesExecutor) opField(op *plan.Operation) **plan.PackagesOp { return &op.Packages }

func (packagesExecutor) invField(inv *Inverse) **PackagesInverse { return &inv.Packages }

func (packagesExecutor) names(inv *PackagesInverse) ([]string, error) {
	var names []string
	for _, p := range inv.Packages {
		names = append(names, p.Name, p.Version)
	}
	return names, nil
}

func (x packagesExecutor) prepare(ctx context.Context, ws *Workspace, seq int, op *plan.PackagesOp) (*PackagesInverse, error) {
	m, _ := x.manager(string(op.Manager))
	return prepareTransaction(ctx, ws, seq, op, m)
}

func (x packagesExecutor) run(ctx context.Context, ws *Workspace, op *plan.PackagesOp) error {
	m, _ := x.manager(string(op.Manager))
	return m.run(ctx, ws, op)
}

func (x packagesExecutor) undo(ctx context.Context, ws *Workspace, inv *PackagesInverse) error {
	m, _ := x.manager(inv.Manager)
	return m.undo(ctx, ws, inv)
}

// packageManager carries out the transactions of one package manager,
// with the contract of Executor; prepareTransaction prepares them through
// its transactionHooks.
type packageManager interface {
	transactionHooks
	run(ctx context.Context, ws *Workspace, op *plan.PackagesOp) error
	undo(ctx context.Context, ws *Workspace, inv *PackagesInverse) error
	// recover brings the manager back to a consistent state after a
	// transaction was killed, before the transaction's undo.
	recover(ctx context.Context, ws *Workspace) error
	// check confirms that the manager's database shows what want, the
	// expectations of this manager's transactions, says.
	check(ctx context.Context, ws *Workspace, want []Expectation) error
}

// packageManagers is the type of each package manager.
var packageManagers = map[string]func(*HostExecutor) packageManager{
	"apt": func(x *HostExecutor) packageManager { return aptManager{x} },
	"dnf": func(x *HostExecutor) packageManager { return dnfManager{x} },
	"pip": func(x *HostExecutor) packageManager { return pipManager{x} },
}

// manager is the package manager named name; ok is false for a name
// gpuenv does not know, which gets apt (the planner never writes one).
func (x *HostExecutor) manager(name string) (m packageManager, ok bool) {
	mk, ok := packageManagers[name]
	if !ok {
		return aptManager{x}, false
	}
	return mk(x), true
}

// lockTimeout is how long a package transaction waits for another
// package manager.
func (x *HostExecutor) lockTimeout() time.Duration {
	if x.PackageLockTimeout > 0 {
		return x.PackageLockTimeout
	}
	return DefaultPackageLockTimeout
}

// waitForLock waits, up to deadline, for another package manager to
// release its lock: held says whether one holds it and which process (0:
// not known). The first time it is held, waiting is told who holds it;
// at the deadline, stuck gives the error.
func waitForLock(ctx context.Context, ws *Workspace, deadline time.Time, held func() (pid int, held bool, err error), waiting func(holder string), stuck func(pid int) error) error {
	said := false
	for {
		pid, locked, err := held()
		if err != nil || !locked {
			return err
		}
		if !said {
			waiting(processName(pid))
			said = true
		}
		if time.Now().After(deadline) {
			return stuck(pid)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// processName names process pid for a person: its number and command.
func processName(pid int) string {
	if pid <= 0 {
		return "another process"
	}
	name := "process " + strconv.Itoa(pid)
	if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil {
		name += " (" + strings.TrimSpace(string(comm)) + ")"
	}
	return name
}

// transactionHooks are what one package manager does in each step of
// prepareTransaction.
type transactionHooks interface {
	// waitLock waits for another package manager at work to finish: it
	// would change the state read next. Waiting now also fails a long
	// wait before anything began.
	waitLock(ctx context.Context, ws *Workspace) error
	// pinPending fixes the versions the plan could only learn at apply.
	pinPending(ctx context.Context, ws *Workspace, op *plan.PackagesOp) error
	// readPrior reads the state the transaction would change and refuses
	// a transaction the manager cannot carry out. It records in inv what
	// the manager's undo needs besides the packages. It returns nil, and
	// no error, when the transaction changes nothing of the host's (a pip
	// environment it creates), having said so in inv.
	readPrior(ctx context.Context, ws *Workspace, op *plan.PackagesOp, inv *PackagesInverse) (priorState, error)
}

// priorState is the state of the packages before one transaction, as
// its package manager reads it.
type priorState interface {
	// direct returns the packages the operation names (affected) and
	// those of them whose installed files it replaces or removes
	// (changes); an error refuses the transaction (a package held that
	// the plan does not release).
	direct(op *plan.PackagesOp) (affected, changes []string, err error)
	// simulate dry-runs the transaction and returns the packages it would
	// change besides the pins: dependencies installed, upgraded,
	// downgraded or removed with them.
	simulate(ctx context.Context, ws *Workspace, op *plan.PackagesOp) ([]string, error)
	// changes reports whether a package the dry run names loses its
	// installed files.
	changes(name string) bool
	// prior records a package as it is, saving its installed package
	// file into the generation when changed.
	prior(ctx context.Context, ws *Workspace, seq int, name string, changed bool) ([]PriorPackage, error)
	// finish adds to inv what the manager records besides the packages.
	finish(inv *PackagesInverse, affected map[string]bool)
}

// batchSaver is a priorState that saves the package files of all the
// packages a transaction changes at once, before prior records each: one
// download for them all instead of one per package.
type batchSaver interface {
	saveAll(ctx context.Context, ws *Workspace, seq int, names []string) error
}

// prepareTransaction is the prepare of every package manager: wait for
// the lock, pin pending versions, read the prior state, learn from a dry
// run which packages the transaction affects, and record each of them,
// saving the package files of those it changes, in name order.
func prepareTransaction(ctx context.Context, ws *Workspace, seq int, op *plan.PackagesOp, m transactionHooks) (*PackagesInverse, error) {
	inv := &PackagesInverse{Manager: string(op.Manager)}
	if err := m.waitLock(ctx, ws); err != nil {
		return nil, err
	}
	if err := m.pinPending(ctx, ws, op); err != nil {
		return nil, err
	}
	prior, err := m.readPrior(ctx, ws, op, inv)
	if err != nil {
		return nil, err
	}
	if prior == nil {
		return inv, nil
	}
	affected := map[string]bool{}
	changes := map[string]bool{} // packages whose installed files go
	direct, changed, err := prior.direct(op)
	if err != nil {
		return nil, err
	}
	for _, n := range direct {
		affected[n] = true
	}
	for _, n := range changed {
		changes[n] = true
	}
	listed, err := prior.simulate(ctx, ws, op)
	if err != nil {
		return nil, err
	}
	for _, n := range listed {
		affected[n] = true
		if prior.changes(n) {
			changes[n] = true
		}
	}
	// What the progress of the transaction counts its packages against.
	if len(listed) > 0 {
		ws.progress.plan(len(listed))
	} else {
		ws.progress.plan(len(op.Install) + len(op.Remove))
	}
	prior.finish(inv, affected)
	names := slices.Sorted(maps.Keys(affected))
	if bs, ok := prior.(batchSaver); ok {
		var changed []string
		for _, n := range names {
			if changes[n] {
				changed = append(changed, n)
			}
		}
		if err := bs.saveAll(ctx, ws, seq, changed); err != nil {
			return nil, err
		}
	}
	for _, n := range names {
		pp, err := prior.prior(ctx, ws, seq, n, changes[n])
		if err != nil {
			return nil, err
		}
		inv.Packages = append(inv.Packages, pp...)
	}
	return inv, nil
}

// recoveryNote is what the journal says of a package manager's recovery
// before the inverse of a transaction that was cut short.
func recoveryNote(manager string) string {
	switch manager {
	case "dnf":
		return "package manager recovery (dnf check; the inverse resolves a package left installed twice)"
	case "pip":
		return "no package manager recovery: pip keeps no transaction state; the inverse restores the environment"
	}
	return "package manager recovery (dpkg --audit; the inverse repairs what an interrupted dpkg left, from the saved package files)"
}
