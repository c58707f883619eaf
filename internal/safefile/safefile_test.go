package safefile

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mode is the permission bits of p, setuid, setgid and sticky included.
func mode(t *testing.T, p string) uint32 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Mode & 0o7777
}

// noTemporaries fails when a temporary file was left in dir.
func noTemporaries(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.Contains(e.Name(), ".gpuenv-") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

// The mode is set on the descriptor, so the umask does not narrow it and
// the file never appears with another.
func TestWriteFileModeOnDescriptor(t *testing.T) {
	dir := t.TempDir()
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	for _, perm := range []fs.FileMode{0o644, 0o640, 0o600, 0o755} {
		p := filepath.Join(dir, "f")
		if err := WriteFile(p, []byte("data\n"), perm, Options{}); err != nil {
			t.Fatal(err)
		}
		if got := mode(t, p); got != uint32(perm) {
			t.Errorf("mode %04o, want %04o", got, perm)
		}
		if b, _ := os.ReadFile(p); string(b) != "data\n" {
			t.Errorf("content %q", b)
		}
	}
	noTemporaries(t, dir)
}

// Root gives the file its owner before it is in place; anyone else may
// name only itself or root.
func TestWriteFileOwner(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "owned")
	err := WriteFile(p, []byte("x"), 0o600, Options{Owner: &Owner{UID: 65534, GID: 65534}})
	if os.Geteuid() != 0 {
		if err == nil || !strings.Contains(err.Error(), "needs root") {
			t.Fatalf("a user giving a file to another: %v, want needs root", err)
		}
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s written anyway", p)
		}
		noTemporaries(t, dir)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	if st.Uid != 65534 || st.Gid != 65534 || st.Mode&0o7777 != 0o600 {
		t.Errorf("owner %d:%d mode %04o, want 65534:65534 0600", st.Uid, st.Gid, st.Mode&0o7777)
	}
}

// NoReplace never touches an existing file and leaves nothing behind.
func TestWriteFileNoReplace(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "spec.hcl")
	if err := WriteFile(p, []byte("first"), 0o644, Options{NoReplace: true}); err != nil {
		t.Fatal(err)
	}
	err := WriteFile(p, []byte("second"), 0o644, Options{NoReplace: true})
	if !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second write: %v, want it to exist", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "first" {
		t.Errorf("content %q, want first", b)
	}
	noTemporaries(t, dir)
}

// A directory, or one above it, that a user gpuenv does not trust could
// change is refused, naming it, its mode and the fix; a sticky one is not.
func TestCreateRefusesUnsafeDirectories(t *testing.T) {
	base := t.TempDir()
	mk := func(rel string, perm fs.FileMode) string {
		p := filepath.Join(base, rel)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, perm); err != nil {
			t.Fatal(err)
		}
		return p
	}
	open := mk("open", 0o777)
	group := mk("group", 0o775)
	below := mk("open2/below", 0o755)
	mk("open2", 0o757)
	sticky := mk("sticky", os.ModeSticky|0o777)
	link := filepath.Join(base, "link")
	if err := os.Symlink(open, link); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dir, bad, problem, fix string
	}{
		{open, open, "with mode 0777, writable by its group and by other users", "chmod go-w " + open},
		{group, group, "with mode 0775, writable by its group", "chmod go-w " + group},
		{below, filepath.Dir(below), "with mode 0757, writable by other users", "chmod go-w " + filepath.Dir(below)},
		{link, open, "with mode 0777, writable by its group and by other users", "chmod go-w " + open},
	} {
		name := filepath.Join(c.dir, "x.prom")
		err := WriteFile(name, []byte("x"), 0o644, Options{})
		var ue *UnsafeDirError
		if !errors.As(err, &ue) {
			t.Errorf("%s: %v, want an UnsafeDirError", name, err)
			continue
		}
		if ue.Path != c.bad {
			t.Errorf("%s: refused %s, want %s", name, ue.Path, c.bad)
		}
		msg := err.Error()
		for _, want := range []string{"refusing to write " + name, c.bad + " is owned by uid", c.problem, "Fix it with: " + c.fix} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: message lacks %q:\n%s", name, want, msg)
			}
		}
		if _, err := os.Lstat(name); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s written anyway", name)
		}
		noTemporaries(t, c.dir)
	}
	if err := WriteFile(filepath.Join(sticky, "x.prom"), []byte("x"), 0o644, Options{}); err != nil {
		t.Errorf("a sticky directory of a trusted owner: %v", err)
	}
}

// A directory of another user is refused even when that user may not
// write in it: its owner can change its mode at any time.
func TestCreateRefusesAnotherUsersDirectory(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("giving a directory to another user needs root")
	}
	dir := filepath.Join(t.TempDir(), "theirs")
	if err := os.Mkdir(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	err := WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644, Options{})
	var ue *UnsafeDirError
	if !errors.As(err, &ue) || ue.Path != dir {
		t.Fatalf("%v, want %s refused", err, dir)
	}
	for _, want := range []string{"owned by uid 65534", "with mode 0555, not by root", "chown root:root " + dir, "or write it as uid 65534"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message lacks %q:\n%s", want, err)
		}
	}
}

// racer replaces every temporary file that appears in dir with a symlink
// to target, as fast as inotify tells it of one, until stop appears.
func racer(t *testing.T, dir, target, stop string, won chan<- int) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		t.Error(err)
		close(won)
		return
	}
	defer unix.Close(fd)
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE); err != nil {
		t.Error(err)
		close(won)
		return
	}
	link := filepath.Join(dir, ".racer")
	swaps := 0
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Read(fd, buf)
		if err != nil {
			t.Error(err)
			break
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := string(bytes.TrimRight(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+int(ev.Len)], "\x00"))
			off += unix.SizeofInotifyEvent + int(ev.Len)
			if name == stop {
				won <- swaps
				return
			}
			if !strings.Contains(name, ".gpuenv-") {
				continue
			}
			// An exchange fails when the temporary file is gone
			// already: each swap counted is one the writer lost.
			os.Remove(link)
			if os.Symlink(target, link) == nil && unix.Renameat2(unix.AT_FDCWD, link, unix.AT_FDCWD, filepath.Join(dir, name), unix.RENAME_EXCHANGE) == nil {
				swaps++
			}
		}
	}
	won <- swaps
}

// With the directory check left out, as if gpuenv wrote into a directory
// another user can change, a racer swapping each temporary file for a
// symlink to a private file never gets that file's mode or content
// changed: the mode is set on the descriptor of the file gpuenv created,
// never on a path.
func TestWriteWithstandsSymlinkRacer(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "shadow")
	if err := os.WriteFile(target, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	won := make(chan int, 1)
	go racer(t, dir, target, "stop", won)
	// Large enough that the write takes a while, as a real file does.
	data := bytes.Repeat([]byte("gpuenv_doctor_healthy 1\n"), 1<<14)
	const runs = 300
	for i := range runs {
		f, err := create(filepath.Join(dir, "x.prom"), 0o644, Options{}, false)
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.Write(data)
		if err == nil {
			err = f.Commit()
		}
		f.Close()
		// A lost race may end in an error (the rename finds the racer's
		// link gone); what matters is the target.
		if got := mode(t, target); got != 0o600 {
			t.Fatalf("run %d: the racer's target is now mode %04o, was 0600", i, got)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "stop"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	swaps := <-won
	if b, _ := os.ReadFile(target); string(b) != "secret\n" {
		t.Errorf("the racer's target now holds %d bytes", len(b))
	}
	t.Logf("the racer swapped %d of %d temporary files", swaps, runs)
	if swaps == 0 {
		t.Fatal("the racer never swapped a temporary file: the test exercised nothing")
	}
}
