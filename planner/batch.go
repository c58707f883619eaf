package planner

import "slices"

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
func Batch(steps []Step) []Transaction {
	var txs []Transaction
	var cur *Transaction
	for si := range steps {
		s := &steps[si]
		for oi := range s.Operations {
			op := &s.Operations[oi]
			if op.Kind != OpPackages || op.Packages == nil {
				cur = nil
				continue
			}
			if cur != nil && mergeable(&cur.Op, op.Packages) {
				merge(&cur.Op, op.Packages)
				if cur.Steps[len(cur.Steps)-1] != s.Address {
					cur.Steps = append(cur.Steps, s.Address)
				}
			} else {
				txs = append(txs, Transaction{ID: len(txs) + 1, Steps: []string{s.Address}})
				cur = &txs[len(txs)-1]
				merge(&cur.Op, op.Packages)
			}
			op.Transaction = cur.ID
		}
	}
	// cur points into txs, which append may have moved; every transaction
	// was finished through the pointer before the next append, so the
	// copies in txs are complete.
	return txs
}

// mergeable reports whether b can join the transaction a.
func mergeable(a, b *PackagesOp) bool {
	if a.Manager != b.Manager || a.Reinstall != b.Reinstall {
		return false
	}
	if Manager(a.Manager) == ManagerPip && (a.Python != b.Python || a.Venv != b.Venv || a.IndexURL != b.IndexURL) {
		return false
	}
	if len(a.Remove) > 0 && len(b.Remove) > 0 && a.Purge != b.Purge {
		return false
	}
	for _, p := range b.Install {
		if slices.Contains(a.Remove, p.Name) {
			return false
		}
		for _, q := range a.Install {
			if q.Name == p.Name && (q.Version != p.Version || !slices.Equal(q.Extras, p.Extras)) {
				return false
			}
		}
	}
	for _, name := range b.Remove {
		if slices.ContainsFunc(a.Install, func(p PackagePin) bool { return p.Name == name }) {
			return false
		}
	}
	for _, name := range b.Hold {
		if slices.Contains(a.Unhold, name) {
			return false
		}
	}
	for _, name := range b.Unhold {
		if slices.Contains(a.Hold, name) {
			return false
		}
	}
	return true
}

// merge adds b's changes to a, which mergeable allowed.
func merge(a, b *PackagesOp) {
	if a.Manager == "" {
		a.Manager, a.Python, a.Venv, a.IndexURL, a.Reinstall = b.Manager, b.Python, b.Venv, b.IndexURL, b.Reinstall
	}
	for _, p := range b.Install {
		if !slices.ContainsFunc(a.Install, func(q PackagePin) bool { return q.Name == p.Name }) {
			p.Extras = slices.Clone(p.Extras)
			a.Install = append(a.Install, p)
		}
	}
	if len(b.Remove) > 0 {
		a.Purge = b.Purge
	}
	a.Remove = appendNew(a.Remove, b.Remove)
	a.Hold = appendNew(a.Hold, b.Hold)
	a.Unhold = appendNew(a.Unhold, b.Unhold)
	a.AllowDowngrade = a.AllowDowngrade || b.AllowDowngrade
}

func appendNew(dst, src []string) []string {
	for _, s := range src {
		if !slices.Contains(dst, s) {
			dst = append(dst, s)
		}
	}
	return dst
}
