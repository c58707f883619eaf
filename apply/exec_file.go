package apply

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/gpuenv/gpuenv/planner/plan"
)

// fileExecutor writes and removes files gpuenv manages, keeping their
// previous bytes for the inverse.
type fileExecutor struct{ *HostExecutor }

var _ kindOps[plan.FileOp, FileInverse] = fileExecutor{}

func (fileExecutor) opField(op *plan.Operation) **plan.FileOp { return &op.File }

func (fileExecutor) invField(inv *Inverse) **FileInverse { return &inv.File }

func (fileExecutor) names(inv *FileInverse) ([]string, error) {
	if err := plan.CheckManagedFile(inv.Path); err != nil {
		return nil, fmt.Errorf("inverse of a file operation: %w", err)
	}
	if err := plan.CheckFollowUp(inv.After); err != nil {
		return nil, fmt.Errorf("inverse of a file operation on %s: %w", inv.Path, err)
	}
	for _, d := range inv.CreatedDirs {
		if d != path.Clean(d) || !strings.HasPrefix(inv.Path, d+"/") {
			return nil, fmt.Errorf("inverse of a file operation on %s: %q is not a directory above it", inv.Path, d)
		}
	}
	return nil, nil
}

const defaultFileMode = 0o644

func (x fileExecutor) prepare(_ context.Context, ws *Workspace, seq int, op *plan.FileOp) (*FileInverse, error) {
	inv := &FileInverse{Path: path.Clean(op.Path), After: op.After}
	rp, err := x.real(inv.Path)
	if err != nil {
		return nil, err
	}
	fi, err := os.Lstat(rp)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if !op.Remove {
			inv.CreatedDirs, err = x.missingDirs(path.Dir(inv.Path))
			if err != nil {
				return nil, err
			}
		}
		return inv, nil
	case err != nil:
		return nil, err
	}
	inv.Existed = true
	st := fi.Sys().(*syscall.Stat_t)
	inv.UID, inv.GID = int(st.Uid), int(st.Gid)
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		inv.Symlink, err = os.Readlink(rp)
		return inv, err
	case fi.Mode().IsRegular():
		data, err := os.ReadFile(rp)
		if err != nil {
			return nil, err
		}
		name := filepath.Join(filesDir, strconv.Itoa(seq))
		if err := writeFileAtomic(filepath.Join(ws.Path, name), data, 0o600); err != nil {
			return nil, fmt.Errorf("saving the previous %s: %w", inv.Path, err)
		}
		inv.Saved = path.Join(ws.Dir, name)
		inv.Mode = uint32(st.Mode & 0o7777)
		return inv, nil
	}
	return nil, fmt.Errorf("%s is a %s, not a file gpuenv may replace", inv.Path, fi.Mode().Type())
}

// missingDirs lists the ancestors of dir that do not exist, outermost
// first.
func (x fileExecutor) missingDirs(dir string) ([]string, error) {
	var missing []string
	for d := dir; d != "/"; d = path.Dir(d) {
		rp, err := x.Host.Resolve(d)
		if err != nil {
			return nil, err
		}
		if _, err := os.Lstat(rp); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		missing = append([]string{d}, missing...)
	}
	return missing, nil
}

func (x fileExecutor) run(ctx context.Context, ws *Workspace, op *plan.FileOp) error {
	rp, err := x.real(op.Path)
	if err != nil {
		return err
	}
	if op.Remove {
		if err := os.Remove(rp); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := syncDir(filepath.Dir(rp)); err != nil {
			return err
		}
	} else {
		mode := fileMode(op.Mode)
		if mode == 0 {
			mode = defaultFileMode
		}
		if op.Generate != "" {
			// The engine puts the content in first (generated), so that
			// the journal has it before the file does.
			return fmt.Errorf("%s: its content, made at apply, was not made before the write", op.Path)
		}
		if op.Symlink != "" {
			return x.writeSymlink(op.Path, op.Symlink)
		}
		content := []byte(op.Content)
		if op.Key != nil {
			key, err := x.fetchKey(ctx, op.Key)
			if err != nil {
				return err
			}
			content = key
		}
		if err := x.writeFile(op.Path, content, mode, op.UID, op.GID); err != nil {
			return err
		}
	}
	if len(op.After) > 0 {
		return x.command(ctx, ws, nil, op.After...)
	}
	return nil
}

// writeFile writes p inside the root atomically with mode and owner,
// creating missing parent directories (0755).
func (x fileExecutor) writeFile(p string, data []byte, mode os.FileMode, uid, gid int) error {
	if err := x.makeDirs(path.Dir(p)); err != nil {
		return err
	}
	rp, err := x.real(p)
	if err != nil {
		return err
	}
	return writeOwned(rp, data, mode, uid, gid)
}

// makeDirs creates dir inside the root and its missing parents (0755).
func (x fileExecutor) makeDirs(dir string) error {
	dirs, err := x.missingDirs(dir)
	if err != nil {
		return err
	}
	for _, d := range dirs {
		rd, err := x.Host.Resolve(d)
		if err != nil {
			return err
		}
		if err := os.Mkdir(rd, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		if err := syncDir(filepath.Dir(rd)); err != nil {
			return err
		}
	}
	return nil
}

// writeSymlink makes p inside the root a symbolic link to target,
// owned by root, creating missing parent directories (0755): a link
// made beside it and renamed over p, so that p is never missing when it
// was there.
func (x fileExecutor) writeSymlink(p, target string) error {
	if err := x.makeDirs(path.Dir(p)); err != nil {
		return err
	}
	rp, err := x.real(p)
	if err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(rp), "."+filepath.Base(rp)+".gpuenv-link")
	os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return err
	}
	if os.Geteuid() == 0 {
		if err := os.Lchown(tmp, 0, 0); err != nil {
			os.Remove(tmp)
			return err
		}
	}
	if err := os.Rename(tmp, rp); err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(filepath.Dir(rp))
}

// fileMode turns Unix permission bits (setuid, setgid, sticky included)
// into an os.FileMode.
func fileMode(m uint32) os.FileMode {
	fm := os.FileMode(m & 0o777)
	if m&0o4000 != 0 {
		fm |= os.ModeSetuid
	}
	if m&0o2000 != 0 {
		fm |= os.ModeSetgid
	}
	if m&0o1000 != 0 {
		fm |= os.ModeSticky
	}
	return fm
}

func (x fileExecutor) undo(ctx context.Context, ws *Workspace, inv *FileInverse) error {
	rp, err := x.real(inv.Path)
	if err != nil {
		return err
	}
	fi, lerr := os.Lstat(rp)
	if lerr != nil && !errors.Is(lerr, fs.ErrNotExist) {
		return lerr
	}
	changed := false
	switch {
	case !inv.Existed:
		if lerr == nil {
			if err := os.Remove(rp); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			if err := syncDir(filepath.Dir(rp)); err != nil {
				return err
			}
			changed = true
		}
		for i := len(inv.CreatedDirs) - 1; i >= 0; i-- {
			rd, err := x.Host.Resolve(inv.CreatedDirs[i])
			if err != nil {
				return err
			}
			// Only an empty directory goes: something else may have put
			// files there since.
			if err := os.Remove(rd); err == nil {
				syncDir(filepath.Dir(rd))
			}
		}
	case inv.Symlink != "":
		if lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			if t, err := os.Readlink(rp); err == nil && t == inv.Symlink {
				break
			}
		}
		tmp := filepath.Join(filepath.Dir(rp), "."+filepath.Base(rp)+".gpuenv-link")
		os.Remove(tmp)
		if err := os.Symlink(inv.Symlink, tmp); err != nil {
			return err
		}
		if os.Geteuid() == 0 {
			os.Lchown(tmp, inv.UID, inv.GID)
		}
		if err := os.Rename(tmp, rp); err != nil {
			os.Remove(tmp)
			return err
		}
		if err := syncDir(filepath.Dir(rp)); err != nil {
			return err
		}
		changed = true
	default:
		sp, err := x.Host.Resolve(inv.Saved)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(sp)
		if err != nil {
			return fmt.Errorf("the saved copy of %s is gone: %w", inv.Path, err)
		}
		if lerr == nil && fi.Mode().IsRegular() {
			st := fi.Sys().(*syscall.Stat_t)
			cur, rerr := os.ReadFile(rp)
			if rerr == nil && bytes.Equal(cur, data) && st.Mode&0o7777 == inv.Mode && int(st.Uid) == inv.UID && int(st.Gid) == inv.GID {
				break
			}
		}
		if err := writeOwned(rp, data, fileMode(inv.Mode), inv.UID, inv.GID); err != nil {
			return err
		}
		changed = true
	}
	if changed && len(inv.After) > 0 {
		return x.command(ctx, ws, nil, inv.After...)
	}
	return nil
}
