// Package plantest has helpers for tests of the planner and the providers:
// a spec from source text, and package candidates from a table.
package plantest

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpuenv/gpuenv/planner"
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
func (c Candidates) Versions(_ context.Context, _ planner.Manager, name string) ([]string, error) {
	return c[name], nil
}
