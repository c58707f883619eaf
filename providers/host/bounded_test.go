package host_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuenv/gpuenv/providers/host"
)

// handles are every way a file is opened: a handle from New and an
// observation handle, resolving in the kernel or component by component,
// on a root and on "/".
func handles(t *testing.T, root string) map[string]*host.Host {
	t.Helper()
	out := map[string]*host.Host{}
	for _, r := range []string{root, "/"} {
		h, err := host.New(r)
		if err != nil {
			t.Fatal(err)
		}
		where := "root"
		if r == "/" {
			where = "live"
		}
		out[where+"/new"] = h
		o := h.ForObservation()
		t.Cleanup(func() { o.Close() })
		out[where+"/observation"] = o
	}
	return out
}

// within runs f and fails the test when it has not returned after a
// few seconds: a read that blocks must not hang the test run.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s has not returned after 5s: it blocks", what)
	}
}

// TestReadRefusesNonRegular: a FIFO with no writer, a symlink to
// /dev/zero and a socket are refused at once, by ReadFile and Open
// alike, with an error naming the path and its type.
func TestReadRefusesNonRegular(t *testing.T) {
	root := t.TempDir()
	etc := filepath.Join(root, "etc")
	if err := os.MkdirAll(etc, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(etc, "fifo.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	// On a root other than "/", an absolute link resolves inside it: the
	// root needs its own /dev/zero, a link to the real one is enough for
	// the live handles.
	if err := os.Symlink("/dev/zero", filepath.Join(etc, "zero.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "dev"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mknod(filepath.Join(root, "dev/zero"), syscall.S_IFCHR|0o666, 1<<8|5); err != nil {
		t.Skipf("cannot make a device node (not root?): %v", err)
	}
	sock := filepath.Join(etc, "sock.json")
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: sock}); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ name, kind string }{
		{"fifo.json", "FIFO"},
		{"zero.json", "character device"},
		{"sock.json", ""}, // open(2) itself refuses a socket (ENXIO)
	}
	for hname, h := range handles(t, root) {
		for _, c := range cases {
			p := "/etc/" + c.name
			if strings.HasPrefix(hname, "live") {
				p = filepath.Join(etc, c.name)
			}
			within(t, hname+" ReadFile("+p+")", func() {
				data, err := h.ReadFile(p)
				checkRefused(t, hname+" ReadFile", p, c.kind, len(data), err)
			})
			within(t, hname+" Open("+p+")", func() {
				f, err := h.Open(p)
				if f != nil {
					f.Close()
				}
				checkRefused(t, hname+" Open", p, c.kind, 0, err)
			})
		}
	}
}

func checkRefused(t *testing.T, what, p, kind string, n int, err error) {
	t.Helper()
	if err == nil {
		t.Errorf("%s(%s) read %d bytes; want it refused", what, p, n)
		return
	}
	if kind == "" {
		return
	}
	var nr *host.NotRegularError
	if !errors.As(err, &nr) || nr.Type != kind || !strings.Contains(err.Error(), filepath.Base(p)) {
		t.Errorf("%s(%s): %v; want a NotRegularError naming the path and %q", what, p, err, kind)
	}
}

// TestReadFileLimit: a file over the limit is refused with its size
// bound named, one at the limit is read; procfs files, whose size says
// 0, are read to their end and bounded the same.
func TestReadFileLimit(t *testing.T) {
	root := t.TempDir()
	for name, n := range map[string]int{"small": 100, "at": 4096, "over": 4097, "big": 1 << 20} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(strings.Repeat("x", n)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for hname, h := range handles(t, root) {
		dir := "/"
		if strings.HasPrefix(hname, "live") {
			dir = root + "/"
		}
		for name, ok := range map[string]bool{"small": true, "at": true, "over": false, "big": false} {
			data, err := h.ReadFileLimit(dir+name, 4096)
			var tl *host.TooLargeError
			switch {
			case ok && err != nil:
				t.Errorf("%s: ReadFileLimit(%s, 4096): %v", hname, name, err)
			case !ok && (!errors.As(err, &tl) || !strings.Contains(err.Error(), "larger than 4 KiB")):
				t.Errorf("%s: ReadFileLimit(%s, 4096) = %d bytes, %v; want larger than 4 KiB", hname, name, len(data), err)
			}
		}
	}
	h, err := host.New("/")
	if err != nil {
		t.Fatal(err)
	}
	// /proc/self/maps reports a size of 0 and holds more than 64 bytes.
	if data, err := h.ReadFileLimit("/proc/self/maps", 64); err == nil {
		t.Errorf("ReadFileLimit(/proc/self/maps, 64) = %d bytes; want larger than 64 bytes", len(data))
	}
	if data, err := h.ReadFile("/proc/self/maps"); err != nil || len(data) == 0 {
		t.Errorf("ReadFile(/proc/self/maps) = %d bytes, %v", len(data), err)
	}
}
