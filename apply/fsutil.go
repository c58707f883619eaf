package apply

import (
	"os"

	"github.com/gpuenv/gpuenv/internal/safefile"
)

// writeFileAtomic is writeOwned for gpuenv's own files.
func writeFileAtomic(name string, data []byte, mode os.FileMode) error {
	return writeOwned(name, data, mode, -1, -1)
}

// writeOwned replaces name with data as safefile does — owner and mode set
// on the descriptor before the rename, so that a crash leaves either the
// old file or the new one and the new one never appears with the wrong
// owner or mode — and refuses a directory that a user other than root could
// change. A negative uid keeps the process's own.
func writeOwned(name string, data []byte, mode os.FileMode, uid, gid int) error {
	var o safefile.Options
	if uid >= 0 {
		o.Owner = &safefile.Owner{UID: uid, GID: gid}
	}
	return safefile.WriteFile(name, data, mode, o)
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
