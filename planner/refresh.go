package planner

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
)

// RefreshAddress is the address of the step that refreshes manager's
// indexes ("index.apt").
func RefreshAddress(m plan.Manager) string { return "index." + string(m) }

// refreshSteps adds, for each package manager that some step leaves a
// version to apply for (PackagePin.KnownAfterApply), the step that fetches
// the manager's indexes before it, and makes those steps depend on it —
// unless a step of the plan refreshes them already (a repository's sources
// file is followed by apt-get update). Without a refresh, apply would pin
// such a version from the same lists the planner could not find it in.
func refreshSteps(steps []plan.Step, ix *facts.PackageIndexes) []plan.Step {
	deferred := map[plan.Manager][]int{}
	refreshed := map[plan.Manager]bool{}
	for i, s := range steps {
		for _, op := range s.Operations {
			switch {
			case op.Packages != nil:
				m := op.Packages.Manager
				if slices.ContainsFunc(op.Packages.Install, plan.PackagePin.KnownAfterApply) && !slices.Contains(deferred[m], i) {
					deferred[m] = append(deferred[m], i)
				}
			case op.File != nil:
				for _, m := range []plan.Manager{plan.ManagerApt, plan.ManagerDnf} {
					if slices.Equal(op.File.After, plan.RefreshCommand(m)) {
						refreshed[m] = true
					}
				}
			case op.Refresh != nil:
				refreshed[op.Refresh.Manager] = true
			}
		}
	}
	for _, m := range []plan.Manager{plan.ManagerApt, plan.ManagerDnf} {
		if len(deferred[m]) == 0 || refreshed[m] {
			continue
		}
		var users []string
		for _, i := range deferred[m] {
			steps[i].DependsOn = append(steps[i].DependsOn, RefreshAddress(m))
			users = append(users, steps[i].Address)
		}
		steps = append(steps, refreshStep(m, ix, users))
	}
	return steps
}

// refreshStep is the step that refreshes m's indexes for the steps users.
func refreshStep(m plan.Manager, ix *facts.PackageIndexes, users []string) plan.Step {
	tool := strings.Join(plan.RefreshCommand(m), " ")
	var missing []facts.IndexSource
	if ix != nil && ix.Manager == string(m) {
		missing = ix.Missing
	}
	var why string
	switch {
	case len(missing) > 0 && len(ix.Indexes) == 0:
		why = fmt.Sprintf("no package index of %s is on disk: %s has not run for the %s (%s)", m, tool, plural(len(missing), "configured source", "configured sources"), sourcesText(missing))
	case len(missing) > 0:
		why = fmt.Sprintf("%s has not fetched the package index of %s (%s)", tool, plural(len(missing), "configured source", "configured sources"), sourcesText(missing))
	default:
		why = fmt.Sprintf("the package indexes on disk list no version that %s can install", strings.Join(users, ", "))
	}
	return plan.Step{
		Address: RefreshAddress(m),
		Action:  plan.Update,
		Before:  map[string]string{"sources_without_index": strconv.Itoa(len(missing))},
		After:   map[string]string{"sources_without_index": "0"},
		Reason: plan.Sentence([]string{
			why,
			fmt.Sprintf("it runs first, and the versions %s installs are known after apply, chosen from the fetched indexes as a plan chooses them", strings.Join(users, ", ")),
			"the indexes are a cache of the archives, so rollback does not restore the ones before",
		}),
		ReasonCode: plan.ReasonDependency,
		Operations: []plan.Operation{{Kind: plan.OpRefresh, Refresh: &plan.RefreshOp{Manager: m}}},
	}
}

// sourcesText names sources as a sources list does, three at most.
func sourcesText(srcs []facts.IndexSource) string {
	var out []string
	for i, s := range srcs {
		if i == 3 {
			out = append(out, fmt.Sprintf("and %d more", len(srcs)-3))
			break
		}
		name := s.URI
		for _, part := range []string{s.Repo, s.Suite, s.Component} {
			if part != "" {
				name += " " + part
			}
		}
		out = append(out, name)
	}
	return strings.Join(out, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}
