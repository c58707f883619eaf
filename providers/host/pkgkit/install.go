package pkgkit

import (
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/host/pkgdb"
)

// The pieces below are what every provider of packages (the driver, the
// toolkit, cuDNN, a distribution's framework) builds its steps from, so
// that they pin, word and remove packages alike.

// Names are the packages' names, in order.
func Names(pkgs []planner.PackageName) []string {
	out := make([]string, len(pkgs))
	for i, p := range pkgs {
		out[i] = p.Name
	}
	return out
}

// Install is the operation that installs every package of pkgs at the
// picked version, or its own where Versions has one (or, when apply
// learns the version, within its constraint).
func (p Picked) Install(manager plan.Manager, pkgs []planner.PackageName) *plan.PackagesOp {
	op := &plan.PackagesOp{Manager: manager, Install: make([]plan.PackagePin, len(pkgs))}
	for i, pn := range pkgs {
		v := p.Version
		if own, ok := p.Versions[pn.Name]; ok {
			v = own
		}
		op.Install[i] = plan.PackagePin{Name: pn.Name, Version: v, Constraint: p.Constraint}
	}
	return op
}

// Downgrades reports whether the picked version is older than the
// installed one, which the package manager installs only when told to.
func (p Picked) Downgrades(manager plan.Manager, installed string) bool {
	return p.Version != "" && pkgdb.Compare(string(manager), p.Version, installed) < 0
}

// Reason is a package step's reason: why, then where the picked version
// came from when the package manager could not say.
func (p Picked) Reason(why []string) string {
	if p.Note != "" {
		why = append(why, p.Note)
	}
	return plan.Sentence(why)
}

// NoVersion is the error that a package step cannot be planned because
// Pick found no version of what to install; subject is the attribute
// that asks for the version.
func NoVersion(what string, err error, subject hcl.Range) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "No " + what + " version to install",
		Detail:   err.Error() + ".",
		Subject:  subject.Ptr(),
	}
}

// Remove is the step absent = true plans at address: removing the
// installed packages that make up what; nil when none is installed.
func Remove(address, what string, manager plan.Manager, packages []string) *plan.Step {
	if len(packages) == 0 {
		return nil
	}
	list := strings.Join(packages, ", ")
	return &plan.Step{
		Address:    address,
		Action:     plan.Delete,
		Before:     map[string]string{"packages": list},
		Reason:     "absent = true removes " + what + ": " + list + ".",
		ReasonCode: plan.ReasonAbsentRequested,
		Operations: []plan.Operation{{Kind: plan.OpPackages, Packages: &plan.PackagesOp{Manager: manager, Remove: packages}}},
	}
}
