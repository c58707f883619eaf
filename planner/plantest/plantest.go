// Package plantest has helpers for tests of the planner and the providers:
// a spec from source text, package candidates from a table, and plans
// that must have no errors or, applied, leave nothing to do.
package plantest

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/spec"
)

// LoadSpec loads src as the spec file gpuenv.hcl, failing the test on any
// error diagnostic.
func LoadSpec(tb testing.TB, src string) *spec.Spec {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), "gpuenv.hcl")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		tb.Fatal(err)
	}
	s, diags := spec.Load(p, spec.LoadOptions{})
	if diags.HasErrors() {
		tb.Fatal(diags)
	}
	return s
}

// Candidates answers the package manager's candidate versions from a table
// of package name to versions, newest first, whatever the manager.
type Candidates map[string][]string

// Versions implements planner.Candidates.
func (c Candidates) Versions(_ context.Context, _ plan.Manager, name string) ([]string, error) {
	return c[name], nil
}

// Plan plans s against obs with pl, failing the test on an error
// diagnostic.
func Plan(tb testing.TB, pl *planner.Planner, s *spec.Spec, obs *facts.Observation) *plan.Plan {
	tb.Helper()
	plan, diags := pl.Plan(context.Background(), s, obs)
	if diags.HasErrors() {
		tb.Fatal(diags)
	}
	return plan
}

// Converged checks what every provider promises: once a plan is applied,
// and obs observes the result, planning s again finds nothing to do. after
// names what was applied ("applying"), for the failure message.
func Converged(tb testing.TB, pl *planner.Planner, s *spec.Spec, obs *facts.Observation, after string) {
	tb.Helper()
	if again, _ := pl.Plan(context.Background(), s, obs); len(again.Steps) != 0 {
		tb.Errorf("after %s: %+v", after, again.Steps)
	}
}

// Dpkg is a dpkg database holding ps, each installed unless it says
// otherwise.
func Dpkg(ps ...facts.Package) facts.Packages {
	for i := range ps {
		if ps[i].State == "" {
			ps[i].State, ps[i].Want = facts.StateInstalled, "install"
		}
	}
	return facts.Packages{Manager: facts.DatabaseDpkg, Total: len(ps), Packages: ps}
}
