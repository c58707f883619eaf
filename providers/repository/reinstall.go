package repository

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/host/pkgdb"
)

// Reinstall is the package operation that -replace plans for the
// installed packages among names: each pinned at the version installed
// now. It is nil when none of them is installed.
func Reinstall(obs *facts.Observation, manager plan.Manager, names []string) *plan.PackagesOp {
	op := &plan.PackagesOp{Manager: manager, Reinstall: true}
	for _, n := range names {
		if p, ok := pkgdb.Installed(obs.Packages, n, pkgdb.Configured); ok {
			op.Install = append(op.Install, plan.PackagePin{Name: n, Version: p.Version})
		}
	}
	if len(op.Install) == 0 {
		return nil
	}
	return op
}

// Reinstallable is an error diagnostic at subject when the package
// manager's indexes do not offer a pin of op at its installed version:
// apt and dnf reinstall from the repository, and a version it no longer
// lists would fail only once apply has begun.
func Reinstallable(ctx context.Context, cands planner.Candidates, address string, op *plan.PackagesOp, subject hcl.Range) *hcl.Diagnostic {
	var missing []string
	for _, p := range op.Install {
		vs, err := cands.Versions(ctx, op.Manager, p.Name)
		if err != nil {
			missing = append(missing, fmt.Sprintf("%s %s (the package manager could not be asked: %v)", p.Name, p.Version, err))
			continue
		}
		if _, ok := pkgdb.Match(string(op.Manager), p.Version, vs); !ok {
			missing = append(missing, p.Name+" "+p.Version)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Nothing to reinstall from",
		Detail: fmt.Sprintf("-replace %s reinstalls the installed versions, and the package indexes do not offer %s. "+
			"Refresh them (apt-get update, dnf makecache), or plan without -replace to move to a version they offer.", address, strings.Join(missing, ", ")),
		Subject: subject.Ptr(),
	}
}

// ReinstallReason is the reason of a step that -replace alone plans.
func ReinstallReason(op *plan.PackagesOp, more ...string) string {
	pins := make([]string, len(op.Install))
	for i, p := range op.Install {
		pins[i] = p.Name + " " + p.Version
	}
	return plan.Sentence(append([]string{planner.ReplaceReason, "reinstalls " + strings.Join(pins, ", ") + ", the versions installed now"}, more...))
}
