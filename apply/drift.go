package apply

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"

	"github.com/gpuenv/gpuenv/planner/export"
	"github.com/gpuenv/gpuenv/providers/host"
)

// driftName is the drift record's name in the state directory.
const driftName = export.DriftFile

// WriteDrift replaces the drift record in the state directory stateDir
// inside h's root with data, creating and marking the state directory as
// apply does when it does not exist yet: the drift timer may run before
// anything was ever applied. The record is world-readable, as the status
// file is, so that an exporter need not run as root to report it; it is
// written to a temporary file and renamed, so a reader never sees half of
// it.
func WriteDrift(h *host.Host, stateDir string, data []byte) error {
	s, err := OpenStore(h, stateDir)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(s.abs, driftName), data, 0o644); err != nil {
		return s.access(fmt.Errorf("writing the drift record in %s: %w", s.dir, err))
	}
	return nil
}

// ReadDrift reads the drift record of the state directory stateDir inside
// h's root, after checking, as ReadStatus does, that it and the
// directories it is in can be trusted. A missing record is nil data and
// no error: the drift timer has not run.
func ReadDrift(h *host.Host, stateDir string) ([]byte, error) {
	return readStateFile(h, stateDir, driftName)
}

// readStateFile reads name, one of the state directory's world-readable
// files, once the state directory, the directories above it and the file
// itself are found trusted (see CheckStateDir). A missing file is nil data
// and no error.
func readStateFile(h *host.Host, stateDir, name string) ([]byte, error) {
	p := path.Join(stateDir, name)
	data, err := h.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err := CheckStateDir(h, stateDir); err != nil {
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	abs, err := h.Resolve(p)
	if err != nil {
		return nil, err
	}
	if err := trustFor(h).checkPath("file of the state directory", abs, false); err != nil {
		return nil, err
	}
	return data, nil
}
