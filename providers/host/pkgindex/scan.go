package pkgindex

import (
	"bufio"
	"bytes"
	"compress/bzip2"
	"errors"
	"fmt"
	"io"
	"path"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"

	"github.com/gpuenv/gpuenv/providers/host/pkgdb"
)

// scanned is what a scan of one list keeps.
type scanned struct {
	// total counts the list's stanzas, relevant or not.
	total int
	// stanzas are the relevant stanzas, only the fields the facts keep,
	// each ended by a blank line: deb822 text for pkgdb.Paragraphs.
	stanzas []byte
}

// stanzaFields are the fields of a Packages stanza the facts keep.
var stanzaFields = map[string]bool{
	"Package": true, "Version": true, "Architecture": true, "Source": true,
	"Filename": true, "Size": true, "SHA256": true,
	// For the dependencies on an exact version (IndexedVersion.ExactDepends).
	"Depends": true, "Pre-Depends": true,
}

var (
	packageLine = []byte("\nPackage: ")
	blankLine   = []byte("\n\n")
)

// scanBufs are the buffers lists are decompressed through, kept from one
// list to the next: a list of the Debian archive is 50 MB unpacked, and
// reading it whole would touch as much fresh memory for every plan.
var scanBufs = sync.Pool{New: func() any { b := make([]byte, 1<<20); return &b }}

// source is a decompressed index, read into a scan's buffer.
type source interface {
	// fill adds decompressed bytes at buf[at:], buf[:at] holding what it
	// added before (the last history() bytes of it at least), and
	// returns how many; 0 without an error when buf has no room for the
	// next piece. io.EOF when the index is done.
	fill(buf []byte, at int) (int, error)
	// history is how much earlier output fill refers to.
	history() int
}

// readerSource is a source of an io.Reader, which keeps its own history.
type readerSource struct{ r io.Reader }

func (s readerSource) fill(buf []byte, at int) (int, error) {
	n, err := io.ReadFull(s.r, buf[at:])
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = io.EOF
	}
	return n, err
}

func (readerSource) history() int { return 0 }

func (*lz4Frame) history() int { return lz4History }

// The bounds of one index, decompressed: the largest list of an archive
// (Debian's main, Ubuntu's universe) is tens of megabytes unpacked and its
// largest stanza a few kilobytes. A list past them (a corrupt file, or a
// small compressed one that unpacks without end) is refused instead of
// taking the plan's time or memory.
var (
	maxIndexBytes int64 = 1 << 30
	maxUnitBytes        = 64 << 20
)

// TooLargeError is an index past maxIndexBytes unpacked, or with one
// stanza past maxUnitBytes.
type TooLargeError struct {
	// Unit is true when one stanza, not the whole, is too large.
	Unit  bool
	Limit int64
}

func (e *TooLargeError) Error() string {
	if e.Unit {
		return fmt.Sprintf("it holds an entry larger than %d MiB unpacked, which no package list has", e.Limit>>20)
	}
	return fmt.Sprintf("it unpacks to more than %d MiB, which no package list does", e.Limit>>20)
}

// scanSource reads src through a buffer of whole units at a time (the
// text up to the last boundary in it), handing each run to scan.
func scanSource(src source, boundary []byte, scan func(data []byte) error) error {
	bp := scanBufs.Get().(*[]byte)
	defer scanBufs.Put(bp)
	buf := *bp
	n, from := 0, 0 // buf[:n] is decoded, buf[from:n] not scanned yet
	var total int64
	for {
		m, err := src.fill(buf, n)
		n += m
		if total += int64(m); total > maxIndexBytes {
			return &TooLargeError{Limit: maxIndexBytes}
		}
		if errors.Is(err, io.EOF) {
			return scan(buf[from:n])
		}
		if err != nil {
			return err
		}
		if m == 0 {
			// A unit longer than the buffer, or a block larger.
			if len(buf) >= maxUnitBytes {
				return &TooLargeError{Unit: true, Limit: int64(maxUnitBytes)}
			}
			grown := make([]byte, 2*len(buf))
			copy(grown, buf[:n])
			buf, *bp = grown, grown
			continue
		}
		if end := bytes.LastIndex(buf[from:n], boundary); end >= 0 {
			end += from + len(boundary)
			if err := scan(buf[from:end]); err != nil {
				return err
			}
			from = end
		}
		// Keep what is not scanned yet and the history src refers to.
		keep := min(from, max(0, n-src.history()))
		n = copy(buf, buf[keep:n])
		from -= keep
	}
}

// scanList reads a Packages list, keeping the stanzas of relevant
// packages. In each run of whole stanzas the next "Package:" line is
// found with one byte search, so that an irrelevant stanza costs no more
// than being searched through.
func scanList(src source, relevant func(name []byte) bool) (scanned, error) {
	var s scanned
	err := scanSource(src, blankLine, func(data []byte) error {
		s.scan(data, relevant)
		return nil
	})
	return s, err
}

// scan reads data, a run of whole stanzas. It looks for "Package: " and
// checks that a line starts there: 'P' is rarer in a list than the
// newline, so the byte search stops a sixth as often.
func (s *scanned) scan(data []byte, relevant func([]byte) bool) {
	field := packageLine[1:]
	for pos := 0; ; {
		i := bytes.Index(data[pos:], field)
		if i < 0 {
			return
		}
		start := pos + i
		if start > 0 && data[start-1] != '\n' {
			pos = start + 1
			continue
		}
		s.total++
		nameAt := start + len(field)
		nl := bytes.IndexByte(data[nameAt:], '\n')
		if nl < 0 {
			nl = len(data) - nameAt
		}
		pos = nameAt + nl
		if !relevant(bytes.TrimSpace(data[nameAt:pos])) {
			continue
		}
		end := bytes.Index(data[start:], blankLine)
		if end < 0 {
			end = len(data) - start
		}
		s.stanzas = appendFields(s.stanzas, data[start:start+end], stanzaFields)
		s.stanzas = append(s.stanzas, '\n')
		pos = start + end
	}
}

// appendFields appends to dst the lines of stanza that make up the fields
// in keep, continuation lines included, each line ended by a newline.
func appendFields(dst, stanza []byte, keep map[string]bool) []byte {
	kept := false
	for line := range bytes.Lines(stanza) {
		if line[0] != ' ' && line[0] != '\t' {
			k, _, _ := bytes.Cut(line, []byte(":"))
			kept = keep[string(k)]
		}
		if kept {
			dst = append(dst, line...)
			if line[len(line)-1] != '\n' {
				dst = append(dst, '\n')
			}
		}
	}
	return dst
}

// Decompressors kept from one list to the next: each allocates its
// window and tables anew otherwise.
var (
	lz4Frames   = sync.Pool{New: func() any { return new(lz4Frame) }}
	gzipReaders sync.Pool
	zstdReaders = sync.Pool{New: func() any {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
		if err != nil {
			// Only invalid options fail, and these are constant.
			panic("zstd: " + err.Error())
		}
		return d
	}}
)

// decompress returns the decompressed content of f, which is named name,
// by its extension, and a func to call when done with it.
func decompress(name string, f io.Reader) (source, func(), error) {
	switch path.Ext(name) {
	case ".lz4":
		d := lz4Frames.Get().(*lz4Frame)
		*d = lz4Frame{r: f, in: d.in[:0]}
		return d, func() { d.r = nil; lz4Frames.Put(d) }, nil
	case ".gz":
		if r, ok := gzipReaders.Get().(*gzip.Reader); ok {
			if err := r.Reset(f); err != nil {
				return nil, nil, fmt.Errorf("gzip: %w", err)
			}
			return readerSource{r}, func() { gzipReaders.Put(r) }, nil
		}
		r, err := gzip.NewReader(f)
		if err != nil {
			return nil, nil, fmt.Errorf("gzip: %w", err)
		}
		return readerSource{r}, func() { gzipReaders.Put(r) }, nil
	case ".zst":
		d := zstdReaders.Get().(*zstd.Decoder)
		if err := d.Reset(f); err != nil {
			return nil, nil, fmt.Errorf("zstd: %w", err)
		}
		return readerSource{d}, func() { d.Reset(nil); zstdReaders.Put(d) }, nil
	case ".xz":
		r, err := xz.NewReader(bufio.NewReaderSize(f, 64<<10))
		if err != nil {
			return nil, nil, fmt.Errorf("xz: %w", err)
		}
		return readerSource{r}, func() {}, nil
	case ".bz2":
		return readerSource{bzip2.NewReader(bufio.NewReaderSize(f, 64<<10))}, func() {}, nil
	}
	return readerSource{f}, func() {}, nil
}

// relevantName is the relevance rule of the scan: pkgdb's, the one every
// observation of packages uses.
func relevantName(name []byte) bool { return pkgdb.RelevantName(name) }
