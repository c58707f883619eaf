package fleet

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/gpuenv/gpuenv/internal/regular"
)

// maxDocument is the largest observation document read, from a file or a
// line of a stream; a document is tens of kilobytes.
const maxDocument = 64 << 20

// readDocument reads the document in the file name: a regular file of at
// most maxDocument bytes. A FIFO, a device (/dev/zero would never end) or
// a socket is refused at once, and a larger file before it is read.
func readDocument(name string) ([]byte, error) {
	return regular.ReadFile(name, maxDocument, "observation document")
}

// errSymlink refuses a symlink in a --facts directory: whoever can write
// in the directory would otherwise have gpuenv, often run as root, read
// any file of the machine and say something of what it holds.
var errSymlink = errors.New("a symlink, which gpuenv does not follow in a --facts directory: copy the document there, or name the file itself with --facts")

// gzipMagic opens every gzip stream.
var gzipMagic = []byte{0x1f, 0x8b}

// gunzipped is data, decompressed when it is gzip-compressed: a document
// saved as NAME.json.gz, or a line of a stream.
func gunzipped(data []byte) ([]byte, error) {
	if !bytes.HasPrefix(data, gzipMagic) {
		return data, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("not a valid gzip-compressed document: %w", err)
	}
	out, err := io.ReadAll(io.LimitReader(zr, maxDocument+1))
	if err != nil {
		return nil, fmt.Errorf("not a valid gzip-compressed document: %w", err)
	}
	if len(out) > maxDocument {
		return nil, fmt.Errorf("the document decompresses to more than %d MiB, which no observation document is", maxDocument>>20)
	}
	return out, nil
}

// readStream sends a job for each document of the stream r, named name:
// JSON lines, or a tar archive, either of them gzip-compressed or not.
// A stream that breaks off is a refused row where it did, and the end
// of this input only. It returns false when the run is cancelled.
func readStream(r io.Reader, name string, send func(job) bool) bool {
	br := bufio.NewReaderSize(r, 256<<10)
	if head, _ := br.Peek(len(gzipMagic)); bytes.Equal(head, gzipMagic) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return send(job{file: name, name: name, refused: fmt.Errorf("not a valid gzip stream: %w", err)})
		}
		br = bufio.NewReaderSize(zr, 256<<10)
	}
	if isTar(br) {
		return readTar(br, name, send)
	}
	return readLines(br, name, send)
}

// isTar tells whether r holds a tar archive: a POSIX or GNU header's
// magic at offset 257.
func isTar(r *bufio.Reader) bool {
	head, _ := r.Peek(263)
	return len(head) == 263 && bytes.Equal(head[257:262], []byte("ustar"))
}

// readLines sends a job for each non-blank line of r, named name:LINE.
func readLines(r *bufio.Reader, name string, send func(job) bool) bool {
	for line := 1; ; line++ {
		data, err := readLine(r)
		where := fmt.Sprintf("%s:%d", name, line)
		if len(bytes.TrimSpace(data)) > 0 {
			if !send(job{file: where, name: where, data: data}) {
				return false
			}
		}
		if err == errLongLine {
			if !send(job{file: where, name: where, refused: err}) {
				return false
			}
			continue
		}
		if err == io.EOF {
			return true
		}
		if err != nil {
			return send(job{file: where, name: where, refused: fmt.Errorf("reading stopped here: %w; what follows in %s was not read", err, name)})
		}
	}
}

// readTar sends a job for each document of the archive r: each regular
// file named *.json or *.json.gz, named NAME:PATH. A link named like a
// document is refused, as a symlink in a directory is.
func readTar(r io.Reader, name string, send func(job) bool) bool {
	tr := tar.NewReader(r)
	last := name
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return true
		}
		if err != nil {
			return send(job{file: last, name: last, refused: fmt.Errorf("the archive cannot be read past here: %w; what follows in %s was not read", err, name)})
		}
		if !isDocumentName(hdr.Name) {
			continue
		}
		where := name + ":" + hdr.Name
		last = where
		j := job{file: where, name: hostOf(hdr.Name)}
		switch hdr.Typeflag {
		case tar.TypeReg:
			if hdr.Size > maxDocument {
				j.refused = fmt.Errorf("a file of %d bytes, larger than the %d MiB an observation document may be", hdr.Size, maxDocument>>20)
				break
			}
			data := make([]byte, hdr.Size)
			if _, err := io.ReadFull(tr, data); err != nil {
				return send(job{file: where, name: j.name, refused: fmt.Errorf("the archive cannot be read past here: %w; what follows in %s was not read", err, name)})
			}
			j.data = data
		case tar.TypeSymlink, tar.TypeLink:
			j.refused = errors.New("a link, which gpuenv does not follow in an archive of documents: archive the document itself")
		case tar.TypeDir:
			continue
		default:
			j.refused = errors.New("not a regular file in the archive")
		}
		if !send(j) {
			return false
		}
	}
}

// readArchiveFile sends a job for each document of the archive file.
func readArchiveFile(file string, send func(job) bool) bool {
	f, err := os.Open(file)
	if err == nil {
		defer f.Close()
		var fi os.FileInfo
		if fi, err = f.Stat(); err == nil && !fi.Mode().IsRegular() {
			err = errors.New("not a regular file")
		}
	}
	if err != nil {
		return send(job{file: file, name: hostOf(file), refused: err})
	}
	br := bufio.NewReaderSize(f, 256<<10)
	if head, _ := br.Peek(len(gzipMagic)); bytes.Equal(head, gzipMagic) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return send(job{file: file, name: hostOf(file), refused: fmt.Errorf("not a valid gzip stream: %w", err)})
		}
		br = bufio.NewReaderSize(zr, 256<<10)
	}
	if !isTar(br) {
		return send(job{file: file, name: hostOf(file), refused: errors.New("not a tar archive, which its name says it is")})
	}
	return readTar(br, file, send)
}

// lastApply is what a collector noted of the host's last apply: its
// status file (gpuenv's <state>/status.json), as gather.yml saves it
// beside the observation under "last_apply".
type lastApply struct {
	Kind       string `json:"kind"`
	Status     string `json:"status"`
	Unfinished bool   `json:"unfinished"`
}

// lastApplyOf reads the last apply from raw, the value of "last_apply",
// or when raw is nil and data holds one from the document data; "" when
// there is none.
func lastApplyOf(data, raw []byte) string {
	if raw == nil && bytes.Contains(data, []byte(`"last_apply"`)) {
		var doc struct {
			LastApply json.RawMessage `json:"last_apply"`
		}
		if json.Unmarshal(data, &doc) != nil {
			return ""
		}
		raw = doc.LastApply
	}
	if len(raw) == 0 {
		return ""
	}
	var la lastApply
	if json.Unmarshal(raw, &la) != nil || la.Status == "" {
		return ""
	}
	kind := la.Kind
	if kind == "" {
		kind = "apply"
	}
	if la.Unfinished {
		return kind + " unfinished"
	}
	return kind + " " + la.Status
}

// canaryRank orders hosts for --canaries: those whose last apply
// succeeded first, then those with no record, then those whose last
// apply failed or did not finish.
func canaryRank(last string) int {
	switch {
	case last == "apply applied":
		return 0
	case last == "" || strings.HasPrefix(last, "rollback done"):
		return 1
	}
	return 2
}

// errLongLine is a line of a stream too long to be a document; the
// stream goes on after it.
var errLongLine = fmt.Errorf("a line longer than %d MiB, which no observation document is", maxDocument>>20)

// readLine reads one line, without its newline, into memory of its own:
// the job outlives the reader's buffer. A line too long to be a document
// is passed over to its end, and errLongLine returned.
func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	long := false
	for {
		frag, err := r.ReadSlice('\n')
		if line == nil && !long && err != bufio.ErrBufferFull {
			// The common line, whole in the buffer: one copy of its size.
			return bytes.TrimSuffix(bytes.Clone(frag), []byte("\n")), err
		}
		if !long {
			line = append(line, frag...)
			if len(line) > maxDocument {
				long, line = true, nil
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if long && (err == nil || err == io.EOF) {
			return nil, errLongLine
		}
		return bytes.TrimSuffix(line, []byte("\n")), err
	}
}
