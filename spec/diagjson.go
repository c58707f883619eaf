package spec

import "github.com/hashicorp/hcl/v2"

// JSONDiagnostic is a diagnostic as data, for --json output. Its shape
// follows terraform validate -json, so tools that read one can read the
// other.
type JSONDiagnostic struct {
	Severity string     `json:"severity"` // "error" or "warning"
	Summary  string     `json:"summary"`
	Detail   string     `json:"detail,omitempty"`
	Range    *JSONRange `json:"range,omitempty"`
}

// JSONRange is a source range. Lines and columns count from 1, bytes from 0.
type JSONRange struct {
	Filename string  `json:"filename"`
	Start    JSONPos `json:"start"`
	End      JSONPos `json:"end"`
}

// JSONPos is a position in a source file.
type JSONPos struct {
	Line   int `json:"line"`
	Column int `json:"column"`
	Byte   int `json:"byte"`
}

// DiagnosticsJSON converts diagnostics to data, keeping their order. It
// never returns nil, so an empty list encodes as [] rather than null.
func DiagnosticsJSON(diags hcl.Diagnostics) []JSONDiagnostic {
	out := make([]JSONDiagnostic, 0, len(diags))
	for _, d := range diags {
		j := JSONDiagnostic{
			Severity: severityName(d.Severity),
			Summary:  d.Summary,
			Detail:   d.Detail,
		}
		if d.Subject != nil {
			j.Range = &JSONRange{
				Filename: d.Subject.Filename,
				Start:    jsonPos(d.Subject.Start),
				End:      jsonPos(d.Subject.End),
			}
		}
		out = append(out, j)
	}
	return out
}

func jsonPos(p hcl.Pos) JSONPos {
	return JSONPos{Line: p.Line, Column: p.Column, Byte: p.Byte}
}

func severityName(s hcl.DiagnosticSeverity) string {
	switch s {
	case hcl.DiagError:
		return "error"
	case hcl.DiagWarning:
		return "warning"
	}
	return "invalid"
}

// Counts returns the number of errors and warnings in diags.
func Counts(diags hcl.Diagnostics) (errors, warnings int) {
	for _, d := range diags {
		switch d.Severity {
		case hcl.DiagError:
			errors++
		case hcl.DiagWarning:
			warnings++
		}
	}
	return errors, warnings
}
