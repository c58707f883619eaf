package kernellog

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/providers/host"
)

// journalctl stands in for the machine's journalctl: it records the
// command and the files handed to it, and prints what the journal of the
// report holds, as journalctl's short format prints a record of several
// lines.
type journalctl struct {
	argv  [][]string
	files []string
	out   string
}

func (j *journalctl) Run(_ context.Context, c host.Command) error {
	j.argv = append(j.argv, c.Argv)
	for _, f := range c.ExtraFiles {
		j.files = append(j.files, f.Name())
	}
	_, err := io.WriteString(c.Stdout, j.out)
	return err
}

// A root whose only kernel log is the journal is read through this
// machine's journalctl, never the root's, over the journal files gpuenv
// opened inside the root, for the last boot the journal records; a link
// out of the root is not followed, and a root with a syslog file never
// starts journalctl.
func TestJournal(t *testing.T) {
	// The journal lines of https://github.com/negativo17/nvidia-driver/issues/158.
	out := `Aug 14 10:00:01 host kernel: NVRM: The NVIDIA GPU 0000:09:00.0 (PCI ID: 10de:1d01)
             NVRM: installed in this system is not supported by open
             NVRM: nvidia.ko because it does not include the required GPU
             NVRM: System Processor (GSP).
Aug 14 10:00:01 host kernel: nvidia 0000:09:00.0: probe with driver nvidia failed with error -1
`
	dir := t.TempDir()
	jdir := filepath.Join(dir, "var/log/journal/0123456789abcdef0123456789abcdef")
	if err := os.MkdirAll(jdir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"system.journal", "system@0001-0002.journal", "user-1000.journal~", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(jdir, n), []byte("LPKSHHRH"), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	// A link to a file of the machine is not a journal file of the root.
	secret := filepath.Join(t.TempDir(), "secret.journal")
	if err := os.WriteFile(secret, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(jdir, "link.journal")); err != nil {
		t.Fatal(err)
	}
	j := &journalctl{out: out}
	h, err := host.New(dir, host.WithRunner(j))
	if err != nil {
		t.Fatal(err)
	}
	l := Observe(context.Background(), h, DefaultLimits)
	if len(j.argv) != 1 {
		t.Fatalf("commands: %q", j.argv)
	}
	argv := j.argv[0]
	if argv[0] != "journalctl" || !slices.Contains(argv, "--boot=-0") || !slices.Contains(argv, "_TRANSPORT=kernel") ||
		!slices.Contains(argv, "--file=/proc/self/fd/3") || !slices.Contains(argv, "--file=/proc/self/fd/5") || slices.Contains(argv, "--file=/proc/self/fd/6") {
		t.Errorf("argv %q", argv)
	}
	var bases []string
	for _, f := range j.files {
		bases = append(bases, filepath.Base(f))
	}
	// Oldest first, the one being written last; the link and the text file left out.
	if want := []string{"system@0001-0002.journal", "user-1000.journal~", "system.journal"}; !slices.Equal(bases, want) {
		t.Errorf("files handed to journalctl %q, want %q", bases, want)
	}
	if l == nil || len(l.Sources) != 1 || l.Sources[0].Path != JournalDir || !l.Sources[0].BootStart {
		t.Fatalf("%+v", l)
	}
	if len(l.Events) != 1 || l.Events[0].Kind != "gsp_required" || l.Events[0].PCIAddress != "0000:09:00.0" {
		t.Errorf("events %+v", l.Events)
	}

	if err := os.WriteFile(filepath.Join(dir, "var/log/syslog"), []byte(strings.SplitAfter(out, "\n")[0]), 0o644); err != nil {
		t.Fatal(err)
	}
	j.argv = nil
	if l := Observe(context.Background(), h, DefaultLimits); len(j.argv) != 0 || l.Sources[0].Path != "/var/log/syslog" {
		t.Errorf("with a syslog file: commands %q, sources %+v", j.argv, l.Sources)
	}
}

// journalExport is journald's export format for kernel records of one
// boot; a message of several lines takes the binary field form.
func journalExport(bootID string, msgs ...string) []byte {
	var b []byte
	for i, m := range msgs {
		b = fmt.Appendf(b, "__CURSOR=s=1;i=%d\n__REALTIME_TIMESTAMP=%d\n__MONOTONIC_TIMESTAMP=%d\n_BOOT_ID=%s\n_TRANSPORT=kernel\nSYSLOG_IDENTIFIER=kernel\nPRIORITY=3\n_HOSTNAME=host\n",
			i+1, 1723629601000000+i, i+1, bootID)
		if strings.Contains(m, "\n") {
			b = append(b, "MESSAGE\n"...)
			b = binary.LittleEndian.AppendUint64(b, uint64(len(m)))
			b = append(b, m...)
			b = append(b, '\n')
		} else {
			b = append(b, "MESSAGE="+m+"\n"...)
		}
		b = append(b, '\n')
	}
	return b
}

// A real journal file, written by systemd-journal-remote, read by this
// machine's real journalctl over the descriptor gpuenv hands it: the
// driver's refusal of several lines comes back as one event.
func TestJournalReal(t *testing.T) {
	remote := "/lib/systemd/systemd-journal-remote"
	if _, err := os.Stat(remote); err != nil {
		t.Skip("systemd-journal-remote (Debian package systemd-journal-remote) is not installed")
	}
	if _, err := exec.LookPath("journalctl"); err != nil {
		t.Skip("journalctl (Debian package systemd) is not installed")
	}
	dir := t.TempDir()
	jdir := filepath.Join(dir, "var/log/journal/0123456789abcdef0123456789abcdef")
	if err := os.MkdirAll(jdir, 0o755); err != nil {
		t.Fatal(err)
	}
	export := filepath.Join(t.TempDir(), "kernel.export")
	if err := os.WriteFile(export, journalExport("0123456789abcdef0123456789abcdef",
		"Linux version 6.1.0-18-amd64 (debian-kernel@lists.debian.org)",
		"NVRM: The NVIDIA GPU 0000:09:00.0 (PCI ID: 10de:1d01)\nNVRM: installed in this system is not supported by open\nNVRM: nvidia.ko because it does not include the required GPU\nNVRM: System Processor (GSP).",
		"nvidia 0000:09:00.0: probe with driver nvidia failed with error -1"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(remote, "-o", filepath.Join(jdir, "system.journal"), export).CombinedOutput(); err != nil {
		t.Fatalf("systemd-journal-remote: %v\n%s", err, out)
	}
	h, err := host.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	l := Observe(context.Background(), h, DefaultLimits)
	if l == nil || len(l.Sources) != 1 || l.Sources[0].Path != JournalDir || l.Sources[0].Error != "" {
		t.Fatalf("%+v", l)
	}
	if len(l.Events) != 1 || l.Events[0].Kind != "gsp_required" || l.Events[0].PCIAddress != "0000:09:00.0" {
		t.Errorf("events %+v", l.Events)
	}
}
