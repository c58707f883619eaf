package main

import (
	"fmt"
	"io"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpuenv/gpuenv/spec"
)

// validateView shows what gpuenv validate found. One is chosen from the
// flags when the command starts (newValidateView). Every method returns
// the first write error.
type validateView interface {
	// Diagnostics shows every problem found in the spec whose sources
	// are files (nil when none were read).
	Diagnostics(files map[string]*hcl.File, diags hcl.Diagnostics) error
	// Valid says that the spec is valid; warnings says whether
	// Diagnostics showed any.
	Valid(warnings bool) error
}

// newValidateView returns the view the flags ask for.
func newValidateView(g *globalOptions) validateView {
	if g.JSON {
		return &validateJSON{g: g}
	}
	return &validateHuman{w: g.Stdout, diagnostics: g.diagnosticWriter}
}

// validateHuman writes diagnostics as HCL renders them (file:line:col, the
// source line, a marker under the range) on stderr, and says on w that the
// spec is valid.
type validateHuman struct {
	w           io.Writer
	diagnostics func(files map[string]*hcl.File) hcl.DiagnosticWriter
}

var _ validateView = (*validateHuman)(nil)

func (v *validateHuman) Diagnostics(files map[string]*hcl.File, diags hcl.Diagnostics) error {
	return v.diagnostics(files).WriteDiagnostics(diags)
}

func (v *validateHuman) Valid(warnings bool) error {
	msg := "Success! The spec is valid."
	if warnings {
		msg = "Success! The spec is valid, but there were some warnings."
	}
	_, err := fmt.Fprintln(v.w, msg)
	return err
}

// validateDocument is what validate --json prints.
type validateDocument struct {
	FormatVersion string                `json:"format_version"`
	Valid         bool                  `json:"valid"`
	ErrorCount    int                   `json:"error_count"`
	WarnCount     int                   `json:"warning_count"`
	Diagnostics   []spec.JSONDiagnostic `json:"diagnostics"`
}

// validateJSON writes one validateDocument on stdout, which also says
// whether the spec is valid.
type validateJSON struct {
	g *globalOptions
}

var _ validateView = (*validateJSON)(nil)

func (v *validateJSON) Diagnostics(_ map[string]*hcl.File, diags hcl.Diagnostics) error {
	errs := len(diags.Errs())
	return writeJSON(v.g, validateDocument{
		FormatVersion: validateFormatVersion,
		Valid:         errs == 0,
		ErrorCount:    errs,
		WarnCount:     len(diags) - errs,
		Diagnostics:   spec.DiagnosticsJSON(diags),
	})
}

// Valid writes nothing: the document already says so.
func (v *validateJSON) Valid(bool) error { return nil }
