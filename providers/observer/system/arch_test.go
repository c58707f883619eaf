package system_test

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

// elfHeader is the 64-byte header of a little-endian ELF64 executable for
// machine, with no sections: what debug/elf needs to name the machine.
func elfHeader(machine uint16) []byte {
	b := make([]byte, 64)
	copy(b, "\x7fELF")
	b[4], b[5], b[6] = 2, 1, 1 // ELFCLASS64, little-endian, EV_CURRENT
	le := binary.LittleEndian
	le.PutUint16(b[16:], 2) // ET_EXEC
	le.PutUint16(b[18:], machine)
	le.PutUint32(b[20:], 1)
	le.PutUint16(b[52:], 64) // e_ehsize
	le.PutUint16(b[54:], 56) // e_phentsize
	le.PutUint16(b[58:], 64) // e_shentsize
	return b
}

// A root's architecture is its own, read from its shell when the root
// (an image, or a kernel before 6.1) has no kernel.arch: an aarch64 image
// inspected on an x86_64 machine is aarch64.
func TestArchOfTheRoot(t *testing.T) {
	for _, tc := range []struct {
		name    string
		machine uint16
		link    bool // /bin/sh is a link to dash, as on Debian
		want    string
	}{
		{"aarch64 shell", 183, false, "aarch64"},
		{"x86_64 dash through /bin/sh", 62, true, "x86_64"},
		{"ppc64le", 21, false, "ppc64le"},
	} {
		root := hosttest.Build(t, "tensorflow-no-cudnn")
		os.Remove(filepath.Join(root, "proc/sys/kernel/arch"))
		sh := filepath.Join(root, "bin/sh")
		if err := os.MkdirAll(filepath.Dir(sh), 0o755); err != nil {
			t.Fatal(err)
		}
		target := sh
		if tc.link {
			target = filepath.Join(root, "bin/dash")
			if err := os.Symlink("dash", sh); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(target, elfHeader(tc.machine), 0o755); err != nil {
			t.Fatal(err)
		}
		if got := observe(t, root).OS.Arch; got != tc.want {
			t.Errorf("%s: architecture %q, want %q", tc.name, got, tc.want)
		}
	}
	// A kernel.arch file wins: it is what the kernel runs.
	root := hosttest.Build(t, "tensorflow-no-cudnn")
	hosttest.WriteFile(t, root, "proc/sys/kernel/arch", "aarch64\n")
	if got := observe(t, root).OS.Arch; got != "aarch64" {
		t.Errorf("kernel.arch aarch64: %q", got)
	}
	// A root with neither says nothing rather than gpuenv's own.
	root = hosttest.Build(t, "tensorflow-no-cudnn")
	os.Remove(filepath.Join(root, "proc/sys/kernel/arch"))
	os.Remove(filepath.Join(root, "bin/sh"))
	if got := observe(t, root).OS.Arch; got != "" {
		t.Errorf("a root without kernel.arch or shell: %q", got)
	}
}
