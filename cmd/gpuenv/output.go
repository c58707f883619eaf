package main

import (
	"encoding/json"
	"os"
	"path/filepath"

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

// writeWhole writes data to a temporary file beside name, with mode, and
// moves it into place with put (os.Rename replaces what is there, os.Link
// refuses to), so that no half-written file is ever found at name.
func writeWhole(name string, data []byte, mode os.FileMode, put func(tmp, name string) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), mode); err != nil {
		return err
	}
	return put(tmp.Name(), name)
}

// writeJSON prints v as indented JSON on stdout.
func writeJSON(g *globalOptions, v any) error {
	enc := json.NewEncoder(g.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
