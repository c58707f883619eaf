package spec

import (
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// ErrorsText is the errors among diags, one per line, each as
// "file:line,col-col: Summary: Detail", for a record or a row where the
// spec's source lines cannot be shown.
func ErrorsText(diags hcl.Diagnostics) string {
	var lines []string
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		line := d.Summary
		if d.Detail != "" {
			line += ": " + d.Detail
		}
		if d.Subject != nil {
			line = d.Subject.String() + ": " + line
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}
