package spec

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

// loadFiles writes files into a fresh directory, makes it the working
// directory, and loads path from there, so that ranges name the files as
// "spec.hcl" rather than by a temporary path.
func loadFiles(t *testing.T, files map[string]string, path string, opts LoadOptions) (*Spec, hcl.Diagnostics) {
	t.Helper()
	dir := t.TempDir()
	for name, src := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
	return Load(path, opts)
}

// loadSrc loads a single spec file.
func loadSrc(t *testing.T, src string) (*Spec, hcl.Diagnostics) {
	t.Helper()
	return loadFiles(t, map[string]string{"spec.hcl": src}, "spec.hcl", LoadOptions{})
}

// diag is a diagnostic reduced to what tests compare.
type diag struct {
	Severity string
	Summary  string
	Detail   string
	Subject  string // hcl.Range.String(), "" when there is none
}

func diagsOf(diags hcl.Diagnostics) []diag {
	out := make([]diag, 0, len(diags))
	for _, d := range diags {
		var subject string
		if d.Subject != nil {
			subject = d.Subject.String()
		}
		out = append(out, diag{severityName(d.Severity), d.Summary, d.Detail, subject})
	}
	return out
}

func (d diag) String() string {
	return fmt.Sprintf("%s %s: %q at %s", d.Severity, d.Summary, d.Detail, d.Subject)
}

func mustLoad(t *testing.T, src string) *Spec {
	t.Helper()
	s, diags := loadSrc(t, src)
	if len(diags) > 0 {
		t.Fatalf("unexpected diagnostics:\n%v", diagsOf(diags))
	}
	return s
}
