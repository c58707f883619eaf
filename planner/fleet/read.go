package fleet

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// maxDocument is the largest observation document read, from a file or a
// line of a stream; a document is tens of kilobytes.
const maxDocument = 64 << 20

// readDocument reads the document in the file name: a regular file of at
// most maxDocument bytes. A FIFO is opened without waiting for a writer
// and refused, as are devices (/dev/zero would never end) and sockets,
// and a larger file is refused before it is read.
func readDocument(name string) ([]byte, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is a %s, not a regular file: an observation document is a file", name, modeType(fi.Mode()))
	}
	if fi.Size() > maxDocument {
		return nil, tooLarge(name)
	}
	// The size may have grown since: read at most one byte more than
	// the limit, which tells.
	data, err := io.ReadAll(io.LimitReader(f, maxDocument+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxDocument {
		return nil, tooLarge(name)
	}
	return data, nil
}

func tooLarge(name string) error {
	return fmt.Errorf("%s is larger than %d MiB, which no observation document is", name, maxDocument>>20)
}

// modeType names the type of a file that is not a regular one.
func modeType(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "FIFO"
	case m&os.ModeCharDevice != 0:
		return "character device"
	case m&os.ModeDevice != 0:
		return "block device"
	case m&os.ModeSocket != 0:
		return "socket"
	case m.IsDir():
		return "directory"
	case m&os.ModeSymlink != 0:
		return "symlink"
	}
	return "file of an unknown type"
}

// errSymlink refuses a symlink in a --facts directory: whoever can write
// in the directory would otherwise have gpuenv, often run as root, read
// any file of the machine and say something of what it holds.
var errSymlink = errors.New("a symlink, which gpuenv does not follow in a --facts directory: copy the document there, or name the file itself with --facts")
