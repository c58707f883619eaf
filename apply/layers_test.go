package apply_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/gpuenv/gpuenv"

// TestApplyImportsOnlyHostAccess holds apply to its row of the design's
// package table: it runs a plan's operations through host access and
// reaches no provider and not the planner that made the plan, so that what it writes is in the plan or made by
// the function cmd hands it (Options.Generate), never decided by an
// observer of its own.
func TestApplyImportsOnlyHostAccess(t *testing.T) {
	deps := goListDeps(t, ".", "./...")
	// The listing is what the rule is read from: it must show apply and
	// the host access it does use.
	for _, p := range []string{module + "/apply", module + "/apply/applytest", module + "/providers/host", module + "/planner/plan"} {
		if !slices.Contains(deps, p) {
			t.Fatalf("go list -deps ./apply/... does not list %s: %q", p, deps)
		}
	}
	for _, p := range deps {
		host := p == module+"/providers/host" || strings.HasPrefix(p, module+"/providers/host/")
		if (strings.HasPrefix(p, module+"/providers/") && !host) || p == module+"/providers" || strings.HasPrefix(p, module+"/cmd/") {
			t.Errorf("apply reaches %s: apply may import the plan's data and host access (providers/host), nothing else of the providers; take what it needs from a function cmd hands in", p)
		}
	}
	// Apply runs plans and makes none: the plan document and the status
	// file are in planner/plan, and the planner stays out of its reach (the
	// fakes of apply/applytest may batch the plans they build).
	if slices.Contains(goListDeps(t, ".", "."), module+"/planner") {
		t.Errorf("apply reaches the planner (%s): it may import the plan's data (planner/plan), not what makes plans", module+"/planner")
	}
}

// goListDeps lists, from dir, the packages that pkgs import, directly or
// not, without their tests.
func goListDeps(t *testing.T, dir string, pkgs ...string) []string {
	t.Helper()
	c := exec.Command("go", append([]string{"list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}"}, pkgs...)...)
	c.Dir = dir
	out, err := c.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list -deps %s: %v\n%s", strings.Join(pkgs, " "), err, stderr)
	}
	return strings.Fields(string(out))
}
