package main

import (
	"bytes"
	"encoding/json"
	"io"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpuenv/gpuenv/internal/jsonformat"
	"github.com/gpuenv/gpuenv/planner/doctor"
	"github.com/gpuenv/gpuenv/spec"
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

// errorFormatVersion versions errorDocument.
const errorFormatVersion = jsonformat.Version

// errorDocument is what a command run with --json prints on stdout when it
// fails before it has a document of its own to print: the error, as a
// message and as an error diagnostic, the shape the other documents give
// their errors, and the exit status.
type errorDocument struct {
	FormatVersion string                `json:"format_version"`
	Errored       bool                  `json:"errored"`
	Error         string                `json:"error"`
	ExitCode      int                   `json:"exit_code"`
	Diagnostics   []spec.JSONDiagnostic `json:"diagnostics"`
}

func newErrorDocument(err error, code int) errorDocument {
	return errorDocument{
		FormatVersion: errorFormatVersion,
		Errored:       true,
		Error:         err.Error(),
		ExitCode:      code,
		Diagnostics:   []spec.JSONDiagnostic{{Severity: "error", Summary: err.Error()}},
	}
}

// markStyle is a doctor check's mark, coloured on a terminal as plan
// colours its actions: ✗ a problem red, ! a warning yellow.
func markStyle(s doctor.Status, color bool) string {
	m := s.Mark()
	if !color {
		return m
	}
	switch s {
	case doctor.Problem:
		return ansiRed + m + ansiReset
	case doctor.Warning:
		return ansiYellow + m + ansiReset
	}
	return m
}

// crossColor writes through to w with every ✗ red.
type crossColor struct{ w io.Writer }

func (c *crossColor) Write(p []byte) (int, error) {
	if !bytes.Contains(p, []byte("✗")) {
		return c.w.Write(p)
	}
	if _, err := c.w.Write(bytes.ReplaceAll(p, []byte("✗"), []byte(ansiRed+"✗"+ansiReset))); err != nil {
		return 0, err
	}
	return len(p), nil
}
