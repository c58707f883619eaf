package main

import (
	"fmt"
	"reflect"
	"strings"
	"unicode"
	"unicode/utf8"
)

// esc makes s, a string that came from a document or the host (a
// hostname, a path, a package's version, a file's name), safe to print
// for a person on one line: every control character, the line breaks
// included, is shown as an escape (\n, \t, \x1b, \u0085), and so are
// bytes that are not UTF-8 (\xff) and the invisible characters that
// reorder or hide text (U+202E, U+200B). Whatever a document holds, it
// cannot move the cursor, set the terminal's title or forge a line.
func esc(s string) string {
	return escape(s, false)
}

// escLines is esc for a text gpuenv wrote around such strings, whose
// own line breaks are kept: each line stays a line of its own.
func escLines(s string) string {
	return escape(s, true)
}

func escape(s string, keepNewlines bool) string {
	i := 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if needsEscape(r, size) && !(keepNewlines && r == '\n') {
			break
		}
		i += size
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case keepNewlines && r == '\n', !needsEscape(r, size):
			b.WriteString(s[i : i+size])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += size
	}
	return b.String()
}

// needsEscape reports whether the rune r, size bytes of a string, is
// shown as an escape: C0 and C1 controls and DEL, format characters
// (bidirectional overrides, zero-width ones), and a byte that is not
// UTF-8.
func needsEscape(r rune, size int) bool {
	switch {
	case r == utf8.RuneError && size == 1:
		return true
	case r < 0x20, r == 0x7f:
		return true
	case r < 0x80:
		return false
	}
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r)
}

// escArgs returns args with every string in them escaped (of any string
// type, alone or in a slice), and every error and fmt.Stringer as its
// escaped text, for printf-style human views whose format is gpuenv's
// and whose arguments are values.
func escArgs(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case string:
			out[i] = esc(v)
		case error:
			out[i] = esc(v.Error())
		case fmt.Stringer:
			out[i] = esc(v.String())
		default:
			out[i] = escValue(reflect.ValueOf(a), a)
		}
	}
	return out
}

// escValue is a, escaped where it is a string or strings of a named
// type (facts.Manager, a []string); a itself otherwise.
func escValue(rv reflect.Value, a any) any {
	switch {
	case !rv.IsValid():
		return a
	case rv.Kind() == reflect.String:
		return esc(rv.String())
	case rv.Kind() == reflect.Slice && rv.Type().Elem().Kind() == reflect.String:
		out := make([]string, rv.Len())
		for i := range out {
			out[i] = esc(rv.Index(i).String())
		}
		return out
	}
	return a
}
