// Command gpuenv makes a Linux host's NVIDIA GPU stack match a declared
// spec: it observes the host, plans the changes, applies them journaled and
// reversibly, and rolls them back.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Environ())
	stop()
	os.Exit(code)
}
