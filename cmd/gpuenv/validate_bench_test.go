package main

import (
	"context"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkValidateRandom is gpuenv validate handed 100 KB of random
// bytes, and 100 KB of random printable text, as its spec: the whole
// command, diagnostics rendered for a person included.
func BenchmarkValidateRandom(b *testing.B) {
	dir := b.TempDir()
	r := rand.New(rand.NewPCG(1, 2))
	raw := make([]byte, 100<<10)
	for i := range raw {
		raw[i] = byte(r.UintN(256))
	}
	const printable = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~ \t\n"
	text := make([]byte, len(raw))
	for i := range text {
		text[i] = printable[r.UintN(uint(len(printable)))]
	}
	for name, data := range map[string][]byte{"binary": raw, "text": text} {
		p := filepath.Join(dir, name+".hcl")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if code := run(context.Background(), []string{"validate", p}, nil, io.Discard, io.Discard, nil); code != exitError {
					b.Fatalf("validate exited %d", code)
				}
			}
		})
	}
}
