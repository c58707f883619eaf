package main

import (
	"encoding/json"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpuenv/gpuenv/spec"
)

// diagnosticsWidth is where HCL's text writer wraps details; 0 would
// disable wrapping, and a fixed width keeps output the same in tests and
// on terminals.
const diagnosticsWidth = 78

// writeDiagnostics prints diagnostics as HCL renders them (file:line:col,
// the source line, a marker under the range) to stderr, or, with --json,
// as a JSON document on stdout.
func writeDiagnostics(g *globalOptions, files map[string]*hcl.File, diags hcl.Diagnostics) error {
	if g.JSON {
		return writeJSON(g, struct {
			Valid       bool                  `json:"valid"`
			ErrorCount  int                   `json:"error_count"`
			WarnCount   int                   `json:"warning_count"`
			Diagnostics []spec.JSONDiagnostic `json:"diagnostics"`
		}{!diags.HasErrors(), len(diags.Errs()), len(diags) - len(diags.Errs()), spec.DiagnosticsJSON(diags)})
	}
	w := hcl.NewDiagnosticTextWriter(g.Stderr, files, diagnosticsWidth, g.Color())
	return w.WriteDiagnostics(diags)
}

// writeJSON prints v as indented JSON on stdout.
func writeJSON(g *globalOptions, v any) error {
	enc := json.NewEncoder(g.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
