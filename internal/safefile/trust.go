package safefile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// Trust is whom gpuenv believes about a path: the users who may own it.
// Whoever owns a directory, or may write in it, can rename and replace its
// entries, so gpuenv reads and writes as root only where each directory on
// the way belongs to a trusted user and nobody else may write in it — the
// rule sudo applies to sudoers and sshd's StrictModes to authorized_keys.
type Trust struct {
	UIDs []uint32
	// Owners names UIDs in messages: "root", "root or you (uid 1000)".
	Owners string
}

// ProcessTrust trusts root and the user gpuenv runs as: root's files may
// go where root alone can change every directory above them, and a user's
// where that user and root alone can.
func ProcessTrust() Trust {
	euid := os.Geteuid()
	if euid == 0 {
		return Trust{UIDs: []uint32{0}, Owners: "root"}
	}
	return Trust{UIDs: []uint32{0, uint32(euid)}, Owners: "root or by you (uid " + strconv.Itoa(euid) + ")"}
}

// Verdict says why a path is not one only trusted users can change.
type Verdict struct {
	Path string
	UID  uint32
	// Mode is the permission bits with setuid, setgid and sticky, as
	// chmod takes them.
	Mode uint32
	// Problems say what is wrong: "not by root", "writable by its
	// group", "writable by other users".
	Problems []string
	// Fix is the commands that make the path trusted.
	Fix string
}

// Inspect judges fi, the lstat of p: nil when p is owned by a trusted user
// and writable by nobody else. shared allows one exception, for
// directories: one owned by a trusted user with the sticky bit set (a
// /tmp) may be writable by everyone, since there nobody but an entry's
// owner can rename or remove it.
func (t Trust) Inspect(p string, fi fs.FileInfo, shared bool) (*Verdict, error) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil, fmt.Errorf("%s: no owner information", p)
	}
	mode := st.Mode & 0o7777
	ownerOK := slices.Contains(t.UIDs, st.Uid)
	sticky := mode&syscall.S_ISVTX != 0 && fi.IsDir()
	// A symlink's own mode means nothing; only the directory holding it
	// decides who can replace it, and that directory is checked too.
	writable := fi.Mode()&fs.ModeSymlink == 0 && mode&0o022 != 0
	if shared && sticky && ownerOK {
		writable = false
	}
	if ownerOK && !writable {
		return nil, nil
	}
	v := &Verdict{Path: p, UID: st.Uid, Mode: mode}
	var fix []string
	if !ownerOK {
		v.Problems = append(v.Problems, "not by "+t.Owners)
		owner := "root:root"
		if euid := os.Geteuid(); euid != 0 {
			owner = strconv.Itoa(euid)
		}
		fix = append(fix, "chown "+owner+" "+ShellQuote(p))
	}
	if writable {
		switch {
		case mode&0o020 != 0 && mode&0o002 != 0:
			v.Problems = append(v.Problems, "writable by its group and by other users")
		case mode&0o020 != 0:
			v.Problems = append(v.Problems, "writable by its group")
		default:
			v.Problems = append(v.Problems, "writable by other users")
		}
		// A shared sticky directory is made safe by giving it to
		// root; taking its write bits away would break it for
		// everyone.
		if !(shared && sticky) {
			fix = append(fix, "chmod go-w "+ShellQuote(p))
		}
	}
	v.Fix = strings.Join(fix, " && ")
	return v, nil
}

// UnsafeDirError refuses to write a file into a directory that someone
// gpuenv does not trust could change: between the write and the rename,
// they could swap the directory's entries and make root's write land on a
// file of their choosing.
type UnsafeDirError struct {
	// File is the file that was to be written.
	File string
	Verdict
}

func (e *UnsafeDirError) Error() string {
	other := ""
	if !slices.Contains(ProcessTrust().UIDs, e.UID) {
		other = fmt.Sprintf(", or write it as %s, who can change that directory anyway", DescribeUID(e.UID))
	}
	return fmt.Sprintf("refusing to write %s: %s is owned by %s with mode %04o, %s: whoever else can change a directory on the way to a file gpuenv writes could swap its entries and make the write land on a file of their choosing (gpuenv writes only where every directory is owned by %s and writable by nobody else, or sticky as /tmp is). Fix it with: %s; or write the file into another directory%s",
		e.File, e.Path, DescribeUID(e.UID), e.Mode, strings.Join(e.Problems, " and "), ProcessTrust().Owners, e.Fix, other)
}

// CheckDir checks dir and every directory above it, on this machine: each
// must be one that Inspect accepts, shared sticky directories included. A
// symlink on the way is followed, and the directories above its target
// are checked too: whoever can change any of them can swap what dir
// leads to. file is the file to be written, for the message.
func (t Trust) CheckDir(dir, file string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	return t.checkChain(abs, file, map[string]bool{})
}

func (t Trust) checkChain(abs, file string, seen map[string]bool) error {
	p := "/"
	rest := strings.Split(strings.TrimPrefix(abs, "/"), "/")
	for i := 0; ; i++ {
		if !seen[p] {
			seen[p] = true
			fi, err := os.Lstat(p)
			if errors.Is(err, fs.ErrNotExist) {
				// The write fails there on its own.
				return nil
			}
			if err != nil {
				return err
			}
			if fi.Mode()&fs.ModeSymlink != 0 {
				real, err := filepath.EvalSymlinks(p)
				if err != nil {
					return err
				}
				if err := t.checkChain(real, file, seen); err != nil {
					return err
				}
			} else {
				v, err := t.Inspect(p, fi, true)
				if err != nil {
					return err
				}
				if v != nil {
					return &UnsafeDirError{File: file, Verdict: *v}
				}
			}
		}
		if i == len(rest) || rest[i] == "" {
			return nil
		}
		p = filepath.Join(p, rest[i])
	}
}

// DescribeUID names a user for messages: "uid 105 (prometheus)".
func DescribeUID(uid uint32) string {
	id := strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(id); err == nil {
		return "uid " + id + " (" + u.Username + ")"
	}
	return "uid " + id
}

// ShellQuote quotes p for a shell when it needs it, so that a fix can be
// pasted as it is.
func ShellQuote(p string) string {
	if p != "" && strings.Trim(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+:,@%") == "" {
		return p
	}
	return "'" + strings.ReplaceAll(p, "'", `'\''`) + "'"
}
