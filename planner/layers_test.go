package planner_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/gpuenv/gpuenv"

// TestPlannerImportsNoProviders holds the planner to its row of the
// design's package table: it plans from the spec and the facts, data in
// and data out, and reaches neither the host, the providers, apply nor
// the command; the observation document (planner/facts) imports nothing
// of ours but the finding type, which imports nothing of ours at all.
func TestPlannerImportsNoProviders(t *testing.T) {
	deps := goListDeps(t, "./...")
	for _, p := range []string{module + "/planner", module + "/planner/facts", module + "/spec"} {
		if !slices.Contains(deps, p) {
			t.Fatalf("go list -deps ./planner/... does not list %s: %q", p, deps)
		}
	}
	for _, p := range deps {
		for _, banned := range []string{"/providers", "/apply", "/cmd"} {
			if p == module+banned || strings.HasPrefix(p, module+banned+"/") {
				t.Errorf("the planner reaches %s: it may import the spec and its own packages; what it needs of the host comes in the facts", p)
			}
		}
	}
	for _, p := range goListDeps(t, "./facts") {
		if p != module+"/planner/facts" && p != module+"/planner/finding" && strings.HasPrefix(p, module+"/") {
			t.Errorf("planner/facts reaches %s: the observation document is plain data and imports nothing of ours but the finding type", p)
		}
	}
	for _, p := range goListDeps(t, "./finding") {
		if p != module+"/planner/finding" && strings.HasPrefix(p, module+"/") {
			t.Errorf("planner/finding reaches %s: the finding type is a leaf, which the observation document holds", p)
		}
	}
}

// TestLeavesImportOnlyVersions holds the facts and the tables to being
// leaves: the observation document and the compatibility tables (with the
// table of NVIDIA's repositories) are data every layer reads, so they
// import nothing of ours but version parsing (spec/version and what it
// needs) and the finding type (itself a leaf, above), and a change
// anywhere else can never reach them.
func TestLeavesImportOnlyVersions(t *testing.T) {
	allowed := append(goListDeps(t, "../spec/version"), module+"/planner/finding")
	if !slices.Contains(allowed, module+"/spec/version") {
		t.Fatalf("go list -deps ../spec/version does not list spec/version: %q", allowed)
	}
	for _, leaf := range []string{"facts", "compat", "compat/nvidiarepo"} {
		for _, p := range goListDeps(t, "./"+leaf) {
			if p == module+"/planner/"+leaf || !strings.HasPrefix(p, module+"/") || slices.Contains(allowed, p) {
				continue
			}
			t.Errorf("planner/%s reaches %s: a leaf imports nothing of ours but spec/version", leaf, p)
		}
	}
}

// goListDeps lists the packages that pkgs import, directly or not,
// without their tests.
func goListDeps(t *testing.T, pkgs ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}"}, pkgs...)...).Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list -deps %s: %v\n%s", strings.Join(pkgs, " "), err, stderr)
	}
	return strings.Fields(string(out))
}
