package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gpuenv/gpuenv/apply/applytest"
	"github.com/gpuenv/gpuenv/providers/host"
)

// openPTY returns a pseudo-terminal's two ends: a terminal for gpuenv's
// standard input, and the side a person would type into.
func openPTY(t *testing.T) (tty, typist *os.File) {
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		t.Skipf("unlocking the pseudo-terminal: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		m.Close()
		t.Skipf("naming the pseudo-terminal: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Skipf("opening the pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { s.Close(); m.Close() })
	return s, m
}

// TestApplyConfirmOnTerminal answers apply's and rollback's question on a
// terminal: anything but "yes" declines and changes nothing.
func TestApplyConfirmOnTerminal(t *testing.T) {
	dir := applytest.TempDir(t)
	f, err := applytest.BuildHost(dir)
	if err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(dir, "spec.hcl")
	if err := os.WriteFile(spec, []byte("group \"video\" {\n  members = [\"bob\"]\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(applytest.EnvArchive, f.Archive)
	gpuenv := func(answer string, args ...string) (int, string) {
		tty, typist := openPTY(t)
		if _, err := typist.Write([]byte(answer + "\n")); err != nil {
			t.Fatal(err)
		}
		var out, errb bytes.Buffer
		code := run(context.Background(), append([]string{"--root", f.Root}, args...), tty, &out, &errb, os.Environ())
		return code, out.String() + errb.String()
	}
	// The fake tools run in-process, as gpuenv's commands inside the
	// root.
	old := hostOptions
	hostOptions = append(slices.Clone(hostOptions), host.WithRunner(&applytest.Runner{Env: f.Env}))
	t.Cleanup(func() { hostOptions = old })

	code, out := gpuenv("no", "apply", spec)
	if code != 1 || !strings.Contains(out, "Only 'yes' will be accepted.") || !strings.Contains(out, "Apply cancelled: nothing was changed.") {
		t.Fatalf("answer no: exit %d\n%s", code, out)
	}
	data, _ := os.ReadFile(filepath.Join(f.Root, "etc/group"))
	if !strings.Contains(string(data), "video:x:44:alice\n") {
		t.Errorf("declined apply changed /etc/group:\n%s", data)
	}
	if _, err := os.Stat(filepath.Join(f.Root, "var/lib/gpuenv/generations/1")); err == nil {
		t.Error("a declined apply made a generation")
	}

	code, out = gpuenv("yes", "apply", spec)
	if code != 0 || !strings.Contains(out, "The host now matches the spec.") {
		t.Fatalf("answer yes: exit %d\n%s", code, out)
	}
	code, out = gpuenv("y", "rollback")
	if code != 1 || !strings.Contains(out, "Rollback will undo generation 1, running 1 inverses:") || !strings.Contains(out, "Rollback cancelled") {
		t.Fatalf("rollback, answer y: exit %d\n%s", code, out)
	}
	code, out = gpuenv("yes", "rollback")
	if code != 0 || !strings.Contains(out, "Rollback complete: 1 inverses run (generation 2).") {
		t.Fatalf("rollback, answer yes: exit %d\n%s", code, out)
	}
	data, _ = os.ReadFile(filepath.Join(f.Root, "etc/group"))
	if !strings.Contains(string(data), "video:x:44:alice\n") {
		t.Errorf("rollback did not restore /etc/group:\n%s", data)
	}
}
