package planner

import "github.com/gpuenv/gpuenv/planner/plan"

// Batch groups the package operations of ordered steps into transactions
// and numbers each operation with the transaction that carries it out.
//
// Package operations for one manager that follow each other in the plan,
// with nothing else in between, become one transaction: a package manager
// resolves a whole set of pins at once better than one at a time (an
// upgrade of the driver and of the toolkit that needs it cannot be done in
// either order alone), and one transaction is one journal entry with one
// inverse. Any other operation in between ends a transaction, since its
// step may need the packages before it in place and the packages after it
// may need it. Two operations that disagree (one removes what the other
// installs, two versions of one package, pip operations for different
// environments) are not merged.
//
// Batch sets Operation.Transaction on the steps' package operations.
func Batch(steps []plan.Step) []plan.Transaction {
	var txs []plan.Transaction
	var cur *plan.Transaction
	for si := range steps {
		s := &steps[si]
		for oi := range s.Operations {
			op := &s.Operations[oi]
			if op.Kind != plan.OpPackages || op.Packages == nil {
				cur = nil
				continue
			}
			if cur != nil && plan.Mergeable(&cur.Op, op.Packages) {
				plan.Merge(&cur.Op, op.Packages)
				if cur.Steps[len(cur.Steps)-1] != s.Address {
					cur.Steps = append(cur.Steps, s.Address)
				}
			} else {
				txs = append(txs, plan.Transaction{ID: len(txs) + 1, Steps: []string{s.Address}})
				cur = &txs[len(txs)-1]
				plan.Merge(&cur.Op, op.Packages)
			}
			op.Transaction = cur.ID
		}
	}
	// cur points into txs, which append may have moved; every transaction
	// was finished through the pointer before the next append, so the
	// copies in txs are complete.
	return txs
}
