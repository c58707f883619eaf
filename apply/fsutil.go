package apply

import (
	"fmt"
	"os"
	"path/filepath"
)

// writeFileAtomic is writeOwned for gpuenv's own files.
func writeFileAtomic(name string, data []byte, mode os.FileMode) error {
	return writeOwned(name, data, mode, -1, -1)
}

// writeOwned replaces name with data so that a crash leaves either the old
// file or the new one, never a mix: a temporary file in the same directory
// is written, given its owner and mode, fsynced, renamed over name, and the
// directory fsynced so that the rename itself is durable. The owner is set
// before the rename, so the file never appears with the wrong one; a
// negative uid keeps the process's own.
func writeOwned(name string, data []byte, mode os.FileMode, uid, gid int) error {
	dir := filepath.Dir(name)
	f, err := os.CreateTemp(dir, "."+filepath.Base(name)+".gpuenv-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return err
	}
	if uid < 0 {
		// The process's own files: gpuenv's state.
	} else if os.Geteuid() == 0 {
		if err := f.Chown(uid, gid); err != nil {
			return err
		}
	} else if uid != os.Geteuid() && uid != 0 {
		return fmt.Errorf("writing %s owned by uid %d needs root", name, uid)
	}
	// Chmod after Chown: chown clears setuid/setgid bits.
	if err := f.Chmod(mode); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, name); err != nil {
		return err
	}
	ok = true
	return syncDir(dir)
}

// syncDir fsyncs a directory, making the creation, rename or removal of
// an entry in it durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
