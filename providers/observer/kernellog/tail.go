package kernellog

import (
	"bytes"
	"io"
	"time"
)

// chunk is how much of a log is read at a time, from its end.
const chunk = 256 << 10

// maxLine is the longest line kept whole; a longer one (no kernel
// message is) is dropped rather than let grow without bound.
const maxLine = 64 << 10

var (
	nvrm         = []byte("NVRM")
	linuxVersion = []byte("Linux version ")
)

// tail is what a backward scan of one log found.
type tail struct {
	// lines are the relevant lines, newest first.
	lines [][]byte
	bytes int64
	// boot is set when the scan reached the first line of the boot.
	boot bool
	// truncated is set when a bound stopped it first.
	truncated bool
}

// scanTail reads r, of size bytes, backwards from its end in chunks and
// keeps the lines that carry the driver's messages, until the line that
// starts the boot, maxBytes, maxLines or the deadline. Memory is one
// chunk and the lines kept, however large the log.
func scanTail(r io.ReaderAt, size, maxBytes int64, maxLines int, deadline time.Time) (tail, error) {
	var t tail
	buf := make([]byte, chunk+maxLine)
	carry := make([]byte, 0, maxLine)
	off := size
	for off > 0 {
		if t.bytes >= maxBytes || len(t.lines) >= maxLines || time.Now().After(deadline) {
			t.truncated = true
			return t, nil
		}
		n := int64(chunk)
		if off < n {
			n = off
		}
		off -= n
		if _, err := r.ReadAt(buf[:n], off); err != nil && err != io.EOF {
			return t, err
		}
		t.bytes += n
		// The line that ran past the chunk read before continues here.
		data := append(buf[:n], carry...)
		carry = carry[:0]
		first := bytes.IndexByte(data, '\n')
		if first < 0 && off > 0 {
			// No line ends in this chunk: all of it belongs to one line.
			if len(data) <= maxLine {
				carry = append(carry, data...)
			}
			continue
		}
		body := data
		if off > 0 {
			// data[:first] is the end of a line that starts in an
			// earlier chunk: carried to the next read.
			if first <= maxLine {
				carry = append(carry, data[:first]...)
			}
			body = data[first+1:]
		}
		// Most chunks of a busy log hold neither kind of line: skip
		// splitting them.
		if !bytes.Contains(body, nvrm) && !bytes.Contains(body, linuxVersion) {
			continue
		}
		end := len(body)
		for end > 0 {
			start := bytes.LastIndexByte(body[:end], '\n') + 1
			line := body[start:end]
			end = start - 1
			if bytes.Contains(line, linuxVersion) && bootStart(line) {
				t.boot = true
				return t, nil
			}
			if bytes.Contains(line, nvrm) {
				t.lines = append(t.lines, bytes.Clone(line))
			}
			if end < 0 {
				break
			}
		}
	}
	return t, nil
}

// bootStart tells whether line is the kernel's first message of a boot,
// "Linux version …", as a syslog daemon ("kernel: [    0.000000] Linux
// version") or journalctl ("kernel: Linux version") writes it.
func bootStart(line []byte) bool {
	i := bytes.Index(line, linuxVersion)
	prefix := bytes.TrimRight(line[:i], " ")
	if bytes.HasSuffix(prefix, []byte("kernel:")) {
		return true
	}
	if !bytes.HasSuffix(prefix, []byte("]")) {
		return false
	}
	j := bytes.LastIndexByte(prefix, '[')
	if j < 0 {
		return false
	}
	ts := bytes.TrimSpace(prefix[j+1 : len(prefix)-1])
	return len(bytes.Trim(ts, "0.")) == 0 && len(ts) > 0
}
