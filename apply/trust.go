package apply

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/gpuenv/gpuenv/internal/safefile"
	"github.com/gpuenv/gpuenv/providers/host"
)

// Rollback runs, as root, the inverses journaled in the generations, and
// installs the package files saved beside them: whoever can write a
// generation can run commands as root. So gpuenv trusts what it reads from
// the state directory only when that path, and every directory above it
// inside the root, is owned by a trusted user and writable by nobody else —
// the rule sudo applies to sudoers and sshd's StrictModes to
// authorized_keys.
//
// The trusted owners are root, and, when a user other than root works on an
// image root (--root other than /), that user too: the image is theirs, and
// what they run in it runs as them. On the live root only root is trusted,
// also when a user runs a read-only command, because the generations it
// reads are the ones root's rollback would run.
//
// One exception, for the directories above the state directory only: a
// directory owned by a trusted user with the sticky bit set (a /tmp) may
// be writable by everyone, since nobody but an entry's owner can rename or
// remove it there. The state directory itself, the generations and every
// file in them must be writable by their owner alone. The judgement is
// safefile's, which applies it to every directory root writes a file into.
type trust struct {
	// root is the root directory on this machine.
	root string
	uids []uint32
}

func trustFor(h *host.Host) trust {
	t := trust{root: h.Root(), uids: []uint32{0}}
	if euid := os.Geteuid(); !h.Live() && euid != 0 {
		t.uids = append(t.uids, uint32(euid))
	}
	return t
}

// InsecureError says that a path gpuenv would read its state from could
// have been written by someone it does not trust.
type InsecureError struct {
	// What the path is: "state directory", "directory above the state
	// directory", "file of generation 3" …
	What string
	// Path is on this machine, as the commands of Fix need it.
	Path string
	UID  uint32
	// Mode is the permission bits with setuid, setgid and sticky, as chmod
	// takes them.
	Mode uint32
	// Problems say what is wrong: "not owned by root", "writable by its
	// group", "writable by other users".
	Problems []string
	// Fix is a command that makes the path trusted, or what to do instead.
	Fix string
}

func (e *InsecureError) Error() string {
	return fmt.Sprintf("insecure %s: %s is owned by %s with mode %04o, %s: whoever else can change it could forge the generations that gpuenv rollback runs as root (gpuenv trusts only what is owned by %s and writable by nobody else, as sudo and sshd do). Fix it with: %s",
		e.What, e.Path, safefile.DescribeUID(e.UID), e.Mode, strings.Join(e.Problems, " and "), trustedOwners(), e.Fix)
}

// trustedOwners names the trusted owners for messages. An image root
// worked on by a user other than root trusts that user as well, which the
// message cannot know without the host; saying root is enough there too.
func trustedOwners() string {
	if euid := os.Geteuid(); euid != 0 {
		return "root or by you (uid " + strconv.Itoa(euid) + ", on an image root)"
	}
	return "root"
}

// check returns an *InsecureError when fi, the lstat of p, is not owned by
// a trusted user or is writable by others than its owner, as safefile
// judges the directories root writes into. above is set for the
// directories above the state directory, where a trusted owner's sticky
// directory may be writable by all.
func (t trust) check(what, p string, fi fs.FileInfo, above bool) error {
	v, err := safefile.Trust{UIDs: t.uids, Owners: trustedOwners()}.Inspect(p, fi, above)
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, p, err)
	}
	if v == nil {
		return nil
	}
	e := &InsecureError{What: what, Path: p, UID: v.UID, Mode: v.Mode, Problems: v.Problems, Fix: v.Fix}
	if !above && fi.IsDir() && v.Mode&syscall.S_ISVTX != 0 && v.Mode&0o002 != 0 {
		e.Fix = "give gpuenv a state directory of its own (--state-dir), not a directory shared by all"
	}
	return e
}

// checkPath lstats p, on this machine, and checks it as check does. A
// missing path is no error: it is found missing when read.
func (t trust) checkPath(what, p string, above bool) error {
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return t.check(what, p, fi, above)
}

// checkTree checks dir, on this machine, and everything under it.
func (t trust) checkTree(what, dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		return t.check(what, p, fi, false)
	})
}

// checkAbove checks every directory above dir, a path inside the root, from
// the root directory itself down, without dir itself. A symlink on the way
// is followed inside the root, and the directories above its target are
// checked too: whoever can change any of them can swap what dir leads to.
// Directories that do not exist yet end the walk; gpuenv creates them.
func (t trust) checkAbove(h *host.Host, dir string) error {
	clean := path.Clean(dir)
	final, err := t.real(h, clean)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	seen := map[string]bool{}
	if err == nil {
		if err := t.checkDown(final, final, seen); err != nil {
			return err
		}
	}
	for prefix := path.Dir(clean); ; prefix = path.Dir(prefix) {
		real, err := t.real(h, prefix)
		if err == nil {
			if err := t.checkDown(real, final, seen); err != nil {
				return err
			}
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if prefix == "/" {
			return nil
		}
	}
}

// checkDown checks real, a directory on this machine under the root, and
// every directory from the root down to it, skipping those in seen and
// final (the state directory, checked by its own rule).
func (t trust) checkDown(real, final string, seen map[string]bool) error {
	rel, err := filepath.Rel(t.root, real)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return fmt.Errorf("%s is outside the root %s", real, t.root)
	}
	d := t.root
	parts := []string{}
	if rel != "." {
		parts = strings.Split(rel, string(filepath.Separator))
	}
	for i := 0; ; i++ {
		if !seen[d] && d != final {
			seen[d] = true
			if err := t.checkPath("directory above the state directory", d, true); err != nil {
				return err
			}
		}
		if i == len(parts) {
			return nil
		}
		d = filepath.Join(d, parts[i])
	}
}

// real is where p, a path inside the root, leads on this machine, every
// symlink followed; fs.ErrNotExist when some component is missing.
func (t trust) real(h *host.Host, p string) (string, error) {
	if h.Live() {
		return filepath.EvalSymlinks(p)
	}
	abs, err := h.Resolve(p)
	if err != nil {
		return "", err
	}
	if _, err := os.Lstat(abs); err != nil {
		return "", err
	}
	return abs, nil
}
