package spec

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// randomFiles writes 100 KB of random bytes and 100 KB of random
// printable text, each as a spec file.
func randomFiles(tb testing.TB) (binary, text string) {
	dir := tb.TempDir()
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, 100<<10)
	for i := range b {
		b[i] = byte(r.UintN(256))
	}
	binary = filepath.Join(dir, "random.hcl")
	if err := os.WriteFile(binary, b, 0o644); err != nil {
		tb.Fatal(err)
	}
	const printable = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~ \t\n"
	for i := range b {
		b[i] = printable[r.UintN(uint(len(printable)))]
	}
	text = filepath.Join(dir, "noise.hcl")
	if err := os.WriteFile(text, b, 0o644); err != nil {
		tb.Fatal(err)
	}
	return binary, text
}

func BenchmarkLoadRandom(b *testing.B) {
	binary, text := randomFiles(b)
	for _, name := range []string{binary, text} {
		b.Run(strings.TrimSuffix(filepath.Base(name), ".hcl"), func(b *testing.B) {
			for b.Loop() {
				Load(name, LoadOptions{})
			}
		})
	}
}

// A binary file is refused with one diagnostic, before it is parsed; a
// file of noise gets at most MaxDiagnosticsPerFile, then a count.
func TestLoadBoundsDiagnostics(t *testing.T) {
	binary, text := randomFiles(t)
	_, diags := Load(binary, LoadOptions{})
	if len(diags) != 1 || diags[0].Summary != "Not a text file" || !strings.Contains(diags[0].Detail, "is not UTF-8 text: byte ") {
		t.Errorf("random bytes: %d diagnostics, want one that says it is not text: %v", len(diags), diags)
	}
	_, diags = Load(text, LoadOptions{})
	if len(diags) != MaxDiagnosticsPerFile+1 {
		t.Fatalf("noise: %d diagnostics, want %d and a count", len(diags), MaxDiagnosticsPerFile+1)
	}
	last := diags[len(diags)-1]
	if last.Summary != "Too many diagnostics" || !strings.Contains(last.Detail, "more diagnostics in "+text+" are not shown") {
		t.Errorf("the last diagnostic does not count the rest: %v", last)
	}

	// A file that is only too large for a spec is refused unread.
	big := filepath.Join(t.TempDir(), "big.hcl")
	if err := os.WriteFile(big, []byte(strings.Repeat("# comment\n", MaxSpecFile/10+1)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, diags = Load(big, LoadOptions{})
	if len(diags) != 1 || !strings.Contains(diags[0].Detail, "larger than 4 MiB") {
		t.Errorf("a file over the limit: %v", diags)
	}

	// Few diagnostics are all shown.
	few := filepath.Join(t.TempDir(), "few.hcl")
	if err := os.WriteFile(few, []byte("cuda {\n  version = 12\n}\ndriver {\n  bogus = 1\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, diags = Load(few, LoadOptions{})
	for _, d := range diags {
		if d.Summary == "Too many diagnostics" {
			t.Errorf("a count with %d diagnostics", len(diags))
		}
	}
}
