package apply

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/host"
)

// Kind says what a generation did; the status file carries it, so the
// vocabulary is the plan package's (plan.GenerationKind).
type Kind = plan.GenerationKind

const (
	KindApply    = plan.KindApply
	KindRollback = plan.KindRollback
)

// Status is where a generation stands (plan.GenerationStatus, whose
// constants say what each means).
type Status = plan.GenerationStatus

const (
	StatusRunning  = plan.StatusRunning
	StatusApplied  = plan.StatusApplied
	StatusReverted = plan.StatusReverted
	StatusFailed   = plan.StatusFailed
	StatusDone     = plan.StatusDone
	StatusDamaged  = plan.StatusDamaged
)

// Meta is a generation's summary, meta.json in its directory.
type Meta struct {
	ID      int    `json:"id"`
	Kind    Kind   `json:"kind"`
	Command string `json:"command"`
	// PID is the process that ran it.
	PID      int        `json:"pid"`
	Started  time.Time  `json:"started,omitzero"`
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
	// Damaged says, for StatusDamaged, what is wrong with the generation.
	Damaged string `json:"damaged,omitempty"`

	// dir is a damaged generation's directory on this machine, for the
	// message that says what to do with it.
	dir string
}

// StatusFile is the world-readable summary at <state>/status.json, read
// by `plan` (run by any user) to warn about an unfinished generation. It
// is the planner's type: one format, one reader and one writer.
type StatusFile = plan.ApplyStatus

// Names inside the state directory and a generation's directory.
const (
	generationsDir = "generations"
	statusName     = plan.StatusFile
	lockName       = "lock"
	markerName     = ".gpuenv-state"
	metaName       = "meta.json"
	planName       = "plan.json"
	observeName    = "observation-before.json"
	// observeAfterName is the observation made once an apply succeeded.
	observeAfterName = "observation-after.json"
	journalName      = "journal"
	logName          = "log"
	filesDir         = "files"
	packagesDir      = "packages"
)

// stateDirMode lets every user reach status.json and list nothing.
const stateDirMode = 0o711

// markerText is the marker's content, for whoever finds the directory.
const markerText = `This is gpuenv's state directory: the generations of every gpuenv apply
and rollback on this root, with their journals and the files saved to undo
them. gpuenv uses a directory as its state directory only when it holds this
file (it writes it into a directory it creates, or finds empty), so that it
never takes over a directory that is not its own. Do not edit what is here;
see gpuenv history.
`

// Store is the state directory of one root.
type Store struct {
	h     *host.Host
	dir   string // inside the root
	abs   string // on this machine
	trust trust
	// warn, when set, is given what is insecure instead of failing: the
	// read-only commands show what they find, saying it cannot be
	// trusted. Nil refuses, as everything that acts on the state does.
	warn func(error)
}

// stateKind is what the state directory's path holds.
type stateKind int

const (
	// stateMissing: nothing yet; gpuenv creates it.
	stateMissing stateKind = iota
	// stateMarked: a directory with gpuenv's marker.
	stateMarked
	// stateLegacy: a state directory of a gpuenv from before the marker,
	// recognised by holding a generations directory and nothing but the
	// names gpuenv writes there. It is marked when next opened to change.
	stateLegacy
	// stateEmpty: an empty directory; once its owner is found trusted
	// and its mode writable by nobody else, it is taken as it is,
	// without changing its mode.
	stateEmpty
)

// NotStateDirError refuses a directory that is not gpuenv's.
type NotStateDirError struct {
	Dir  string // inside the root
	Path string // on this machine
}

func (e *NotStateDirError) Error() string {
	where := e.Dir
	if e.Path != e.Dir {
		where += " (" + e.Path + " on this machine)"
	}
	return fmt.Sprintf("the state directory %s is not gpuenv's: it exists, has no %s marker, and is not empty. gpuenv never takes over a directory it did not make, nor changes its mode; give it a directory of its own with --state-dir, such as %s, or a path that does not exist yet",
		where, markerName, path.Join(e.Dir, "gpuenv"))
}

// newStore looks at the state directory dir, a path inside h's root, and
// checks that it and every directory above it can be trusted, changing
// nothing. warn is as in Store.
func newStore(h *host.Host, dir string, warn func(error)) (*Store, stateKind, error) {
	if !path.IsAbs(dir) {
		return nil, 0, fmt.Errorf("state directory %q is not an absolute path", dir)
	}
	abs, err := h.Resolve(dir)
	if err != nil {
		return nil, 0, fmt.Errorf("state directory %s: %w", dir, err)
	}
	s := &Store{h: h, dir: path.Clean(dir), abs: abs, trust: trustFor(h), warn: warn}
	if err := s.insecure(s.trust.checkAbove(h, s.dir)); err != nil {
		return nil, 0, s.access(err)
	}
	kind, err := s.inspect()
	if err != nil {
		return nil, 0, err
	}
	return s, kind, nil
}

// inspect says what the state directory's path holds, and checks the
// directory and the entries gpuenv reads in it.
func (s *Store) inspect() (stateKind, error) {
	// Stat, not Lstat: on the live root a symlink is left for the kernel
	// to follow, and checkAbove has checked where it leads.
	fi, err := os.Stat(s.abs)
	if errors.Is(err, fs.ErrNotExist) {
		return stateMissing, nil
	}
	if err != nil {
		return 0, s.access(err)
	}
	if !fi.IsDir() {
		return 0, fmt.Errorf("the state directory %s is not a directory: give gpuenv a directory of its own with --state-dir", s.dir)
	}
	kind, err := s.kind()
	if err != nil {
		return 0, err
	}
	if err := s.insecure(s.trust.check("state directory", s.abs, fi, false)); err != nil {
		return 0, err
	}
	for _, name := range []string{markerName, statusName, lockName, generationsDir, driftName} {
		if err := s.insecure(s.trust.checkPath("file of the state directory", filepath.Join(s.abs, name), false)); err != nil {
			return 0, s.access(err)
		}
	}
	return kind, nil
}

// kind tells gpuenv's directory from any other.
func (s *Store) kind() (stateKind, error) {
	fi, err := os.Lstat(filepath.Join(s.abs, markerName))
	if err == nil && fi.Mode().IsRegular() {
		return stateMarked, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, s.access(err)
	}
	entries, err := os.ReadDir(s.abs)
	if err != nil {
		return 0, s.access(err)
	}
	generations, others := false, false
	for _, e := range entries {
		switch n := e.Name(); {
		case strings.HasPrefix(n, "."+statusName+".gpuenv-"), strings.HasPrefix(n, "."+markerName+".gpuenv-"), strings.HasPrefix(n, "."+driftName+".gpuenv-"):
			// A temporary file of writeFileAtomic's that a kill left:
			// gpuenv's, and nothing.
		case n == generationsDir && e.IsDir():
			generations = true
		case n == statusName, n == lockName, n == driftName:
			others = true
		default:
			return 0, &NotStateDirError{Dir: s.dir, Path: s.abs}
		}
	}
	switch {
	case generations:
		return stateLegacy, nil
	case others:
		return 0, &NotStateDirError{Dir: s.dir, Path: s.abs}
	}
	return stateEmpty, nil
}

// insecure passes err on, unless it says that something is insecure and
// the store only reads: then it is a warning, and reading goes on.
func (s *Store) insecure(err error) error {
	var ie *InsecureError
	if s.warn != nil && errors.As(err, &ie) {
		s.warn(err)
		return nil
	}
	return err
}

// access turns a permission error on the state directory into one that
// says who may read it, instead of the bare "permission denied".
func (s *Store) access(err error) error {
	if !errors.Is(err, fs.ErrPermission) {
		return err
	}
	p := s.abs
	var pe *fs.PathError
	if errors.As(err, &pe) {
		p = pe.Path
	}
	return fmt.Errorf("%s: permission denied: gpuenv's state directory and its generations are root's, and private; run gpuenv as root (sudo), or, on an image root, as the user who owns them", p)
}

// OpenStore opens the state directory dir, a path inside h's root,
// creating it when it does not exist. It refuses a directory that is not
// gpuenv's (see NotStateDirError) and one that a user other than the
// trusted ones could have changed (see InsecureError).
func OpenStore(h *host.Host, dir string) (*Store, error) {
	s, kind, err := newStore(h, dir, nil)
	if err != nil {
		return nil, err
	}
	if kind == stateMissing {
		created, err := s.create()
		if err != nil {
			return nil, s.access(err)
		}
		if !created {
			// Another gpuenv made it between the look and the
			// mkdir: look again, as at an existing directory.
			if kind, err = s.inspect(); err != nil {
				return nil, err
			}
		}
	}
	if kind == stateEmpty || kind == stateLegacy {
		if err := writeFileAtomic(filepath.Join(s.abs, markerName), []byte(markerText), 0o644); err != nil {
			return nil, s.access(fmt.Errorf("marking the state directory %s: %w", s.dir, err))
		}
	}
	// The generations hold copies of files that may be secret: private,
	// whatever the umask was when an earlier gpuenv made the directory.
	// It is gpuenv's own, inside a directory marked as gpuenv's.
	g := filepath.Join(s.abs, generationsDir)
	if err := os.Mkdir(g, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, s.access(fmt.Errorf("state directory %s: %w", s.dir, err))
	}
	if err := os.Chmod(g, 0o700); err != nil {
		return nil, s.access(err)
	}
	return s, nil
}

// create makes the state directory and the missing directories above it,
// and marks it as gpuenv's. It reports false when the state directory
// appeared meanwhile, made by someone else.
func (s *Store) create() (bool, error) {
	rel, err := filepath.Rel(s.trust.root, s.abs)
	if err != nil {
		return false, err
	}
	d := s.trust.root
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		d = filepath.Join(d, part)
		// The state directory can be passed through but not listed,
		// so that any user's plan can open status.json by name and
		// nothing else; the directories above are made as mkdir -p
		// makes them.
		mode := os.FileMode(0o755)
		if d == s.abs {
			mode = stateDirMode
		}
		err := os.Mkdir(d, mode)
		if errors.Is(err, fs.ErrExist) {
			if d == s.abs {
				return false, nil
			}
			continue
		}
		if err != nil {
			return false, fmt.Errorf("creating the state directory %s: %w", s.dir, err)
		}
		// Mkdir applies the umask: the mode is set as meant, on a
		// directory gpuenv has just made and so may change.
		if err := os.Chmod(d, mode); err != nil {
			return false, err
		}
	}
	if err := writeFileAtomic(filepath.Join(s.abs, markerName), []byte(markerText), 0o644); err != nil {
		return false, fmt.Errorf("marking the state directory %s: %w", s.dir, err)
	}
	return true, syncDir(filepath.Dir(s.abs))
}

// CheckStateDir checks, changing nothing, that the state directory dir
// inside h's root, every directory above it, and its status file are
// owned by a trusted user and writable by nobody else; an *InsecureError
// says what is not. A state directory that does not exist is fine.
func CheckStateDir(h *host.Host, dir string) error {
	if !path.IsAbs(dir) {
		return fmt.Errorf("state directory %q is not an absolute path", dir)
	}
	abs, err := h.Resolve(dir)
	if err != nil {
		return err
	}
	t := trustFor(h)
	if err := t.checkAbove(h, dir); err != nil {
		return err
	}
	fi, err := os.Stat(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := t.check("state directory", abs, fi, false); err != nil {
		return err
	}
	return t.checkPath("status file", filepath.Join(abs, statusName), false)
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

// Generations returns every generation's meta, oldest first. A generation
// whose meta.json is missing or unreadable while the directory holds
// anything else is listed as damaged (StatusDamaged), never left out:
// rollback must not step over what it cannot read. Each generation's
// directory and files are checked to be trusted before they are read.
func (s *Store) Generations() ([]Meta, error) {
	return s.generations(true)
}

// generations is Generations; check false skips the trust checks, for
// refreshStatus, which only sums up the metas that the run holding the
// lock has just checked or written, and must not fail an apply's last
// step for what the next command will refuse anyway.
func (s *Store) generations(check bool) ([]Meta, error) {
	entries, err := os.ReadDir(filepath.Join(s.abs, generationsDir))
	if err != nil {
		return nil, s.access(err)
	}
	var out []Meta
	for _, e := range entries {
		id, err := strconv.Atoi(e.Name())
		if err != nil || id <= 0 || !e.IsDir() {
			continue
		}
		dir := s.genAbs(id)
		if check {
			if err := s.insecure(s.trust.checkTree(fmt.Sprintf("file of generation %d", id), dir)); err != nil {
				return nil, s.access(err)
			}
		}
		m, err := s.readMeta(id)
		switch {
		case err == nil:
			out = append(out, m)
		case errors.Is(err, fs.ErrPermission):
			return nil, s.access(err)
		case errors.Is(err, fs.ErrNotExist):
			empty, lerr := leftover(dir)
			if lerr != nil {
				return nil, s.access(lerr)
			}
			if empty {
				// A process killed between creating the directory
				// and writing its meta.json, the first thing
				// written: there is nothing under it to undo or to
				// list.
				continue
			}
			out = append(out, Meta{ID: id, Status: StatusDamaged, dir: dir,
				Damaged: "its meta.json is missing, while its directory still holds its journal or saved files"})
		default:
			out = append(out, Meta{ID: id, Status: StatusDamaged, dir: dir,
				Damaged: fmt.Sprintf("its meta.json cannot be read (%v)", err)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	s.reconcile(out)
	return out, nil
}

// leftover reports whether dir, a generation's directory without
// meta.json, holds nothing: what a gpuenv killed between creating it and
// writing its meta.json leaves (empty files and packages directories, at
// most a temporary meta.json never renamed into place).
func leftover(dir string) (bool, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, err
	}
	for _, e := range entries {
		switch n := e.Name(); {
		case (n == filesDir || n == packagesDir) && e.IsDir():
			sub, err := os.ReadDir(filepath.Join(dir, n))
			if err != nil {
				return false, err
			}
			if len(sub) > 0 {
				return false, nil
			}
		case strings.HasPrefix(n, "."+metaName+".gpuenv-"):
		default:
			return false, nil
		}
	}
	return true, nil
}

// Meta reads one generation's meta.json, after checking that it can be
// trusted.
func (s *Store) Meta(id int) (Meta, error) {
	p := filepath.Join(s.genAbs(id), metaName)
	if err := s.insecure(s.trust.checkPath(fmt.Sprintf("file of generation %d", id), p, false)); err != nil {
		return Meta{}, err
	}
	m, err := s.readMeta(id)
	if err != nil {
		return m, fmt.Errorf("generation %d: %w", id, err)
	}
	return m, nil
}

// readMeta reads one generation's meta.json.
func (s *Store) readMeta(id int) (Meta, error) {
	var m Meta
	p := filepath.Join(s.genAbs(id), metaName)
	data, err := os.ReadFile(p)
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return m, fmt.Errorf("%s is not valid JSON: %w", p, err)
	}
	if m.ID != id {
		return m, fmt.Errorf("%s names generation %d", p, m.ID)
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
	gens, err := s.generations(false)
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
	data, err := st.Encode()
	if err != nil {
		return err
	}
	// World-readable on purpose: plan, run by any user, reads it to warn.
	return writeFileAtomic(filepath.Join(s.abs, statusName), data, 0o644)
}

// ReadStatus reads <state>/status.json inside h's root, after checking it
// can be trusted (see CheckStateDir). A missing file is the zero
// StatusFile: no generation was ever made.
func ReadStatus(h *host.Host, stateDir string) (StatusFile, error) {
	var st StatusFile
	data, err := readStateFile(h, stateDir, statusName)
	if err != nil || data == nil {
		// No file: nothing was ever applied here, nothing to trust or
		// not (and a converged plan does not walk the directories
		// above it).
		return st, err
	}
	read, err := plan.ReadApplyStatus(bytes.NewReader(data))
	if err != nil {
		return st, fmt.Errorf("%s: %w", path.Join(stateDir, statusName), err)
	}
	st = *read
	if st.Unfinished {
		if ended, ok := EndedAs(h, stateDir, st.Generation); ok {
			st.Unfinished, st.Status, st.Message = false, ended, ""
		}
	}
	return st, nil
}

// EndedAs reads how generation id ended from its journal's end record,
// for a reader of status.json that the run could not rewrite at its end
// (the disk was full): the journal is written first and is the record of
// what happened. ok is false when the journal has no end record or cannot
// be read (by a user other than root, it never can).
func EndedAs(h *host.Host, stateDir string, id int) (Status, bool) {
	if id <= 0 {
		return "", false
	}
	p, err := h.Resolve(path.Join(stateDir, generationsDir, strconv.Itoa(id), journalName))
	if err != nil {
		return "", false
	}
	end, ok := journalEnd(p)
	if !ok || end.Status.Unfinished() {
		return "", false
	}
	return end.Status, true
}

// newGeneration creates the next generation's directory and meta.
func (s *Store) newGeneration(m Meta) (*Generation, error) {
	// Numbered after every directory, damaged ones included, so that no
	// number a journal or meta names is used again. A leftover (see
	// leftover) names nothing and holds nothing: it is removed, so that
	// the numbering does not jump because a gpuenv was killed.
	entries, err := os.ReadDir(filepath.Join(s.abs, generationsDir))
	if err != nil {
		return nil, err
	}
	m.ID = 1
	for _, e := range entries {
		id, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p := filepath.Join(s.abs, generationsDir, e.Name()); id > 0 && e.IsDir() {
			if _, err := os.Lstat(filepath.Join(p, metaName)); errors.Is(err, fs.ErrNotExist) {
				if empty, err := leftover(p); err == nil && empty {
					if err := os.RemoveAll(p); err != nil {
						return nil, fmt.Errorf("removing the empty leftover generation %d: %w", id, err)
					}
					continue
				}
			}
		}
		if id >= m.ID {
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
