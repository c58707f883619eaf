// Command package builds gpuenv's Debian and RPM packages with nfpm:
//
//	go run ./deploy/package -o DIR
//
// writes DIR/gpuenv_<version>_amd64.deb and DIR/gpuenv-<version>-1.x86_64.rpm
// (nfpm's conventional names), where <version> is what the packaged
// binary's "gpuenv version" prints. The binary is built here with cgo, and
// run here to write its shell completions and manual page, so this
// command builds on an amd64 Linux host only.
//
// nfpm is linked into this command alone: gpuenv itself never imports it.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
)

func main() {
	fs := flag.NewFlagSet("package", flag.ContinueOnError)
	out := fs.String("o", "dist", "write the .deb and .rpm into `DIR` (created if missing)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: go run ./deploy/package [-o DIR]

Builds gpuenv with cgo and packages it, with its shell completions, manual
page, examples and drift timer, as a .deb and an .rpm in DIR.

`)
		fs.PrintDefaults()
	}
	switch err := fs.Parse(os.Args[1:]); {
	case err == flag.ErrHelp:
		os.Exit(0)
	case err != nil:
		os.Exit(2)
	}
	if *out == "" {
		fmt.Fprintln(os.Stderr, "package: -o is empty; give the directory to write the packages into")
		os.Exit(2)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "package: unexpected argument %q; the output directory is given with -o\n", fs.Arg(0))
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *out, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "package: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out string, stdout io.Writer) error {
	mod, err := moduleDir(ctx)
	if err != nil {
		return err
	}
	res, err := Build(ctx, mod, out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "gpuenv %s\n%s\n%s\n", res.Version, res.Deb, res.RPM)
	return nil
}
