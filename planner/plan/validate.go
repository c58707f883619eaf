package plan

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gpuenv/gpuenv/spec/version"
)

// ValidateSteps checks what providers return: each step has an address of
// its own, a real action, and operations that meet CheckOperation.
func ValidateSteps(steps []Step) error {
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
		if !s.ReasonCode.Valid() {
			errs = append(errs, fmt.Errorf("step %s: unknown action_reason %q", s.Address, s.ReasonCode))
		}
		for i, op := range s.Operations {
			if err := CheckOperation(op); err != nil {
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
		OpRefresh:  op.Refresh != nil,
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

// Validate checks a plan read back from a file before it is acted on, as
// strictly as the planner's own output: every operation by
// CheckOperation; every package operation carried out by a transaction
// that is exactly the union of the package operations naming it, as Batch
// makes them; and every step's operations doing what its shown values
// (Before and After) say.
func (p *Plan) Validate() error {
	if err := ValidateSteps(p.Steps); err != nil {
		return err
	}
	if err := p.validateTransactions(); err != nil {
		return err
	}
	for i := range p.Steps {
		if err := p.Steps[i].checkShown(); err != nil {
			return fmt.Errorf("step %s: %w", p.Steps[i].Address, err)
		}
	}
	return nil
}

// validateTransactions rebuilds the plan's transactions from its steps'
// package operations as Batch does and refuses the plan unless they are
// the ones it carries: apply runs a transaction's operation, so it must
// change exactly what the steps listing it show, in their place.
func (p *Plan) validateTransactions() error {
	for i := range p.Transactions {
		t := &p.Transactions[i]
		if t.ID != i+1 {
			return fmt.Errorf("transaction %d is numbered %d", i+1, t.ID)
		}
		if t.Op.Manager == "" {
			return fmt.Errorf("transaction %d has no manager", t.ID)
		}
		if err := checkPackages(&t.Op); err != nil {
			return fmt.Errorf("transaction %d: %w", t.ID, err)
		}
	}
	union := make([]Transaction, len(p.Transactions))
	next, last := 1, 0 // the number a new transaction takes; the previous operation's
	for _, s := range p.Steps {
		for i, op := range s.Operations {
			if op.Kind != OpPackages {
				// Batch ends a transaction at any other operation.
				last = 0
				continue
			}
			id := op.Transaction
			if id < 1 || id > len(p.Transactions) {
				return fmt.Errorf("step %s operation %d: no transaction %d in the plan", s.Address, i+1, id)
			}
			if !slices.Contains(p.Transactions[id-1].Steps, s.Address) {
				return fmt.Errorf("step %s operation %d: transaction %d does not list the step", s.Address, i+1, id)
			}
			u := &union[id-1]
			switch id {
			case last:
				if !Mergeable(&u.Op, op.Packages) {
					return fmt.Errorf("step %s operation %d: transaction %d cannot carry it with the operations before it", s.Address, i+1, id)
				}
			case next:
				u.ID = id
				next++
			default:
				return fmt.Errorf("step %s operation %d: transaction %d is out of order (the operations of one transaction follow each other, and transactions are numbered in plan order)", s.Address, i+1, id)
			}
			Merge(&u.Op, op.Packages)
			if len(u.Steps) == 0 || u.Steps[len(u.Steps)-1] != s.Address {
				u.Steps = append(u.Steps, s.Address)
			}
			last = id
		}
	}
	for i := range p.Transactions {
		t, u := &p.Transactions[i], &union[i]
		if u.ID == 0 {
			return fmt.Errorf("transaction %d carries out no step's operation", t.ID)
		}
		if !slices.Equal(t.Steps, u.Steps) {
			return fmt.Errorf("transaction %d lists the steps %s, but carries out the operations of %s", t.ID, strings.Join(t.Steps, ", "), strings.Join(u.Steps, ", "))
		}
		if !samePackagesOp(&t.Op, &u.Op) {
			return fmt.Errorf("transaction %d is not the union of the package operations of %s", t.ID, strings.Join(t.Steps, ", "))
		}
	}
	return nil
}

func samePackagesOp(a, b *PackagesOp) bool {
	return a.Manager == b.Manager && a.Purge == b.Purge && a.AllowDowngrade == b.AllowDowngrade && a.Reinstall == b.Reinstall &&
		a.Python == b.Python && a.Venv == b.Venv && a.IndexURL == b.IndexURL &&
		slices.EqualFunc(a.Install, b.Install, func(x, y PackagePin) bool {
			return x.Name == y.Name && x.Version == y.Version && x.Constraint == y.Constraint && slices.Equal(x.Extras, y.Extras)
		}) &&
		slices.Equal(a.Remove, b.Remove) && slices.Equal(a.Hold, b.Hold) && slices.Equal(a.Unhold, b.Unhold)
}

// KnownAfterApply is what a step shows for a version only apply learns;
// its pins have no version (PackagePin.KnownAfterApply).
const KnownAfterApply = "(known after apply)"

// sameRPMVersion reports whether two EVRs share their version part: a
// dnf step shows its main package's version, and NVIDIA's RPMs of one
// driver differ from it in epoch and release (cuda-drivers 550.90.07-1,
// kmod-nvidia-latest-dkms 3:550.90.07-1.el9).
func sameRPMVersion(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	_, va, _ := version.SplitEVR(a)
	_, vb, _ := version.SplitEVR(b)
	return va == vb
}

// checkShown refuses a step whose package operations do something else
// than its shown values say, as providers fill them: the version it
// installs (After "version", or the "name=version" of After "package"),
// the packages (After "packages" or "package"), the packages it holds
// (After "held"), those a deletion removes (Before "packages" or
// "package") and, for pip, the index and extras.
func (s *Step) checkShown() error {
	var ops []*PackagesOp
	var pins []PackagePin
	dnf := map[string]bool{} // pins of dnf's, by name
	for _, op := range s.Operations {
		if op.Packages != nil {
			ops = append(ops, op.Packages)
			pins = append(pins, op.Packages.Install...)
			for _, p := range op.Packages.Install {
				if op.Packages.Manager == ManagerDnf {
					dnf[p.Name] = true
				}
			}
		}
	}
	if len(ops) == 0 {
		return nil
	}
	// A driver step shows the signed module packages it installs, each
	// at its own version; the rest of its packages share one.
	own := map[string]string{}
	if shown, ok := s.After[AfterSignedModules]; ok {
		var valid bool
		if own, valid = shownPins(shown); !valid {
			return fmt.Errorf("it shows the signed modules %q, which is not a list of name=version", shown)
		}
		var rest []PackagePin
		for _, p := range pins {
			v, ok := own[p.Name]
			if !ok {
				rest = append(rest, p)
				continue
			}
			if p.Version != v {
				return fmt.Errorf("it shows %s=%s but installs %s %s", p.Name, v, p.Name, p.Version)
			}
			delete(own, p.Name)
		}
		if len(own) > 0 {
			left := slices.Sorted(maps.Keys(own))
			return fmt.Errorf("it shows the signed module packages %s but does not install them", strings.Join(left, ", "))
		}
		pins = rest
	}
	names := make([]string, len(pins))
	for i, p := range pins {
		names[i] = p.Name
	}
	if len(pins) > 0 {
		want, ok := s.After["version"]
		pkg, pkgVersion, pinned := strings.Cut(s.After["package"], "=")
		if pinned {
			want, ok = pkgVersion, true
		}
		if !ok {
			return fmt.Errorf("it installs %s but shows no version", strings.Join(names, ", "))
		}
		for _, p := range pins {
			if p.Version != want && !(p.Version == "" && (want == "" || want == KnownAfterApply)) && !(dnf[p.Name] && sameRPMVersion(p.Version, want)) {
				got := p.Version
				if got == "" {
					got = KnownAfterApply
				}
				return fmt.Errorf("it shows version %s but installs %s %s", want, p.Name, got)
			}
		}
		if pkg != "" && !slices.Contains(names, pkg) {
			return fmt.Errorf("it shows the package %s but installs %s", pkg, strings.Join(names, ", "))
		}
		if shown, ok := s.After["packages"]; ok && !sameSet(splitShown(shown), names) {
			return fmt.Errorf("it shows the packages %s but installs %s", shown, strings.Join(names, ", "))
		}
	}
	if held, ok := s.After["held"]; ok {
		var hold []string
		for _, op := range ops {
			hold = append(hold, op.Hold...)
		}
		if !sameSet(splitShown(held), hold) {
			return fmt.Errorf("it shows %q held but holds %s", held, strings.Join(hold, ", "))
		}
	}
	if s.Action == Delete {
		var removed []string
		for _, op := range ops {
			removed = append(removed, op.Remove...)
		}
		shown, ok := s.Before["packages"]
		if pkg, _, pinned := strings.Cut(s.Before["package"], "="); pinned && !ok {
			shown, ok = pkg, true
		}
		if ok && !sameSet(splitShown(shown), removed) {
			return fmt.Errorf("it shows %s removed but removes %s", shown, strings.Join(removed, ", "))
		}
	}
	for _, op := range ops {
		if Manager(op.Manager) != ManagerPip {
			continue
		}
		if len(op.Install) > 0 && op.IndexURL != s.After["index_url"] {
			return fmt.Errorf("it shows the index %q but installs from %q", s.After["index_url"], op.IndexURL)
		}
		for _, p := range op.Install {
			if extras := strings.Join(p.Extras, ","); extras != s.After["extras"] {
				return fmt.Errorf("it shows the extras %q but installs %s with %q", s.After["extras"], p.Name, extras)
			}
		}
	}
	return nil
}

// splitShown splits a list as steps show it ("a, b"); "" is no list.
func splitShown(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ", ")
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

// AfterSignedModules is the shown value of a driver step that lists the
// signed module packages it installs, each at its own version (they are
// versioned by the kernel, not by the driver): "name=version, …".
const AfterSignedModules = "signed_modules"

// shownPins reads AfterSignedModules back: the version each package is
// shown at, by name; false when a part is not "name=version".
func shownPins(shown string) (map[string]string, bool) {
	out := map[string]string{}
	for _, part := range splitShown(shown) {
		name, v, ok := strings.Cut(part, "=")
		if !ok || name == "" || v == "" {
			return nil, false
		}
		out[name] = v
	}
	return out, true
}
