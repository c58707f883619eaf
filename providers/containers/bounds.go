package containers

import (
	"fmt"

	"github.com/gpuenv/gpuenv/providers/host"
)

// MaxConfigSize is the most gpuenv reads of an engine's configuration or
// a CDI spec's file, and the largest text it parses as one. Real ones are
// a few kilobytes (a CDI spec for eight GPUs, tens).
const MaxConfigSize = 1 << 20

// MaxConfigDepth is the deepest nesting of tables, arrays and dotted
// keys gpuenv parses in an engine's configuration. containerd's deepest
// settings (plugins."…".containerd.runtimes.runc.options.X) are seven
// levels down. A deeper document is refused before any parser sees it:
// TOML's parser takes time that grows with the square of the depth, and
// writing a merged file back repeats every enclosing key on every
// table's header line, so a 40 kB file nested thousands deep became
// hundreds of megabytes.
const MaxConfigDepth = 16

// checkSize refuses text larger than MaxConfigSize, which only a file
// gpuenv did not read itself (a merge's input from a saved plan or a
// test) can hold.
func checkSize(content string) error {
	if len(content) > MaxConfigSize {
		return fmt.Errorf("the file is larger than %s, the most gpuenv reads of an engine's configuration", host.FormatSize(MaxConfigSize))
	}
	return nil
}

// depthError is a document nested deeper than MaxConfigDepth.
func depthError(line int) error {
	return fmt.Errorf("line %d: nested more than %d levels deep, which no engine's configuration is; gpuenv does not read it", line, MaxConfigDepth)
}

// checkTOMLDepth refuses TOML text that nests deeper than
// MaxConfigDepth, in one pass over its bytes that parses nothing. It
// counts a table header's keys, each key of a dotted key and each array
// or inline table opened; a dot in a value (a float) counts too, so it
// may count a level or two more than there is, never fewer. Strings and
// comments are skipped as TOML reads them, so that a bracket inside one
// counts for nothing.
func checkTOMLDepth(s string) error {
	var stack []int // the dots counted at each enclosing level
	header := 0     // the keys of the current table's header
	dots := 0       // dots at this level since its last separator
	open := 0       // the levels of stack, each with its dots
	line := 1
	lineStart := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '\n':
			line++
			lineStart = true
			if len(stack) == 0 {
				dots = 0
			}
			continue
		case ' ', '\t', '\r':
			continue
		case '#':
			for i+1 < len(s) && s[i+1] != '\n' {
				i++
			}
			continue
		case '"', '\'':
			var n int
			i, n = skipTOMLString(s, i)
			line += n
		case '[':
			if len(stack) == 0 && lineStart {
				// A table header: [a.b] or [[a.b]], keys quoted or bare.
				header = 1
				for i++; i < len(s) && s[i] != ']' && s[i] != '\n'; i++ {
					switch s[i] {
					case '.':
						header++
					case '"', '\'':
						var n int
						i, n = skipTOMLString(s, i)
						line += n
					}
					if header > MaxConfigDepth {
						return depthError(line)
					}
				}
				switch {
				case i < len(s) && s[i] == '\n':
					i-- // the newline is the loop's to count
				case i+1 < len(s) && s[i+1] == ']':
					i++
				}
				dots = 0
				break
			}
			fallthrough
		case '{':
			stack = append(stack, dots)
			open += 1 + dots
			dots = 0
		case ']', '}':
			if n := len(stack); n > 0 {
				dots = stack[n-1]
				open -= 1 + dots
				stack = stack[:n-1]
			}
		case '.':
			dots++
		case ',':
			dots = 0
		}
		lineStart = false
		if header+open+dots > MaxConfigDepth {
			return depthError(line)
		}
	}
	return nil
}

// skipTOMLString returns the index of the last byte of the string that
// starts at s[i] (a quote), and the newlines in it. A basic string ends
// at an unescaped quote, a literal one at the next quote, either at the
// end of its line (where the parser will say what is wrong); a
// multi-line one (opened by three quotes of either kind) at three
// quotes, and up to two more quotes right after them are still its own.
func skipTOMLString(s string, i int) (end, newlines int) {
	q := s[i]
	if i+2 < len(s) && s[i+1] == q && s[i+2] == q {
		j := i + 3
		for ; j < len(s); j++ {
			switch {
			case s[j] == '\n':
				newlines++
			case q == '"' && s[j] == '\\':
				if j+1 < len(s) && s[j+1] == '\n' {
					newlines++
				}
				j++
			case s[j] == q && j+2 < len(s) && s[j+1] == q && s[j+2] == q:
				j += 2
				for k := 0; k < 2 && j+1 < len(s) && s[j+1] == q; k++ {
					j++
				}
				return j, newlines
			}
		}
		return len(s) - 1, newlines
	}
	for j := i + 1; j < len(s); j++ {
		switch {
		case s[j] == '\n':
			return j - 1, 0
		case q == '"' && s[j] == '\\':
			j++
		case s[j] == q:
			return j, 0
		}
	}
	return len(s) - 1, 0
}

// checkJSONDepth refuses JSON text whose arrays and objects nest deeper
// than MaxConfigDepth, in one pass that parses nothing: encoding/json
// allows ten thousand levels, and writing such a file back indented
// makes each line as long as its depth.
func checkJSONDepth(s string) error {
	depth, line := 0, 1
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\n':
			line++
		case '"':
			for i++; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' {
					i++
				}
			}
		case '[', '{':
			if depth++; depth > MaxConfigDepth {
				return depthError(line)
			}
		case ']', '}':
			depth--
		}
	}
	return nil
}
