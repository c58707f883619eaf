package spec

import (
	"bytes"
	"fmt"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
)

// MaxNesting is how deeply brackets, braces, parentheses and template
// interpolations may nest in a spec. HCL's parser recurses once per
// level, and 100,000 levels overflow the stack, which kills the process
// (exit 2, the code for "changes present"); no spec needs more than a few.
const MaxNesting = 1000

// checkNesting scans HCL native syntax for brackets nested deeper than
// MaxNesting, before the parser sees it. It skips what the parser does not
// nest: comments, and the literal text of quoted strings and heredocs;
// interpolations (${ … } and %{ … }) inside them are expressions again, so
// they nest as a brace does. It only has to be right about nesting: a
// syntax error it walks past is the parser's to report. start is the
// position of src's first byte.
func checkNesting(src []byte, filename string, start hcl.Pos) *hcl.Diagnostic {
	type context struct {
		kind   byte   // 'e' expression, '"' quoted string, 'h' heredoc
		marker []byte // a heredoc's closing marker
	}
	stack := []context{{kind: 'e'}}
	depth := 0
	pos := start
	lineStart := true // at the start of a line, where a heredoc may end
	advance := func(n int) {
		for n > 0 && pos.Byte-start.Byte < len(src) {
			r, size := utf8.DecodeRune(src[pos.Byte-start.Byte:])
			pos.Byte += size
			n -= size
			if r == '\n' {
				pos.Line++
				pos.Column = 1
				lineStart = true
			} else {
				pos.Column++
				lineStart = false
			}
		}
	}
	open := func(kind byte) *hcl.Diagnostic {
		depth++
		if depth > MaxNesting {
			end := pos
			end.Byte++
			end.Column++
			return &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Nesting too deep",
				Detail: fmt.Sprintf("The bracket at %s:%d:%d opens level %d of nested brackets, braces and interpolations; gpuenv reads at most %d levels. A spec needs far fewer: write the value flatter.",
					filename, pos.Line, pos.Column, depth, MaxNesting),
				Subject: &hcl.Range{Filename: filename, Start: pos, End: end},
			}
		}
		stack = append(stack, context{kind: kind})
		return nil
	}
	for pos.Byte-start.Byte < len(src) {
		rest := src[pos.Byte-start.Byte:]
		top := &stack[len(stack)-1]
		switch top.kind {
		case '"', 'h':
			if top.kind == 'h' && lineStart {
				line := bytes.TrimLeft(rest, " \t")
				if bytes.HasPrefix(line, top.marker) {
					after := line[len(top.marker):]
					if len(after) == 0 || after[0] == '\n' || after[0] == '\r' {
						advance(len(rest) - len(after))
						stack = stack[:len(stack)-1]
						continue
					}
				}
			}
			switch {
			case top.kind == '"' && rest[0] == '"':
				stack = stack[:len(stack)-1]
				advance(1)
			case top.kind == '"' && rest[0] == '\n':
				// An unterminated string: the parser says so.
				stack = stack[:len(stack)-1]
			case top.kind == '"' && rest[0] == '\\' && len(rest) > 1:
				advance(2)
			case bytes.HasPrefix(rest, []byte("$${")) || bytes.HasPrefix(rest, []byte("%%{")):
				advance(3)
			case bytes.HasPrefix(rest, []byte("${")) || bytes.HasPrefix(rest, []byte("%{")):
				if d := open('}'); d != nil {
					return d
				}
				advance(2)
			default:
				advance(1)
			}
			continue
		}
		// An expression.
		switch c := rest[0]; {
		case c == '"':
			stack = append(stack, context{kind: '"'})
			advance(1)
		case c == '#' || bytes.HasPrefix(rest, []byte("//")):
			if i := bytes.IndexByte(rest, '\n'); i >= 0 {
				advance(i)
			} else {
				advance(len(rest))
			}
		case bytes.HasPrefix(rest, []byte("/*")):
			if i := bytes.Index(rest[2:], []byte("*/")); i >= 0 {
				advance(i + 4)
			} else {
				advance(len(rest))
			}
		case bytes.HasPrefix(rest, []byte("<<")):
			if marker, n := heredocStart(rest); marker != nil {
				advance(n)
				stack = append(stack, context{kind: 'h', marker: marker})
			} else {
				advance(2)
			}
		case c == '(' || c == '[' || c == '{':
			if d := open(c); d != nil {
				return d
			}
			advance(1)
		case c == ')' || c == ']' || c == '}':
			// A closer pops the innermost level, matching or not: a
			// mismatch is the parser's to report. The closing brace of
			// an interpolation returns to its string or heredoc.
			if len(stack) > 1 {
				stack = stack[:len(stack)-1]
				depth--
			}
			advance(1)
		default:
			advance(1)
		}
	}
	return nil
}

// heredocStart reads a heredoc introducer, <<MARKER or <<-MARKER and the
// end of its line, at the start of src: the marker and the introducer's
// length, or nil when src does not start one.
func heredocStart(src []byte) ([]byte, int) {
	i := 2
	if i < len(src) && src[i] == '-' {
		i++
	}
	j := i
	for j < len(src) && (src[j] == '_' || src[j] >= 'a' && src[j] <= 'z' || src[j] >= 'A' && src[j] <= 'Z' || j > i && (src[j] == '-' || src[j] >= '0' && src[j] <= '9')) {
		j++
	}
	if j == i {
		return nil, 0
	}
	switch {
	case j < len(src) && src[j] == '\n':
		return src[i:j], j + 1
	case j+1 < len(src) && src[j] == '\r' && src[j+1] == '\n':
		return src[i:j], j + 2
	}
	return nil, 0
}
