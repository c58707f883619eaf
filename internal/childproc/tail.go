// Package childproc holds what every child process gpuenv starts needs
// alike, whoever starts it: a bounded record of its output for messages, a
// process group that ends as a whole, and no descriptor it was not meant
// to get.
package childproc

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"
)

// DefaultTailBytes is what a Tail keeps when its Max is zero: far more
// than the few lines a message quotes, far less than a child can print.
const DefaultTailBytes = 64 << 10

// DefaultTailLines is how many lines Text quotes when asked for none.
const DefaultTailLines = 12

// Tail is an io.Writer that keeps only the end of what is written to it,
// at most Max bytes (DefaultTailBytes when zero): a child that prints
// gigabytes costs a Tail no more memory than one that prints a line, and
// the end is where a failing program says why. The zero value is ready;
// it is safe for concurrent writes (a child's stdout and stderr).
type Tail struct {
	Max int

	mu    sync.Mutex
	buf   []byte
	total int64
}

func (t *Tail) max() int {
	if t.Max > 0 {
		return t.Max
	}
	return DefaultTailBytes
}

// Write keeps the end of p; it never fails.
func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	t.total += int64(n)
	m := t.max()
	if len(p) >= m {
		t.buf = append(t.buf[:0], p[len(p)-m:]...)
		return n, nil
	}
	t.buf = append(t.buf, p...)
	// Compacting only past twice the bound keeps writes amortised O(len).
	if len(t.buf) > 2*m {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-m:]...)
	}
	return n, nil
}

// Bytes is the end kept, at most Max bytes, oldest first.
func (t *Tail) Bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buf
	if m := t.max(); len(b) > m {
		b = b[len(b)-m:]
	}
	return bytes.Clone(b)
}

// Len is how many bytes were written in all, kept or not.
func (t *Tail) Len() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.total
}

// Text is the last n lines kept (DefaultTailLines when n ≤ 0), trimmed of
// surrounding space, for a message: when earlier output was left out it
// starts with a line saying how much.
func (t *Tail) Text(n int) string {
	b := t.Bytes()
	return LastLines(string(b), n, t.Len()-int64(len(b)))
}

// LastLines is the last n lines of s (DefaultTailLines when n ≤ 0), each
// cut to a bounded length, trimmed of surrounding space; dropped counts
// bytes that came before s and were not kept, so that the quote says so.
func LastLines(s string, n int, dropped int64) string {
	if n <= 0 {
		n = DefaultTailLines
	}
	s = strings.TrimSpace(s)
	if s == "" && dropped == 0 {
		return ""
	}
	lines := strings.Split(s, "\n")
	if dropped > 0 && len(lines) > 1 {
		// The first line kept is, most likely, the end of a longer one.
		dropped += int64(len(lines[0]) + 1)
		lines = lines[1:]
	}
	if len(lines) > n {
		for _, l := range lines[:len(lines)-n] {
			dropped += int64(len(l) + 1)
		}
		lines = lines[len(lines)-n:]
	}
	for i, l := range lines {
		if len(l) > maxLine {
			cut := maxLine
			for cut > 0 && !utf8.RuneStart(l[cut]) {
				cut--
			}
			lines[i] = l[:cut] + fmt.Sprintf(" […%d more bytes]", len(l)-cut)
		}
	}
	out := strings.Join(lines, "\n")
	if dropped > 0 {
		out = fmt.Sprintf("[…%d bytes before]\n%s", dropped, out)
	}
	return out
}

// maxLine bounds one quoted line: a child may print megabytes without a
// newline.
const maxLine = 1024

// Head is an io.Writer that keeps the first Max bytes written to it and
// counts the rest, for output gpuenv parses (a reply a few kilobytes long)
// from a program that might not stop. It never fails a write: a child
// told its output is closed may die of SIGPIPE before it says anything
// useful. Safe for concurrent writes.
type Head struct {
	Max int

	mu    sync.Mutex
	buf   []byte
	total int64
}

// Write keeps what fits under Max.
func (h *Head) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.total += int64(len(p))
	if room := h.Max - len(h.buf); room > 0 {
		h.buf = append(h.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// Bytes is what was kept, the first Max bytes at most.
func (h *Head) Bytes() []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return bytes.Clone(h.buf)
}

// Truncated reports whether more than Max bytes were written.
func (h *Head) Truncated() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.total > int64(len(h.buf))
}

// Len is how many bytes were written in all, kept or not.
func (h *Head) Len() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.total
}
