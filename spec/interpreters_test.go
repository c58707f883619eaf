package spec

import (
	"slices"
	"testing"
)

// TestInterpreters: each framework's interpreter, its python or its
// venv's bin/python, once, in the spec's order.
func TestInterpreters(t *testing.T) {
	s, diags := loadSrc(t, `
framework "pytorch" {
  venv = "/opt/ml"
}
framework "jax" {
  python = "/usr/bin/python3"
}
framework "tensorflow" {
  venv = "/opt/ml"
}
`)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if got, want := s.Interpreters(), []string{"/opt/ml/bin/python", "/usr/bin/python3"}; !slices.Equal(got, want) {
		t.Errorf("interpreters %q, want %q", got, want)
	}
}
