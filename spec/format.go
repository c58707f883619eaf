package spec

import (
	"bytes"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
)

// Format returns src in canonical layout. It refuses input that does not
// parse, returning the syntax diagnostics and nil, because formatting broken
// input could move or lose text. filename is used in diagnostics only.
func Format(src []byte, filename string) ([]byte, hcl.Diagnostics) {
	if d := checkNesting(src, filename, hcl.InitialPos); d != nil {
		return nil, hcl.Diagnostics{d}
	}
	if _, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos); diags.HasErrors() {
		return nil, diags
	}
	out := hclwrite.Format(src)
	// hclwrite keeps whatever the file ends with; canonical files end in
	// exactly one newline, like Go source after gofmt, without trailing blanks.
	out = bytes.TrimRight(out, " \t\n")
	if len(bytes.TrimSpace(out)) == 0 {
		return []byte{}, nil
	}
	return append(out, '\n'), nil
}
