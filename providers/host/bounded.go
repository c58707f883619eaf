package host

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"syscall"
)

// DefaultReadLimit is the most ReadFile reads of one file. The largest
// file observation reads whole is dpkg's status database, a few
// megabytes on a full desktop; a file larger than this is no file gpuenv
// knows, and reading it would only exhaust memory.
const DefaultReadLimit = 64 << 20

// readFlags open a file for reading without waiting: a FIFO with no
// writer opens at once (and is refused by its type), and a terminal does
// not become the process's controlling one. On a regular file, the only
// kind read, O_NONBLOCK changes nothing.
const readFlags = syscall.O_RDONLY | syscall.O_NONBLOCK | syscall.O_NOCTTY

// NotRegularError is a file gpuenv would read that is not a regular
// file: a FIFO would block the read, a device (/dev/zero) never end it.
type NotRegularError struct {
	Path string // as asked for, inside the root
	// Target is where Path led on this machine, when a symlink made it
	// somewhere else; "" otherwise.
	Target string
	Type   string // "FIFO", "character device", …
}

func (e *NotRegularError) Error() string {
	what := e.Path
	if e.Target != "" {
		what += " (a link to " + e.Target + ")"
	}
	return fmt.Sprintf("%s is a %s, not a regular file: gpuenv reads only regular files there; replace it with the file itself", what, e.Type)
}

// TooLargeError is a file larger than the most gpuenv reads of its kind.
type TooLargeError struct {
	Path  string // on this machine
	Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s is larger than %s, the most gpuenv reads of such a file: it cannot be what gpuenv expects there", e.Path, FormatSize(e.Limit))
}

// FormatSize writes n bytes as people read it: "64 MiB", "512 KiB",
// "100 bytes".
func FormatSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// fileType names the type in a stat mode, as NotRegularError says it.
func fileType(mode uint32) string {
	switch mode & syscall.S_IFMT {
	case syscall.S_IFIFO:
		return "FIFO"
	case syscall.S_IFCHR:
		return "character device"
	case syscall.S_IFBLK:
		return "block device"
	case syscall.S_IFSOCK:
		return "socket"
	case syscall.S_IFDIR:
		return "directory"
	case syscall.S_IFLNK:
		return "symlink"
	}
	return fmt.Sprintf("file of type %#o", mode&syscall.S_IFMT)
}

// checkRegular refuses fd, opened for p inside the root as name on this
// machine, unless it is a regular file, and returns its size otherwise.
// procfs and sysfs files are regular files whose size says nothing (0 or
// 4096); the read's cap bounds them.
func (h *Host) checkRegular(fd int, p, name string) (int64, error) {
	var st syscall.Stat_t
	if err := fstat(fd, &st); err != nil {
		return 0, &fs.PathError{Op: "fstat", Path: name, Err: err}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		e := &NotRegularError{Path: p, Type: fileType(st.Mode)}
		if name != filepath.Join(h.root, p) {
			e.Target = name
			if !h.Live() {
				if rel, err := filepath.Rel(h.root, name); err == nil {
					e.Target = "/" + filepath.ToSlash(rel)
				}
			}
		}
		return 0, e
	}
	return st.Size, nil
}
