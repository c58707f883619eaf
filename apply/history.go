package apply

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/gpuenv/gpuenv/providers/host"
)

// History lists the generations of the state directory, oldest first. It
// only reads, and takes no lock: a generation being run shows as running.
func History(h *host.Host, stateDir string) ([]Meta, error) {
	abs, err := h.Resolve(stateDir)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(abs, generationsDir)); err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, err
	}
	s := &Store{h: h, dir: stateDir, abs: abs}
	return s.Generations()
}

// Pruned is what Prune removed.
type Pruned struct {
	Generations []int `json:"generations"`
	Bytes       int64 `json:"bytes"`
}

// Prune removes the saved package files of every generation but the
// newest keep. Those generations stay in history and can still be rolled
// back, but their package inverses then need the archive to still have
// the old versions (apt-get, pip fetch them by version).
func Prune(h *host.Host, stateDir string, keep int) (*Pruned, error) {
	if keep < 0 {
		return nil, fmt.Errorf("--keep %d: must be 0 or more", keep)
	}
	if err := checkRoot(h); err != nil {
		return nil, err
	}
	store, err := OpenStore(h, stateDir)
	if err != nil {
		return nil, err
	}
	lock, err := store.Lock("history --keep")
	if err != nil {
		return nil, err
	}
	defer lock.Release()
	gens, err := store.Generations()
	if err != nil {
		return nil, err
	}
	res := &Pruned{}
	for i := 0; i < len(gens)-keep; i++ {
		m := gens[i]
		if m.Pruned || m.Status.Unfinished() {
			// An unfinished generation's files are what finishes it.
			continue
		}
		dir := filepath.Join(store.genAbs(m.ID), packagesDir)
		filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				if fi, err := d.Info(); err == nil {
					res.Bytes += fi.Size()
				}
			}
			return nil
		})
		if err := os.RemoveAll(dir); err != nil {
			return res, err
		}
		if err := os.Mkdir(dir, 0o700); err != nil {
			return res, err
		}
		m.Pruned = true
		if err := store.writeMeta(m); err != nil {
			return res, err
		}
		res.Generations = append(res.Generations, m.ID)
	}
	return res, nil
}
