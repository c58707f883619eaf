package apply

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/gpuenv/gpuenv/internal/safefile"
	"github.com/gpuenv/gpuenv/providers/host"
)

// History lists the generations of the state directory, oldest first. It
// only reads, and takes no lock: a generation being run shows as running.
// It refuses a state directory that cannot be trusted (see InsecureError).
func History(h *host.Host, stateDir string) ([]Meta, error) {
	return ReadHistory(h, stateDir, nil)
}

// ReadHistory is History for a command that only shows what it reads:
// what cannot be trusted is given to warn, when set, and reading goes on.
func ReadHistory(h *host.Host, stateDir string, warn func(error)) ([]Meta, error) {
	s, kind, err := newStore(h, stateDir, warn)
	if err != nil {
		return nil, err
	}
	if kind == stateMissing || kind == stateEmpty {
		return nil, nil
	}
	if _, err := os.Lstat(filepath.Join(s.abs, generationsDir)); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return s.Generations()
}

// DamagedError stops a rollback at a generation it cannot read: undoing
// older generations past it could undo what it built on.
type DamagedError struct{ Meta Meta }

func (e *DamagedError) Error() string {
	return fmt.Sprintf("generation %d is damaged: %s. gpuenv cannot tell what it changed, so rollback stops there rather than undo older generations past it. "+
		"Look at %s (its journal says what it did) and put its meta.json back, or undo its changes by hand; then move it aside (mv %s %s.damaged) and run gpuenv rollback again",
		e.Meta.ID, e.Meta.Damaged, e.Meta.dir, safefile.ShellQuote(e.Meta.dir), safefile.ShellQuote(e.Meta.dir))
}

// damagedInTheWay returns a *DamagedError for the newest damaged
// generation that the rollback planRollback is asked for would step over
// or undo: newer than the unfinished generation it finishes, than the
// generation --to returns to (to >= 0, that one included), or than the
// newest apply not yet undone.
func damagedInTheWay(gens []Meta, to int) error {
	unfinished := 0
	for _, m := range gens {
		if m.Status.Unfinished() {
			unfinished = m.ID
		}
	}
	for i := len(gens) - 1; i >= 0; i-- {
		m := gens[i]
		if unfinished == 0 && to >= 0 && m.ID < to {
			return nil
		}
		if m.Status == StatusDamaged {
			return &DamagedError{Meta: m}
		}
		switch {
		case unfinished != 0:
			if m.ID == unfinished {
				return nil
			}
		case to >= 0:
			if m.ID == to {
				return nil
			}
		case m.Kind == KindApply && m.Status == StatusApplied && m.UndoneBy == 0:
			return nil
		}
	}
	return nil
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
	store, lock, gens, err := lockStore(h, stateDir, "history --keep")
	if err != nil {
		return nil, err
	}
	defer lock.Release()
	res := &Pruned{}
	for i := 0; i < len(gens)-keep; i++ {
		m := gens[i]
		if m.Pruned || m.Status.Unfinished() || m.Status == StatusDamaged {
			// An unfinished generation's files are what finishes it; a
			// damaged one's may be what mends it by hand.
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
