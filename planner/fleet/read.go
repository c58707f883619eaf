package fleet

import (
	"errors"

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
