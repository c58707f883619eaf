package apply

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/gpuenv/gpuenv/providers/host"
)

// Kind says what a generation did.
type Kind string

const (
	KindApply    Kind = "apply"
	KindRollback Kind = "rollback"
)

// Status is where a generation stands.
type Status string

const (
	// StatusRunning: started and not finished. Found on disk with no live
	// holder of the lock, it means the process was killed.
	StatusRunning Status = "running"
	// StatusApplied: an apply whose every operation succeeded.
	StatusApplied Status = "applied"
	// StatusReverted: an apply that failed and whose completed operations
	// were all undone; the host is as it was before it.
	StatusReverted Status = "reverted"
	// StatusFailed: an apply or rollback that failed and left operations
	// done that are not undone (revert incomplete or --no-revert); the
	// host needs `gpuenv rollback`.
	StatusFailed Status = "failed"
	// StatusDone: a rollback that undid everything it set out to.
	StatusDone Status = "done"
)

// Unfinished reports whether a generation in this status left the host
// between two states: plan warns, apply refuses, rollback finishes it.
func (s Status) Unfinished() bool { return s == StatusRunning || s == StatusFailed }

// Meta is a generation's summary, meta.json in its directory.
type Meta struct {
	ID      int    `json:"id"`
	Kind    Kind   `json:"kind"`
	Command string `json:"command"`
	// PID is the process that ran it.
	PID      int        `json:"pid"`
	Started  time.Time  `json:"started"`
	Finished *time.Time `json:"finished,omitempty"`
	// SpecDigest is the applied plan's, for an apply.
	SpecDigest string `json:"spec_digest,omitempty"`
	// Summary is one line for history: the steps applied or the
	// generations undone.
	Summary string `json:"summary"`
	Status  Status `json:"status"`
	// Operations is how many operations the plan had (apply) or how many
	// inverses the rollback set out to run.
	Operations int `json:"operations"`
	// Undoes lists, for a rollback, the applies it undoes, newest first.
	Undoes []int `json:"undoes,omitempty"`
	// UndoneBy is the rollback that undid this apply (0: none).
	UndoneBy int `json:"undone_by,omitempty"`
	// Error is why the generation failed.
	Error string `json:"error,omitempty"`
	// NeedsReboot is set when a change takes effect only after a reboot.
	NeedsReboot bool `json:"needs_reboot,omitempty"`
	// Pruned is set once history --keep removed the saved package files.
	Pruned bool `json:"pruned,omitempty"`
}

// StatusFile is the world-readable summary at <state>/status.json, read
// by `plan` (run by any user) to warn about an unfinished generation.
type StatusFile struct {
	Unfinished bool   `json:"unfinished"`
	Generation int    `json:"generation"`
	Kind       Kind   `json:"kind"`
	Status     Status `json:"status"`
	// Command, Started and PID are the generation's run, shown by plan as
	// evidence.
	Command string    `json:"command,omitempty"`
	Started time.Time `json:"started,omitzero"`
	PID     int       `json:"pid,omitempty"`
	Updated time.Time `json:"updated"`
	// Message says what to do when Unfinished.
	Message string `json:"message,omitempty"`
}

// Names inside the state directory and a generation's directory.
const (
	generationsDir = "generations"
	statusName     = "status.json"
	lockName       = "lock"
	metaName       = "meta.json"
	planName       = "plan.json"
	observeName    = "observation-before.json"
	journalName    = "journal"
	logName        = "log"
	filesDir       = "files"
	packagesDir    = "packages"
)

// stateDirMode lets every user reach status.json and list nothing.
const stateDirMode = 0o711

// Store is the state directory of one root.
type Store struct {
	h   *host.Host
	dir string // inside the root
	abs string // on this machine
}

// OpenStore opens (creating, 0700) the state directory dir, a path inside
// h's root.
func OpenStore(h *host.Host, dir string) (*Store, error) {
	if !path.IsAbs(dir) {
		return nil, fmt.Errorf("state directory %q is not an absolute path", dir)
	}
	abs, err := h.Resolve(dir)
	if err != nil {
		return nil, fmt.Errorf("state directory %s: %w", dir, err)
	}
	if err := os.MkdirAll(filepath.Join(abs, generationsDir), 0o700); err != nil {
		return nil, fmt.Errorf("state directory %s: %w", dir, err)
	}
	// MkdirAll leaves an existing directory's mode alone and applies the
	// umask to new ones, so the modes are set whatever created them. The
	// generations hold copies of files that may be secret: private. The
	// state directory itself can be passed through but not listed
	// (0711), so that any user's plan can open status.json by name and
	// nothing else.
	if err := os.Chmod(filepath.Join(abs, generationsDir), 0o700); err != nil {
		return nil, err
	}
	if err := os.Chmod(abs, stateDirMode); err != nil {
		return nil, err
	}
	return &Store{h: h, dir: path.Clean(dir), abs: abs}, nil
}

// Dir is the state directory as a path inside the root.
func (s *Store) Dir() string { return s.dir }

// Path is the state directory on this machine.
func (s *Store) Path() string { return s.abs }

func (s *Store) genAbs(id int) string {
	return filepath.Join(s.abs, generationsDir, strconv.Itoa(id))
}

func (s *Store) genDir(id int) string {
	return path.Join(s.dir, generationsDir, strconv.Itoa(id))
}

// Generations returns every generation's meta, oldest first.
func (s *Store) Generations() ([]Meta, error) {
	entries, err := os.ReadDir(filepath.Join(s.abs, generationsDir))
	if err != nil {
		return nil, err
	}
	var out []Meta
	for _, e := range entries {
		id, err := strconv.Atoi(e.Name())
		if err != nil || id <= 0 || !e.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(s.genAbs(id), metaName)); errors.Is(err, fs.ErrNotExist) {
			// A process killed while creating the directory, before its
			// meta.json (written before anything else is done): there is
			// nothing under it to undo or to list.
			continue
		}
		m, err := s.Meta(id)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	s.reconcile(out)
	return out, nil
}

// Meta reads one generation's meta.json.
func (s *Store) Meta(id int) (Meta, error) {
	var m Meta
	p := filepath.Join(s.genAbs(id), metaName)
	data, err := os.ReadFile(p)
	if err != nil {
		return m, fmt.Errorf("generation %d: %w", id, err)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return m, fmt.Errorf("generation %d: %s is not valid JSON: %w", id, p, err)
	}
	if m.ID != id {
		return m, fmt.Errorf("generation %d: %s names generation %d", id, p, m.ID)
	}
	return m, nil
}

// writeMeta replaces a generation's meta.json atomically and refreshes
// status.json from it.
func (s *Store) writeMeta(m Meta) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(s.genAbs(m.ID), metaName), append(data, '\n'), 0o600); err != nil {
		return err
	}
	return s.refreshStatus()
}

// refreshStatus rewrites status.json from the generations: the newest
// unfinished one if any, else the newest.
func (s *Store) refreshStatus() error {
	gens, err := s.Generations()
	if err != nil {
		return err
	}
	st := StatusFile{Updated: time.Now().UTC()}
	for i := len(gens) - 1; i >= 0; i-- {
		g := gens[i]
		if i == len(gens)-1 {
			st.Generation, st.Kind, st.Status, st.Command, st.Started, st.PID = g.ID, g.Kind, g.Status, g.Command, g.Started, g.PID
		}
		if g.Status.Unfinished() {
			st.Unfinished = true
			st.Generation, st.Kind, st.Status, st.Command, st.Started, st.PID = g.ID, g.Kind, g.Status, g.Command, g.Started, g.PID
			st.Message = fmt.Sprintf("generation %d (%s) is unfinished: the host may be between two states; run `gpuenv rollback` to finish reverting it", g.ID, g.Kind)
			break
		}
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	// World-readable on purpose: plan, run by any user, reads it to warn.
	return writeFileAtomic(filepath.Join(s.abs, statusName), append(data, '\n'), 0o644)
}

// ReadStatus reads <state>/status.json inside h's root. A missing file is
// the zero StatusFile: no generation was ever made.
func ReadStatus(h *host.Host, stateDir string) (StatusFile, error) {
	var st StatusFile
	data, err := h.ReadFile(path.Join(stateDir, statusName))
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return st, fmt.Errorf("%s: %w", path.Join(stateDir, statusName), err)
	}
	return st, nil
}

// newGeneration creates the next generation's directory and meta.
func (s *Store) newGeneration(m Meta) (*Generation, error) {
	// Numbered after every directory, with or without meta.json, so that
	// a number is never reused.
	entries, err := os.ReadDir(filepath.Join(s.abs, generationsDir))
	if err != nil {
		return nil, err
	}
	m.ID = 1
	for _, e := range entries {
		if id, err := strconv.Atoi(e.Name()); err == nil && id >= m.ID {
			m.ID = id + 1
		}
	}
	abs := s.genAbs(m.ID)
	if err := os.Mkdir(abs, 0o700); err != nil {
		return nil, fmt.Errorf("creating generation %d: %w", m.ID, err)
	}
	for _, d := range []string{filesDir, packagesDir} {
		if err := os.Mkdir(filepath.Join(abs, d), 0o700); err != nil {
			return nil, err
		}
	}
	if err := syncDir(filepath.Dir(abs)); err != nil {
		return nil, err
	}
	g := &Generation{store: s, Meta: m}
	if err := g.save(); err != nil {
		return nil, err
	}
	return g, nil
}

// Generation is one apply or rollback being run.
type Generation struct {
	store *Store
	Meta  Meta
}

// Dir is the generation's directory inside the root: the path commands
// run in the root are given.
func (g *Generation) Dir() string { return g.store.genDir(g.Meta.ID) }

// Path is the generation's directory on this machine.
func (g *Generation) Path() string { return g.store.genAbs(g.Meta.ID) }

// LogPath is the package managers' log, inside the root.
func (g *Generation) LogPath() string { return path.Join(g.Dir(), logName) }

func (g *Generation) save() error { return g.store.writeMeta(g.Meta) }

// writeJSON writes a document into the generation, 0600.
func (g *Generation) writeJSON(name string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(g.Path(), name), append(data, '\n'), 0o600)
}
