package spec

import (
	"bytes"
	"fmt"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
)

// MaxDiagnosticsPerFile is how many diagnostics one file gets before the
// rest are counted instead of shown: past the first errors, HCL's
// recovery mostly reports the same mistake again, and thousands of them
// (a binary file read as a spec) take longer to print than to find.
const MaxDiagnosticsPerFile = 50

// MaxSpecFile is the largest spec or var file read: a spec of a whole
// fleet is tens of kilobytes.
const MaxSpecFile = 4 << 20

// checkText refuses, with one diagnostic, a file that cannot be a spec
// before it is parsed: one too large, or one that is not UTF-8 text (a
// binary, an image, a compressed file), whose every byte HCL would
// report.
func checkText(src []byte, name string) *hcl.Diagnostic {
	if len(src) > MaxSpecFile {
		return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "File too large",
			Detail: fmt.Sprintf("%s is %d bytes, more than the %d MiB a spec or var file may be; it is not read.", name, len(src), MaxSpecFile>>20)}
	}
	at := bytes.IndexByte(src, 0)
	if !utf8.Valid(src) {
		for i := 0; i < len(src); {
			r, size := utf8.DecodeRune(src[i:])
			if r == utf8.RuneError && size <= 1 {
				if at < 0 || i < at {
					at = i
				}
				break
			}
			i += size
		}
	}
	if at < 0 {
		return nil
	}
	line := 1 + bytes.Count(src[:at], []byte("\n"))
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Not a text file",
		Detail: fmt.Sprintf("%s is not UTF-8 text: byte %d (line %d) is 0x%02x. A spec or var file is HCL text; this one is not read.", name, at, line, src[at])}
}

// boundDiagnostics keeps the first MaxDiagnosticsPerFile diagnostics of
// each file and puts, after a file's last one kept, one that counts those
// left out.
func boundDiagnostics(diags hcl.Diagnostics) hcl.Diagnostics {
	count := map[string]int{}
	for _, d := range diags {
		count[diagFile(d)]++
	}
	over := false
	for _, n := range count {
		over = over || n > MaxDiagnosticsPerFile
	}
	if !over {
		return diags
	}
	out := make(hcl.Diagnostics, 0, len(diags))
	seen := map[string]int{}
	for _, d := range diags {
		f := diagFile(d)
		seen[f]++
		switch n := seen[f]; {
		case n <= MaxDiagnosticsPerFile:
			out = append(out, d)
		case n == MaxDiagnosticsPerFile+1:
			what := "the spec"
			if f != "" {
				what = f
			}
			out = append(out, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Too many diagnostics",
				Detail: fmt.Sprintf("%d more diagnostics in %s are not shown. Fix the ones above, or check that %s is the spec meant.",
					count[f]-MaxDiagnosticsPerFile, what, what)})
		}
	}
	return out
}

func diagFile(d *hcl.Diagnostic) string {
	if d.Subject != nil {
		return d.Subject.Filename
	}
	return ""
}
