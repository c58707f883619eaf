package spec_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/gpuenv/gpuenv"

// TestSpecImportsNothingAbove holds the spec to its row of the design's
// package table: it reads HCL into a typed spec with HCL, cty and version
// parsing, and reaches none of the layers that use it (planner,
// providers, apply, the command).
func TestSpecImportsNothingAbove(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "./...").Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list -deps ./spec/...: %v\n%s", err, stderr)
	}
	deps := strings.Fields(string(out))
	for _, p := range []string{module + "/spec", module + "/spec/version", "github.com/hashicorp/hcl/v2"} {
		if !slices.Contains(deps, p) {
			t.Fatalf("go list -deps ./spec/... does not list %s: %q", p, deps)
		}
	}
	for _, p := range deps {
		for _, banned := range []string{"/planner", "/providers", "/apply", "/cmd"} {
			if p == module+banned || strings.HasPrefix(p, module+banned+"/") {
				t.Errorf("the spec reaches %s: it may import HCL, cty and version parsing, none of the layers that use it", p)
			}
		}
	}
}
