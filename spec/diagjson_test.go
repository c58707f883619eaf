package spec

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"
)

var rangeZero hcl.Range

func TestDiagnosticsJSON(t *testing.T) {
	_, diags := loadSrc(t, "driver {\n  kernel_modules = \"opne\"\n}\nenvironment {\n  variables = {\n    LD_LIBRARY_PATH = \"/x\"\n  }\n}\n")
	diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Sourceless", Detail: "No range."})
	got, err := json.MarshalIndent(DiagnosticsJSON(diags), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	want := `[
  {
    "severity": "error",
    "summary": "Invalid kernel_modules value",
    "detail": "The allowed values for kernel_modules are \"open\", \"proprietary\" and \"none\"; \"opne\" is not one of them. Did you mean \"open\"?",
    "range": {
      "filename": "spec.hcl",
      "start": {
        "line": 2,
        "column": 20,
        "byte": 28
      },
      "end": {
        "line": 2,
        "column": 26,
        "byte": 34
      }
    }
  },
  {
    "severity": "warning",
    "summary": "System-wide LD_LIBRARY_PATH",
    "detail": "A system-wide LD_LIBRARY_PATH overrides the libraries that pip wheels bring with them, such as PyTorch's own cuDNN. gpuenv adds library directories to the dynamic linker's configuration instead: set cuda { set_environment = true } for the CUDA toolkit.",
    "range": {
      "filename": "spec.hcl",
      "start": {
        "line": 6,
        "column": 5,
        "byte": 71
      },
      "end": {
        "line": 6,
        "column": 20,
        "byte": 86
      }
    }
  },
  {
    "severity": "error",
    "summary": "Sourceless",
    "detail": "No range."
  }
]`
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("JSON (-want +got):\n%s", diff)
	}
	if e, w := Counts(diags); e != 2 || w != 1 {
		t.Errorf("Counts = %d, %d", e, w)
	}
	if got, _ := json.Marshal(DiagnosticsJSON(nil)); string(got) != "[]" {
		t.Errorf("no diagnostics encode as %s", got)
	}
}

// TestErrorsText: the errors alone, one per line, with their place when
// they have one.
func TestErrorsText(t *testing.T) {
	_, diags := loadSrc(t, "driver {\n  kernel_modules = \"opne\"\n}\n")
	diags = append(diags,
		&hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: "A warning", Detail: "Not shown."},
		&hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Sourceless"})
	got := ErrorsText(diags)
	lines := strings.Split(got, "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "spec.hcl:2,") || !strings.Contains(lines[0], "opne") || lines[1] != "Sourceless" {
		t.Errorf("ErrorsText = %q", got)
	}
}
