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
// reaches no provider, so that what it writes is in the plan or made by
// the function cmd hands it (Options.Generate), never decided by an
// observer of its own.
func TestApplyImportsOnlyHostAccess(t *testing.T) {
	deps := goListDeps(t, ".", "./...")
	// The listing is what the rule is read from: it must show apply and
	// the host access it does use.
	for _, p := range []string{module + "/apply", module + "/apply/applytest", module + "/providers/host"} {
		if !slices.Contains(deps, p) {
			t.Fatalf("go list -deps ./apply/... does not list %s: %q", p, deps)
		}
	}
	for _, p := range deps {
		host := p == module+"/providers/host" || strings.HasPrefix(p, module+"/providers/host/")
		if (strings.HasPrefix(p, module+"/providers/") && !host) || p == module+"/providers" || strings.HasPrefix(p, module+"/cmd/") {
			t.Errorf("apply reaches %s: apply may import the planner and host access (providers/host), nothing else of the providers; take what it needs from a function cmd hands in", p)
		}
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
