package hosttest_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/tools/txtar"

	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

func TestBuildArchive(t *testing.T) {
	testdata := t.TempDir()
	if err := os.WriteFile(filepath.Join(testdata, "big"), []byte("shared\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ar := txtar.Parse([]byte(`-- .manifest --
# comment
symlink /usr/local/cuda cuda-12.4
dir /var/lib/dkms
mode /usr/local/cuda-12.4/bin/nvcc 0755
mtime /boot/initrd.img 2024-03-01T10:00:00Z
chardev /dev/nvidia0 195 0
include /var/lib/dpkg/status big
bytes /sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c 0600000001
-- usr/local/cuda-12.4/bin/nvcc --
-- boot/initrd.img --
-- var/lib/dpkg/status --
local
`))
	root := t.TempDir()
	if err := hosttest.BuildArchive(ar, root, testdata); err != nil {
		t.Fatal(err)
	}
	if target, err := os.Readlink(filepath.Join(root, "usr/local/cuda")); err != nil || target != "cuda-12.4" {
		t.Errorf("symlink: %q, %v", target, err)
	}
	if fi, err := os.Stat(filepath.Join(root, "var/lib/dkms")); err != nil || !fi.IsDir() {
		t.Errorf("dir: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(root, "usr/local/cuda-12.4/bin/nvcc")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("mode: %v %v", fi.Mode(), err)
	}
	if fi, err := os.Stat(filepath.Join(root, "boot/initrd.img")); err != nil || !fi.ModTime().Equal(time.Date(2024, 3, 1, 10, 0, 0, 0, time.UTC)) {
		t.Errorf("mtime: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(root, "dev/nvidia0")); err != nil {
		t.Errorf("chardev: %v", err)
	}
	if data, _ := os.ReadFile(filepath.Join(root, "var/lib/dpkg/status")); string(data) != "local\nshared\n" {
		t.Errorf("include: %q", data)
	}
	if data, _ := os.ReadFile(filepath.Join(root, "sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c")); string(data) != "\x06\x00\x00\x00\x01" {
		t.Errorf("bytes: %q", data)
	}
}

func TestBuildArchiveErrors(t *testing.T) {
	for _, m := range []string{"bogus /x", "symlink /x", "mode /x 9z", "include /x ../../etc/passwd", "mtime /x yesterday", "bytes /x 0g"} {
		ar := txtar.Parse([]byte("-- .manifest --\n" + m + "\n-- x --\n"))
		if err := hosttest.BuildArchive(ar, t.TempDir(), t.TempDir()); err == nil {
			t.Errorf("%q: no error", m)
		}
	}
}
