package apply

import (
	"fmt"
	"path/filepath"

	"github.com/gpuenv/gpuenv/planner/export"
	"github.com/gpuenv/gpuenv/providers/host"
)

// WriteVerified replaces the verify record in the state directory
// stateDir inside h's root with data, as WriteDrift does: created with
// the state directory when nothing was applied yet, world-readable,
// renamed into place.
func WriteVerified(h *host.Host, stateDir string, data []byte) error {
	s, err := OpenStore(h, stateDir)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(s.abs, export.VerifiedFile), data, 0o644); err != nil {
		return s.access(fmt.Errorf("writing the verify record in %s: %w", s.dir, err))
	}
	return nil
}

// ReadVerified reads the verify record as ReadDrift reads the drift
// record: nil data and no error when there is none.
func ReadVerified(h *host.Host, stateDir string) ([]byte, error) {
	return readStateFile(h, stateDir, export.VerifiedFile)
}
