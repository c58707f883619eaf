package fleet_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuenv/gpuenv/planner/fleet"
	"github.com/gpuenv/gpuenv/planner/plantest"
)

// planFiles plans inputs and returns their rows by file, failing the
// test when it has not finished in a few seconds: no document may make
// the run wait.
func planFiles(t *testing.T, inputs []fleet.Input) map[string]fleet.Host {
	t.Helper()
	rows := map[string]fleet.Host{}
	done := make(chan error, 1)
	go func() {
		_, err := fleet.Plan(context.Background(), fleet.Options{Spec: plantest.LoadSpec(t, fleetSpec), Planner: newPlanner}, inputs,
			func(h *fleet.Host) error {
				rows[h.File] = *h
				return nil
			})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("plan --facts has not finished after 10s")
	}
	return rows
}

// TestDocumentsNotRegular: a FIFO, /dev/zero and a directory's symlink
// to a file only root may read are refused rows, at once, each saying
// what it is; nothing of the secret file appears in any of them.
func TestDocumentsNotRegular(t *testing.T) {
	dir := t.TempDir()
	secretDir := t.TempDir()
	secret := filepath.Join(secretDir, "shadow")
	if err := os.WriteFile(secret, []byte("root:$y$j9T$secret:19000:0:99999:7:::\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(dir, "a-shadow.json")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "b-fifo.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "c-text.json"), []byte("root:$y$j9T$secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	inputs, err := fleet.Inputs([]string{dir, "/dev/zero"}, strings.NewReader(""))
	if err != nil {
		t.Fatal(err)
	}
	rows := planFiles(t, inputs)
	for file, want := range map[string]string{
		filepath.Join(dir, "a-shadow.json"): "a symlink, which gpuenv does not follow in a --facts directory",
		filepath.Join(dir, "b-fifo.json"):   "is a FIFO, not a regular file",
		filepath.Join(dir, "c-text.json"):   "at byte 1: a character JSON does not allow",
		"/dev/zero":                         "/dev/zero is a character device, not a regular file",
	} {
		row, ok := rows[file]
		switch {
		case !ok:
			t.Errorf("no row for %s", file)
		case row.Outcome != fleet.Refused || row.Reason != fleet.ReasonUnreadable || !strings.Contains(row.Error, want):
			t.Errorf("%s: %s, %s, %q; want refused as unreadable, saying %q", file, row.Outcome, row.Reason, row.Error, want)
		case strings.Contains(row.Error, "'r'") || strings.Contains(row.Error, "root:"):
			t.Errorf("%s: the error quotes the file: %q", file, row.Error)
		}
	}
}

// TestDocumentTooLarge: a file larger than any document is refused
// before it is read.
func TestDocumentTooLarge(t *testing.T) {
	p := filepath.Join(t.TempDir(), "big.json")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	// Sparse: the size is what counts, not the bytes.
	if err := f.Truncate(65<<20 + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	row := planFiles(t, []fleet.Input{{File: p}})[p]
	if row.Outcome != fleet.Refused || !strings.Contains(row.Error, "is larger than 64 MiB, which no observation document is") {
		t.Errorf("row %+v", row)
	}
}
