package spec

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestFormatGolden formats each testdata/format/*.input and compares it
// with the .golden next to it; the golden text formatted again must not
// change, as gofmt's own tests check.
func TestFormatGolden(t *testing.T) {
	inputs, err := filepath.Glob("testdata/format/*.input")
	if err != nil {
		t.Fatal(err)
	}
	if len(inputs) == 0 {
		t.Fatal("no format test inputs")
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".input")
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			got, diags := Format(src, in)
			if len(diags) > 0 {
				t.Fatalf("Format: %v", diagsOf(diags))
			}
			golden := strings.TrimSuffix(in, ".input") + ".golden"
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("Format(%s) (-golden +got):\n%s", in, diff)
			}
			again, diags := Format(want, golden)
			if len(diags) > 0 {
				t.Fatalf("Format(golden): %v", diagsOf(diags))
			}
			if diff := cmp.Diff(string(want), string(again)); diff != "" {
				t.Errorf("formatting %s again changed it (-golden +again):\n%s", golden, diff)
			}
		})
	}
}

func TestFormatRefusesBrokenInput(t *testing.T) {
	got, diags := Format([]byte("driver {\n  version = \"550.*\"\n"), "broken.hcl")
	if got != nil {
		t.Errorf("Format returned output for input that does not parse: %q", got)
	}
	want := []diag{{"error", "Unclosed configuration block", "There is no closing brace for this block before the end of the file. This may be caused by incorrect brace nesting elsewhere in this file.", "broken.hcl:1,8-9"}}
	if diff := cmp.Diff(want, diagsOf(diags)); diff != "" {
		t.Errorf("diagnostics (-want +got):\n%s", diff)
	}
}
