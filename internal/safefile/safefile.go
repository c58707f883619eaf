// Package safefile is the one way gpuenv writes a whole file: a temporary
// file created exclusively beside it, given its owner and mode on the open
// descriptor, fsynced, renamed into place and the directory fsynced — never
// a chmod or chown by path afterwards, which would follow a symlink someone
// put in the temporary file's place — and only into a directory that nobody
// but root (or the user running gpuenv) can change.
package safefile

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// Owner is the user and group a file is given.
type Owner struct{ UID, GID int }

// Options are how a file is written; the zero value replaces the file and
// leaves it owned by the process's user.
type Options struct {
	// Owner, when not nil, owns the file. Only root gives a file to
	// another user; a process that is not root may name itself or root
	// (an image root's files, which become its own).
	Owner *Owner
	// NoReplace fails when the name exists, instead of replacing it.
	NoReplace bool
}

// File is a file being written: the temporary file, until Commit puts it
// in place.
type File struct {
	f         *os.File
	dirfd     int
	dir, tmp  string
	base      string
	perm      fs.FileMode
	o         Options
	committed bool
}

// WriteFile writes data to name as Create, Write and Commit do.
func WriteFile(name string, data []byte, perm fs.FileMode, o Options) error {
	f, err := Create(name, perm, o)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		return err
	}
	return f.Commit()
}

// Create starts writing name, which Commit puts in place with perm and
// the owner of o. name's directory, and every directory above it, must be
// one ProcessTrust accepts; an *UnsafeDirError says which is not.
func Create(name string, perm fs.FileMode, o Options) (*File, error) {
	return create(name, perm, o, true)
}

// create is Create, with the check of the directories left out only where
// a test exercises what the descriptor-based writing alone withstands.
func create(name string, perm fs.FileMode, o Options, checkDirs bool) (*File, error) {
	abs, err := filepath.Abs(name)
	if err != nil {
		return nil, err
	}
	dir, base := filepath.Split(abs)
	if base == "" {
		return nil, fmt.Errorf("%s is a directory, not a file name", name)
	}
	if checkDirs {
		if err := ProcessTrust().CheckDir(dir, abs); err != nil {
			return nil, err
		}
	}
	// Every step below is relative to this descriptor, so the temporary
	// file, the rename and the fsync all happen in the directory that was
	// checked.
	dirfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		// The message names the file asked for: the directory is
		// where it went wrong, and no Go operation says more.
		return nil, &WriteError{Name: abs, Problem: "its directory " + dir + " cannot be opened", Err: err}
	}
	for range 100 {
		tmp := "." + base + ".gpuenv-" + strconv.FormatUint(rand.Uint64(), 36)
		// O_EXCL with O_NOFOLLOW: a name someone else made first, a
		// symlink above all, is never opened; another name is tried.
		fd, err := unix.Openat(dirfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			unix.Close(dirfd)
			// Not the temporary file's name, which the user never
			// gave and will not find.
			return nil, &WriteError{Name: abs, Problem: "a new file cannot be created in " + dir, Err: err}
		}
		return &File{f: os.NewFile(uintptr(fd), filepath.Join(dir, tmp)), dirfd: dirfd, dir: dir, tmp: tmp, base: base, perm: perm, o: o}, nil
	}
	unix.Close(dirfd)
	return nil, fmt.Errorf("creating a temporary file in %s: every name tried exists", dir)
}

// Write writes to the temporary file.
func (f *File) Write(b []byte) (int, error) { return f.f.Write(b) }

// Commit gives the file its owner and mode, on its descriptor, fsyncs it,
// renames it into place (links it, with NoReplace) and fsyncs the
// directory, so that a crash leaves the old file or the new one, never a
// mix, and the new one never appears with the wrong owner or mode.
func (f *File) Commit() error {
	if f.committed {
		return errors.New("safefile: Commit called twice")
	}
	f.committed = true
	err := f.commit()
	if err != nil {
		f.f.Close()
		unix.Unlinkat(f.dirfd, f.tmp, 0)
	}
	unix.Close(f.dirfd)
	return err
}

func (f *File) commit() error {
	name := filepath.Join(f.dir, f.base)
	if o := f.o.Owner; o != nil {
		euid := os.Geteuid()
		switch {
		case euid == 0:
			if err := f.f.Chown(o.UID, o.GID); err != nil {
				return err
			}
		case o.UID != euid && o.UID != 0:
			return fmt.Errorf("writing %s owned by uid %d needs root", name, o.UID)
		}
	}
	// The mode after the owner: chown clears setuid and setgid bits.
	if err := f.f.Chmod(f.perm); err != nil {
		return err
	}
	if err := f.f.Sync(); err != nil {
		return err
	}
	if err := f.f.Close(); err != nil {
		return err
	}
	if f.o.NoReplace {
		if err := unix.Linkat(f.dirfd, f.tmp, f.dirfd, f.base, 0); err != nil {
			return &WriteError{Name: name, Problem: "it cannot be put in place", Err: err}
		}
		unix.Unlinkat(f.dirfd, f.tmp, 0)
	} else if err := unix.Renameat(f.dirfd, f.tmp, f.dirfd, f.base); err != nil {
		return &WriteError{Name: name, Problem: "it cannot be put in place", Err: err}
	}
	if err := unix.Fsync(f.dirfd); err != nil {
		return &fs.PathError{Op: "fsync", Path: f.dir, Err: err}
	}
	return nil
}

// Close abandons a file not committed, removing the temporary file; after
// Commit it does nothing. It is safe to defer.
func (f *File) Close() error {
	if f.committed {
		return nil
	}
	f.committed = true
	f.f.Close()
	unix.Unlinkat(f.dirfd, f.tmp, 0)
	return unix.Close(f.dirfd)
}

// WriteError says which file could not be written and why, in words:
// "cannot write /etc/x.hcl: a new file cannot be created in /etc/: no
// such file or directory". It wraps the system's error for errors.Is.
type WriteError struct {
	Name    string
	Problem string
	Err     error
}

func (e *WriteError) Error() string {
	return fmt.Sprintf("cannot write %s: %s: %v", e.Name, e.Problem, e.Err)
}

func (e *WriteError) Unwrap() error { return e.Err }
