// Command gpuenv makes a Linux host's NVIDIA GPU stack match a declared
// spec: it observes the host, plans the changes, applies them journaled and
// reversibly, and rolls them back.
package main

import (
	"context"
	"os"
	"path/filepath"
)

func main() {
	// No signal handling here: commands that change the host install it
	// themselves (interruptible), and the others end at once on a signal.
	os.Exit(run(context.Background(), commandLine(os.Args), os.Stdin, os.Stdout, os.Stderr, os.Environ()))
}

// commandLine is gpuenv's arguments; run under the name slurmd knows it by
// (slurmHealthName), which takes no arguments, it is slurm-health.
func commandLine(argv []string) []string {
	if filepath.Base(argv[0]) == slurmHealthName {
		return append([]string{"slurm-health"}, argv[1:]...)
	}
	return argv[1:]
}
