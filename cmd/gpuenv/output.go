package main

import (
	"encoding/json"

	"github.com/hashicorp/hcl/v2"
)

// diagnosticsWidth is where HCL's text writer wraps details; 0 would
// disable wrapping, and a fixed width keeps output the same in tests and
// on terminals.
const diagnosticsWidth = 78

// diagnosticWriter renders diagnostics for a person on stderr, in the
// one width and with colour as the flags and the terminal decide.
func (g *globalOptions) diagnosticWriter(files map[string]*hcl.File) hcl.DiagnosticWriter {
	return hcl.NewDiagnosticTextWriter(g.Stderr, files, diagnosticsWidth, g.Color())
}

// writeDiagnostics prints diagnostics as validate does: as HCL renders
// them (file:line:col, the source line, a marker under the range) to
// stderr, or, with --json, as a JSON document on stdout.
func writeDiagnostics(g *globalOptions, files map[string]*hcl.File, diags hcl.Diagnostics) error {
	return newValidateView(g).Diagnostics(files, diags)
}

// writeJSON prints v as indented JSON on stdout.
func writeJSON(g *globalOptions, v any) error {
	enc := json.NewEncoder(g.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
