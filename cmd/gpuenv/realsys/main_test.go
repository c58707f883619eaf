//go:build realsystem

package realsys

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// h is shared by every test of the run: one gpuenv build, one cache of
// layers and downloaded packages.
var h *Harness

// TestMain builds gpuenv once and keeps layers and .debs in
// $GPUENV_REALSYS_CACHE when set (kept afterwards, so that the next run
// reuses them), otherwise in a directory removed at the end. Run again as
// TestWholeFileWriteRacer's racer, it is that racer alone.
func TestMain(m *testing.M) {
	if dir := os.Getenv(racerEnv); dir != "" {
		os.Exit(runRacer(dir, os.Getenv(racerTargetEnv)))
	}
	dir := os.Getenv("GPUENV_REALSYS_CACHE")
	keep := dir != ""
	if !keep {
		var err error
		if dir, err = os.MkdirTemp("", "gpuenv-realsys-"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	code := run(m, dir)
	if !keep {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

func run(m *testing.M, dir string) int {
	repo, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	start := time.Now()
	if h, err = NewHarness(dir, repo); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer h.Close()
	code := m.Run()
	fmt.Printf("\nreal-system tier: %s in all, cache %s, .debs in the archive %s\n", since(start), dir, mib(dirBytes(h.Archives)))
	for _, line := range h.Reports() {
		fmt.Println("  " + line)
	}
	return code
}
