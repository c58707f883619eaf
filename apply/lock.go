package apply

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpuenv/gpuenv/providers/host"
)

// LockInfo names who holds a state directory's lock.
type LockInfo struct {
	PID     int       `json:"pid"`
	Command string    `json:"command"`
	Started time.Time `json:"started"`
}

func (l LockInfo) String() string {
	if l.empty() {
		return "a gpuenv that died while taking the lock (the lock file is empty)"
	}
	return fmt.Sprintf("gpuenv %s (pid %d, started %s)", l.Command, l.PID, l.Started.Local().Format(time.RFC3339))
}

// empty reports whether the lock file named nobody: its holder creates it,
// then flocks and writes it, so an empty one that nobody holds was left by
// a process that died in between.
func (l LockInfo) empty() bool { return l.PID == 0 && l.Command == "" }

// LockedError is returned when another gpuenv holds the lock, or held it
// and is gone without releasing it.
type LockedError struct {
	Path   string
	Holder LockInfo
	// Stale is set when the holder is no longer running: the lock stays
	// until `gpuenv force-unlock`, because the generation it ran may be
	// unfinished and must be looked at first.
	Stale bool
}

func (e *LockedError) Error() string {
	switch {
	case e.Holder.empty() && e.Stale:
		return fmt.Sprintf("the state directory's lock %s is an empty file left by a gpuenv that died while taking it; nothing holds it now: run `gpuenv force-unlock` to remove it", e.Path)
	case e.Holder.empty():
		return fmt.Sprintf("another gpuenv is taking the state directory's lock %s right now (it has not written its name yet); try again in a moment", e.Path)
	}
	if e.Stale {
		return fmt.Sprintf("the state directory is locked by %s, which is no longer running (%s); check `gpuenv history`, then run `gpuenv force-unlock`", e.Holder, e.Path)
	}
	return fmt.Sprintf("another gpuenv is running on this root: %s holds %s", e.Holder, e.Path)
}

// Lock is a held state-directory lock. The lock file names its holder; the
// holder also keeps an exclusive flock on it, which the kernel drops when
// the process dies however it dies, so that liveness never depends on a
// pid that may have been reused.
type Lock struct {
	f    *os.File
	path string
}

// Lock takes the state directory's lock for command, failing at once when
// it is held or was left behind by a process that is gone.
func (s *Store) Lock(command string) (*Lock, error) {
	p := filepath.Join(s.abs, lockName)
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		info, live, ierr := inspectLock(p)
		if ierr != nil {
			return nil, ierr
		}
		return nil, &LockedError{Path: s.dir + "/" + lockName, Holder: info, Stale: !live}
	}
	if err != nil {
		return nil, fmt.Errorf("taking the lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		os.Remove(p)
		return nil, fmt.Errorf("taking the lock: %w", err)
	}
	info := LockInfo{PID: os.Getpid(), Command: command, Started: time.Now().UTC()}
	data, _ := json.Marshal(info)
	if _, err := f.Write(append(data, '\n')); err != nil {
		f.Close()
		os.Remove(p)
		return nil, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(p)
		return nil, err
	}
	return &Lock{f: f, path: p}, syncDir(s.abs)
}

// lockStore opens the state directory dir inside h's root, takes its lock
// for command and reads its generations, which the lock keeps as read
// until the caller releases it.
func lockStore(h *host.Host, dir, command string) (*Store, *Lock, []Meta, error) {
	store, err := OpenStore(h, dir)
	if err != nil {
		return nil, nil, nil, err
	}
	lock, err := store.Lock(command)
	if err != nil {
		return nil, nil, nil, err
	}
	gens, err := store.Generations()
	if err != nil {
		lock.Release()
		return nil, nil, nil, err
	}
	return store, lock, gens, nil
}

// Release removes the lock file and drops the flock.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := os.Remove(l.path)
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.f = nil
	return err
}

// inspectLock reads a lock file and reports whether its holder still
// holds the flock.
func inspectLock(p string) (LockInfo, bool, error) {
	var info LockInfo
	f, err := os.Open(p)
	if err != nil {
		return info, false, err
	}
	defer f.Close()
	data, _ := os.ReadFile(p)
	if len(data) == 0 {
		// A holder creates the file, then flocks and writes it: an empty
		// file may be one being taken right now. Look once more.
		time.Sleep(50 * time.Millisecond)
		data, _ = os.ReadFile(p)
	}
	if len(data) > 0 {
		if err := json.Unmarshal(data, &info); err != nil {
			return info, false, fmt.Errorf("lock file %s is unreadable (%v); if no gpuenv is running, run `gpuenv force-unlock`", p, err)
		}
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return info, true, nil
		}
		return info, false, err
	}
	unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return info, false, nil
}

// CheckReady says, without taking the lock or changing anything, why an
// apply on the state directory dir inside h's root would be refused now:
// a state directory that is not gpuenv's or cannot be trusted, a lock
// held by a running gpuenv (a *LockedError naming it), or an unfinished
// generation. The apply command asks before planning, so that nobody is
// asked to confirm a plan that would be refused; Apply checks it all again
// under the lock.
func CheckReady(h *host.Host, dir string) error {
	s, kind, err := newStore(h, dir, nil)
	if err != nil || kind == stateMissing || kind == stateEmpty {
		return err
	}
	if _, err := os.Lstat(filepath.Join(s.abs, generationsDir)); err == nil {
		if _, err := s.Generations(); err != nil {
			return err
		}
	}
	p := filepath.Join(s.abs, lockName)
	var stale *LockedError
	info, live, err := inspectLock(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	case live:
		return &LockedError{Path: s.dir + "/" + lockName, Holder: info}
	default:
		stale = &LockedError{Path: s.dir + "/" + lockName, Holder: info, Stale: true}
	}
	st, err := ReadStatus(h, dir)
	if err != nil {
		return err
	}
	if !st.Unfinished {
		if stale != nil {
			return stale
		}
		return nil
	}
	msg := fmt.Sprintf("generation %d (%s) is unfinished: the host may be between two states. Run `gpuenv rollback` to finish reverting it, then apply again", st.Generation, st.Kind)
	if stale != nil {
		msg += fmt.Sprintf("; first run `gpuenv force-unlock`: the lock was left by %s, which is no longer running", stale.Holder)
	}
	return errors.New(msg)
}

// ForceUnlock removes the lock of the state directory dir inside h's root
// as Store.ForceUnlock does, without creating the state directory when
// there is none.
func ForceUnlock(h *host.Host, dir string) (LockInfo, bool, error) {
	if h.Live() && os.Geteuid() != 0 {
		return LockInfo{}, false, errors.New("removing the state directory's lock needs root: run gpuenv force-unlock as root (sudo)")
	}
	s, kind, err := newStore(h, dir, nil)
	if err != nil {
		return LockInfo{}, false, err
	}
	if kind == stateMissing {
		return LockInfo{}, false, nil
	}
	if s, err = OpenStore(h, dir); err != nil {
		return LockInfo{}, false, err
	}
	return s.ForceUnlock()
}

// ForceUnlock removes a lock whose holder is gone and says whose it was.
// It refuses while the holder runs. No lock: ok, nothing removed.
func (s *Store) ForceUnlock() (LockInfo, bool, error) {
	// The generations are checked as every command that changes the
	// state checks them, so that a forged one is found before the lock
	// is cleared for the rollback that would run it.
	if _, err := s.Generations(); err != nil {
		return LockInfo{}, false, err
	}
	p := filepath.Join(s.abs, lockName)
	info, live, err := inspectLock(p)
	if errors.Is(err, fs.ErrNotExist) {
		return info, false, nil
	}
	if err != nil {
		// An unreadable lock file cannot name a live holder; its flock
		// still decides.
		f, oerr := os.Open(p)
		if oerr != nil {
			return info, false, oerr
		}
		ferr := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		f.Close()
		if ferr != nil {
			return info, false, fmt.Errorf("the lock %s is held by a running process", p)
		}
	} else if live {
		return info, false, &LockedError{Path: s.dir + "/" + lockName, Holder: info}
	}
	if err := os.Remove(p); err != nil {
		return info, false, err
	}
	return info, true, syncDir(s.abs)
}
