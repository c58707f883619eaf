package spec

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

func nested(open, close string, n int) string {
	return strings.Repeat(open, n) + strings.Repeat(close, n)
}

func TestCheckNesting(t *testing.T) {
	deep := nested("[", "]", 100_000)
	tests := []struct {
		name string
		src  string
		// line and column of the bracket that opens level 1,001; 0 for
		// none.
		line, col int
	}{
		{"1,000 levels", "x = " + nested("[", "]", MaxNesting) + "\n", 0, 0},
		{"1,001 levels", "x = " + nested("[", "]", MaxNesting+1) + "\n", 1, 5 + MaxNesting},
		{"100,000 levels in a block", "locals {\n  deep = " + deep + "\n}\n", 2, 9 + MaxNesting},
		{"mixed brackets", "x = " + nested("{a = (", ")}", 600) + "\n", 1, 5 + 6*500},
		{"after wide characters", "# ü\nx = \"é\" == \"ü\" ? " + nested("(", ")", MaxNesting+1) + " : 1\n", 2, 18 + MaxNesting},
		{"inside a quoted string", "x = \"" + strings.Repeat("[", 100_000) + "\"\n", 0, 0},
		{"inside a string with escaped quotes", "x = \"\\\"" + strings.Repeat("{", 100_000) + "\\\"\"\n", 0, 0},
		{"inside a heredoc", "x = <<EOT\n" + strings.Repeat("(", 100_000) + "\nEOT\ny = 1\n", 0, 0},
		{"inside an indented heredoc", "x = <<-EOT\n  " + strings.Repeat("(", 100_000) + "\n  EOT\ny = 1\n", 0, 0},
		{"inside comments", "# " + deep[:50_000] + "\n// " + deep[:50_000] + "\n/* " + deep + " */\nx = 1\n", 0, 0},
		{"escaped interpolations", "x = \"" + strings.Repeat("$${", 2000) + "\"\n", 0, 0},
		{"interpolations in a string", "x = \"" + strings.Repeat("${\"", MaxNesting+1) + "\"\n", 1, 6 + 3*MaxNesting},
		{"brackets in an interpolation", "x = \"${" + nested("[", "]", MaxNesting) + "}\"\n", 1, 8 + MaxNesting - 1},
		// After the first ${ the rest are in an expression, where each {
		// opens a level.
		{"interpolations in a heredoc", "x = <<EOT\n%{ if true }" + strings.Repeat("${", MaxNesting+1) + "\nEOT\n", 2, 13 + 2*MaxNesting + 1},
		{"a heredoc after the brackets close", "x = " + nested("[", "]", 900) + "\ny = <<EOT\n]]]]\nEOT\nz = " + nested("[", "]", 900) + "\n", 0, 0},
		{"an unterminated string ends at its line", "x = \"abc\ny = " + nested("[", "]", MaxNesting+1) + "\n", 2, 5 + MaxNesting},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := checkNesting([]byte(tt.src), "spec.hcl", hcl.InitialPos)
			if tt.line == 0 {
				if d != nil {
					t.Fatalf("refused: %s", d.Detail)
				}
				return
			}
			if d == nil {
				t.Fatal("accepted")
			}
			if d.Summary != "Nesting too deep" || d.Subject == nil || d.Subject.Start.Line != tt.line || d.Subject.Start.Column != tt.col {
				t.Fatalf("%s at %v, want line %d column %d: %s", d.Summary, d.Subject, tt.line, tt.col, d.Detail)
			}
			if c := tt.src[d.Subject.Start.Byte]; c != '[' && c != '(' && c != '{' && c != '$' && c != '%' {
				t.Errorf("the range starts at %q, not at a bracket", c)
			}
			want := "spec.hcl:" + itoa(tt.line) + ":" + itoa(tt.col) + " opens level 1001"
			if !strings.Contains(d.Detail, want) {
				t.Errorf("detail %q does not say %q", d.Detail, want)
			}
		})
	}
}

func itoa(n int) string {
	b := []byte{}
	for n > 0 || len(b) == 0 {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
	}
	return string(b)
}

// Every way into the HCL parser refuses 100,000 levels with the
// diagnostic instead of overflowing the stack: a spec file, a var file, a
// --var value and gpuenv fmt.
func TestDeepNestingNeverReachesTheParser(t *testing.T) {
	dir := t.TempDir()
	deep := nested("[", "]", 100_000)
	specFile := filepath.Join(dir, "gpuenv.hcl")
	os.WriteFile(specFile, []byte("locals {\n  deep = "+deep+"\n}\n"), 0o644)
	_, diags := Load(specFile, LoadOptions{})
	if !hasSummary(diags, "Nesting too deep") {
		t.Errorf("spec file: %v", diags)
	}

	limit := filepath.Join(dir, "limit.hcl")
	os.WriteFile(limit, []byte("locals {\n  deep = "+nested("[", "]", MaxNesting-1)+"\n}\n"), 0o644)
	if _, diags := Load(limit, LoadOptions{}); diags.HasErrors() {
		t.Errorf("%d levels: %v", MaxNesting, diags)
	}

	ok := filepath.Join(dir, "ok.hcl")
	os.WriteFile(ok, []byte("variable \"devices\" {\n  type = list(string)\n  default = []\n}\n"), 0o644)
	varFile := filepath.Join(dir, "deep.vars")
	os.WriteFile(varFile, []byte("devices = "+deep+"\n"), 0o644)
	_, diags = Load(ok, LoadOptions{VarFiles: []string{varFile}})
	if !hasSummary(diags, "Nesting too deep") {
		t.Errorf("var file: %v", diags)
	}
	_, diags = Load(ok, LoadOptions{Vars: map[string]string{"devices": deep}})
	if !diags.HasErrors() || !strings.Contains(diags.Error(), "opens level 1001") {
		t.Errorf("--var: %v", diags)
	}
	if _, diags := Format([]byte("x = "+deep+"\n"), "<stdin>"); !hasSummary(diags, "Nesting too deep") {
		t.Errorf("fmt: %v", diags)
	}
}

func hasSummary(diags hcl.Diagnostics, summary string) bool {
	for _, d := range diags {
		if d.Summary == summary {
			return true
		}
	}
	return false
}
