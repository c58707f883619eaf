// Command gpuenv makes a Linux host's NVIDIA GPU stack match a declared
// spec: it observes the host, plans the changes, applies them journaled and
// reversibly, and rolls them back.
package main

import (
	"context"
	"os"
)

func main() {
	// No signal handling here: commands that change the host install it
	// themselves (interruptible), and the others end at once on a signal.
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Environ()))
}
