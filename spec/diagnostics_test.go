package spec

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDiagnostics checks, for each bad input, the exact diagnostics: their
// severity, summary, detail and source range.
func TestDiagnostics(t *testing.T) {
	for _, tc := range diagCases {
		t.Run(tc.name, func(t *testing.T) {
			files, path := tc.files, tc.path
			if files == nil {
				files = map[string]string{"spec.hcl": tc.src}
				if path == "" {
					path = "spec.hcl"
				}
			} else if path == "" {
				path = "."
			}
			_, diags := loadFiles(t, files, path, tc.opts)
			got := diagsOf(diags)
			want, ok := diagWants[tc.name]
			if !ok {
				var lines strings.Builder
				for _, d := range got {
					fmt.Fprintf(&lines, "\t{%q, %q, %q, %q},\n", d.Severity, d.Summary, d.Detail, d.Subject)
				}
				t.Fatalf("diagWants has no entry for %q; it produced:\n%s", tc.name, lines.String())
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("diagnostics (-want +got):\n%s", diff)
			}
		})
	}
}

// Every expectation belongs to a case, so none is left behind unchecked
// when a case is renamed.
func TestDiagWantsMatchCases(t *testing.T) {
	names := map[string]bool{}
	for _, tc := range diagCases {
		if names[tc.name] {
			t.Errorf("two cases are named %q", tc.name)
		}
		names[tc.name] = true
	}
	for name := range diagWants {
		if !names[name] {
			t.Errorf("diagWants has %q, which no case has", name)
		}
	}
}
