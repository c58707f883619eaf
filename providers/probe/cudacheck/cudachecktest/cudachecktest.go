// Package cudachecktest builds a fake CUDA driver library for tests of the
// framework-free check on machines without a GPU.
package cudachecktest

import (
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// source is the fake libcuda.so.1; its comment lists the failures the
// FAKE_CUDA variable chooses.
//
//go:embed testdata/fakecuda.c
var source []byte

// Build compiles the fake library with gcc into dir/libcuda.so.1 and
// returns dir, for LD_LIBRARY_PATH: the check then loads it as it loads
// the driver's.
func Build(dir string) (string, error) {
	src := filepath.Join(dir, "fakecuda.c")
	if err := os.WriteFile(src, source, 0o644); err != nil {
		return "", err
	}
	out, err := exec.Command("gcc", "-shared", "-fPIC", "-O1", "-o", filepath.Join(dir, "libcuda.so.1"), src).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("gcc: %w\n%s", err, out)
	}
	return dir, nil
}
