// Command skipcheck reads `go test -json` on its standard input, prints
// what go test would have printed without -json, and fails when a test
// failed or was skipped without being on the allow-list. CI runs every
// test tier through it (.ci/run): a test that skips because a tool it
// needs is missing would otherwise pass unnoticed.
//
//	go test -json ./... | go run ./internal/ci/skipcheck -allow .ci/allowed-skips
//
// The allow-list holds one skip a line, "IMPORTPATH TestName  # why",
// with the reason required; blank lines and lines starting with # are
// comments.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	allowPath := flag.String("allow", "", "the allow-list of tests that may skip (required)")
	verbose := flag.Bool("v", false, "print every test's output, as go test -v does")
	flag.Parse()
	if *allowPath == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: go test -json ./... | skipcheck -allow FILE [-v]")
		os.Exit(2)
	}
	f, err := os.Open(*allowPath)
	if err != nil {
		fmt.Fprintf(os.Stderr, "skipcheck: %v\n", err)
		os.Exit(2)
	}
	allow, err := readAllowList(f, *allowPath)
	f.Close()
	if err != nil {
		fmt.Fprintf(os.Stderr, "skipcheck: %v\n", err)
		os.Exit(2)
	}
	os.Exit(run(os.Stdin, os.Stdout, os.Stderr, allow, *verbose))
}

// run reads the stream from in, writes go test's usual output to out and
// the verdict on skips to errw, and returns the exit status: 0 when every
// package passed and every skip is allowed.
func run(in io.Reader, out, errw io.Writer, allow *allowList, verbose bool) int {
	r := newReport(out, verbose)
	if err := r.read(in); err != nil {
		fmt.Fprintf(errw, "skipcheck: reading go test -json: %v\n", err)
		return 1
	}
	code := 0
	if r.packages == 0 {
		fmt.Fprintln(errw, "skipcheck: go test reported no package: did it run?")
		code = 1
	}
	if r.failed {
		// go test's own last line when anything failed.
		fmt.Fprintln(out, "FAIL")
		code = 1
	}
	var bad []skip
	for _, s := range r.skips {
		if !allow.allows(s) {
			bad = append(bad, s)
		}
	}
	if len(bad) > 0 {
		fmt.Fprintf(errw, "FAIL: %d tests skipped that are not on %s; a test skips in CI only by design, as the allow-list says, so install what they need in .ci/run or fix them:\n", len(bad), allow.path)
		for _, s := range bad {
			fmt.Fprintf(errw, "    %s %s: %s\n", s.pkg, s.test, s.reason)
		}
		code = 1
	}
	if n := len(r.skips) - len(bad); n > 0 {
		fmt.Fprintf(errw, "skipcheck: %d skips allowed by %s\n", n, allow.path)
	}
	return code
}
