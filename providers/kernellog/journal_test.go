package kernellog

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/providers/host"
)

// journalctl stands in for the root's journalctl: it records the command
// and prints what the journal of the report holds, as journalctl's short
// format prints a record of several lines.
type journalctl struct {
	argv [][]string
	out  string
}

func (j *journalctl) Run(_ context.Context, c host.Command) error {
	j.argv = append(j.argv, c.Argv)
	_, err := io.WriteString(c.Stdout, j.out)
	return err
}

// A root whose only kernel log is the journal is read through its own
// journalctl, inside the root, for the last boot the journal records;
// a root with a syslog file never starts it.
func TestJournal(t *testing.T) {
	// The journal lines of https://github.com/negativo17/nvidia-driver/issues/158.
	out := `Aug 14 10:00:01 host kernel: NVRM: The NVIDIA GPU 0000:09:00.0 (PCI ID: 10de:1d01)
             NVRM: installed in this system is not supported by open
             NVRM: nvidia.ko because it does not include the required GPU
             NVRM: System Processor (GSP).
Aug 14 10:00:01 host kernel: nvidia 0000:09:00.0: probe with driver nvidia failed with error -1
`
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "var/log/journal/0123456789abcdef0123456789abcdef"), 0o755); err != nil {
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
	if argv[0] != "chroot" || argv[1] != dir || argv[2] != "journalctl" || !slices.Contains(argv, "--boot=-0") || !slices.Contains(argv, "_TRANSPORT=kernel") || !slices.Contains(argv, "--directory=/var/log/journal") {
		t.Errorf("argv %q", argv)
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
