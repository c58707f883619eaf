package apply

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
)

// Observed is the last observation the state directory keeps: what
// plan -refresh-only compares the host with.
type Observed struct {
	// Generation is the generation that recorded it.
	Generation Meta
	// After is true for the observation made once the apply succeeded
	// (observation-after.json); false for the one its plan was made from
	// (observation-before.json), which predates that generation's own
	// changes.
	After       bool
	Observation *facts.Observation
	// Newer are the generations after Generation that recorded no
	// observation (a rollback, a failed apply): what they changed shows
	// as drift.
	Newer []Meta
}

// maxGenerationFileBytes bounds a generation's plan or observation read
// back: a real host's are well under a megabyte each.
const maxGenerationFileBytes = 64 << 20

// LastObserved reads the newest observation the generations of the state
// directory stateDir inside h's root keep, after checking, as every
// reader of the state directory does, that it can be trusted. It is nil,
// with no error, when no generation recorded one.
func LastObserved(h *host.Host, stateDir string) (*Observed, error) {
	s, kind, err := newStore(h, stateDir, nil)
	if err != nil {
		return nil, err
	}
	if kind == stateMissing || kind == stateEmpty {
		return nil, nil
	}
	if _, err := os.Lstat(filepath.Join(s.abs, generationsDir)); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	gens, err := s.Generations()
	if err != nil {
		return nil, err
	}
	var newer []Meta
	for i := len(gens) - 1; i >= 0; i-- {
		m := gens[i]
		if m.Status == StatusDamaged {
			newer = append([]Meta{m}, newer...)
			continue
		}
		for _, name := range []string{observeAfterName, observeName} {
			obs, err := s.readObservation(m.ID, name)
			if err != nil {
				return nil, err
			}
			if obs != nil {
				return &Observed{Generation: m, After: name == observeAfterName, Observation: obs, Newer: newer}, nil
			}
		}
		newer = append([]Meta{m}, newer...)
	}
	return nil, nil
}

// readObservation reads the observation name of generation id once it is
// found trusted; nil when the generation has none.
func (s *Store) readObservation(id int, name string) (*facts.Observation, error) {
	obs := new(facts.Observation)
	ok, err := s.readGenerationJSON(id, name, "an observation", obs)
	if !ok {
		return nil, err
	}
	return obs, nil
}

// readGenerationJSON decodes generation id's file name into v once the
// file is found trusted, a regular file and at most maxGenerationFileBytes
// long; false when the generation has no such file. what names v in the
// error for a file that does not decode.
func (s *Store) readGenerationJSON(id int, name, what string, v any) (bool, error) {
	p := filepath.Join(s.genAbs(id), name)
	if err := s.insecure(s.trust.checkPath(fmt.Sprintf("file of generation %d", id), p, false)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return false, err
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return false, err
	}
	if !st.Mode().IsRegular() || st.Size() > maxGenerationFileBytes {
		return false, fmt.Errorf("generation %d's %s is not a regular file of at most %d MiB", id, name, maxGenerationFileBytes>>20)
	}
	if err := json.NewDecoder(f).Decode(v); err != nil {
		return false, fmt.Errorf("generation %d's %s is damaged: it does not read as %s", id, name, what)
	}
	return true, nil
}
