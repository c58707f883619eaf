// Package regular reads a file a user names on the command line (a saved
// observation, a saved plan) the one safe way: as a regular file of a
// bounded size, opened without waiting, so that a FIFO, a device such as
// /dev/zero or a socket is refused at once instead of blocking gpuenv or
// filling its memory.
package regular

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// ReadFile reads name, a regular file of at most max bytes; what names
// the kind of document ("observation document") in the errors.
func ReadFile(name string, max int64, what string) ([]byte, error) {
	// O_NONBLOCK: opening a FIFO would otherwise wait for a writer.
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
		return nil, fmt.Errorf("%s is a %s, not a regular file, which every %s is", name, TypeName(fi.Mode()), what)
	}
	if fi.Size() > max {
		return nil, tooLarge(name, max, what)
	}
	// The file may have grown since the stat: reading one byte more than
	// the limit tells.
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, tooLarge(name, max, what)
	}
	return data, nil
}

func tooLarge(name string, max int64, what string) error {
	return fmt.Errorf("%s is larger than %d MiB, which no %s is", name, max>>20, what)
}

// TypeName names the type of a file that is not a regular one.
func TypeName(m os.FileMode) string {
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
