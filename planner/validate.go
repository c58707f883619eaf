package planner

import (
	"errors"
	"fmt"
)

// validateSteps checks what providers return: each step has an address of
// its own, a real action, and well-formed operations.
func validateSteps(steps []Step) error {
	var errs []error
	seen := map[string]bool{}
	for _, s := range steps {
		if s.Address == "" {
			errs = append(errs, errors.New("a step has no address"))
			continue
		}
		if seen[s.Address] {
			errs = append(errs, fmt.Errorf("two steps have the address %q", s.Address))
		}
		seen[s.Address] = true
		if s.Action <= NoOp || s.Action > Delete {
			errs = append(errs, fmt.Errorf("step %s: action %v is not a change", s.Address, s.Action))
		}
		for i, op := range s.Operations {
			if err := op.validate(); err != nil {
				errs = append(errs, fmt.Errorf("step %s operation %d: %w", s.Address, i+1, err))
			}
		}
	}
	return errors.Join(errs...)
}

// validate checks that exactly the field Kind names is set.
func (op *Operation) validate() error {
	set := map[OpKind]bool{
		OpPackages: op.Packages != nil,
		OpFile:     op.File != nil,
		OpGroup:    op.Group != nil,
		OpKernel:   op.Kernel != nil,
		OpService:  op.Service != nil,
		OpDevice:   op.Device != nil,
	}
	known, ok := set[op.Kind]
	if !ok {
		return fmt.Errorf("unknown kind %q", op.Kind)
	}
	if !known {
		return fmt.Errorf("kind %q without its %s field", op.Kind, op.Kind)
	}
	for k, isSet := range set {
		if isSet && k != op.Kind {
			return fmt.Errorf("kind %q also carries a %s field", op.Kind, k)
		}
	}
	if op.Packages != nil && op.Packages.Manager == "" {
		return errors.New("package operation without a manager")
	}
	if op.Kind != OpPackages && op.Transaction != 0 {
		return fmt.Errorf("%s operation names transaction %d", op.Kind, op.Transaction)
	}
	return nil
}

// Validate checks a plan read back from a file before it is acted on: the
// steps as validateSteps does, and that every package operation names a
// transaction of the plan that lists its step.
func (p *Plan) Validate() error {
	if err := validateSteps(p.Steps); err != nil {
		return err
	}
	txs := map[int]*Transaction{}
	for i := range p.Transactions {
		t := &p.Transactions[i]
		if t.ID != i+1 {
			return fmt.Errorf("transaction %d is numbered %d", i+1, t.ID)
		}
		if t.Op.Manager == "" {
			return fmt.Errorf("transaction %d has no manager", t.ID)
		}
		txs[t.ID] = t
	}
	for _, s := range p.Steps {
		for i, op := range s.Operations {
			if op.Kind != OpPackages {
				continue
			}
			t := txs[op.Transaction]
			if t == nil {
				return fmt.Errorf("step %s operation %d: no transaction %d in the plan", s.Address, i+1, op.Transaction)
			}
			found := false
			for _, a := range t.Steps {
				found = found || a == s.Address
			}
			if !found {
				return fmt.Errorf("step %s operation %d: transaction %d does not list the step", s.Address, i+1, t.ID)
			}
		}
	}
	return nil
}
