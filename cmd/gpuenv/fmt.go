package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/rogpeppe/go-internal/diff"
	"github.com/spf13/cobra"

	"github.com/gpuenv/gpuenv/spec"
)

// stdinName is how fmt names standard input in output and diagnostics.
const stdinName = "<stdin>"

type fmtOptions struct {
	check bool
	diff  bool
}

func newFmtCmd(g *globalOptions) *cobra.Command {
	var o fmtOptions
	cmd := &cobra.Command{
		Use:   "fmt [PATH...]",
		Short: "Rewrite specs in canonical layout",
		Long: `Fmt rewrites spec files in the canonical HCL layout, as terraform fmt does, and
lists the files it changed. A PATH is a file or a directory, whose *.hcl files
are formatted (default "."); "-" formats standard input to standard output. A
file that does not parse is never changed.

Exit status: 0 when every file is formatted (or was rewritten), 1 when a file
could not be read or parsed, 2 with --check when a file would change.`,
		Example: `  gpuenv fmt
  gpuenv fmt --check --diff examples/
  gpuenv fmt - < gpuenv.hcl`,
		ValidArgsFunction: completeSpecPaths,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				args = []string{"."}
			}
			return runFmt(g, o, args)
		},
	}
	cmd.Flags().BoolVar(&o.check, "check", false, "change nothing; list the files that would change and exit 2 if there are any")
	cmd.Flags().BoolVar(&o.diff, "diff", false, "print the changes as a unified diff")
	return cmd
}

func runFmt(g *globalOptions, o fmtOptions, args []string) error {
	var (
		diags    hcl.Diagnostics
		files    = map[string]*hcl.File{}
		changed  int
		failures int
	)
	for _, arg := range args {
		paths, err := fmtPaths(arg)
		if err != nil {
			fmt.Fprintf(g.Stderr, "Error: %v\n", err)
			failures++
			continue
		}
		for _, p := range paths {
			ch, fileDiags, err := fmtOne(g, o, p)
			if err != nil {
				fmt.Fprintf(g.Stderr, "Error: %v\n", err)
				failures++
				continue
			}
			if fileDiags.HasErrors() {
				failures++
				for name, f := range fileDiags.files {
					files[name] = f
				}
			}
			diags = append(diags, fileDiags.diags...)
			if ch {
				changed++
			}
		}
	}
	if len(diags) > 0 {
		w := g.diagnosticWriter(files)
		if err := w.WriteDiagnostics(diags); err != nil {
			return err
		}
	}
	switch {
	case failures > 0:
		return &exitCodeError{code: exitError}
	case o.check && changed > 0:
		return &exitCodeError{code: exitChanges}
	}
	return nil
}

// fmtPaths lists the files one PATH argument names.
func fmtPaths(arg string) ([]string, error) {
	if arg == "-" {
		return []string{"-"}, nil
	}
	info, err := os.Stat(arg)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return []string{arg}, nil
	}
	entries, err := os.ReadDir(arg)
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || strings.HasPrefix(name, ".") || !strings.HasSuffix(name, spec.FileExt) {
			continue
		}
		paths = append(paths, filepath.Join(arg, name))
	}
	sort.Strings(paths)
	return paths, nil
}

// fmtResult carries a file's syntax diagnostics with the parsed file that
// renders them.
type fmtResult struct {
	diags hcl.Diagnostics
	files map[string]*hcl.File
}

func (r fmtResult) HasErrors() bool { return r.diags.HasErrors() }

// fmtOne formats one file, or standard input for "-", and reports whether it
// changed (or, with --check, would change).
func fmtOne(g *globalOptions, o fmtOptions, path string) (bool, fmtResult, error) {
	name := path
	var (
		src []byte
		err error
	)
	if path == "-" {
		name = stdinName
		src, err = io.ReadAll(g.Stdin)
	} else {
		src, err = os.ReadFile(path)
	}
	if err != nil {
		return false, fmtResult{}, err
	}
	out, diags := spec.Format(src, name)
	if diags.HasErrors() {
		return false, fmtResult{diags: diags, files: map[string]*hcl.File{name: {Bytes: src}}}, nil
	}
	changed := !bytes.Equal(src, out)

	if o.diff && changed {
		g.Stdout.Write(diff.Diff(name, src, name, out))
	}
	if path == "-" {
		// Standard input always comes back on standard output, formatted,
		// unless only a check or a diff was asked for.
		if !o.check && !o.diff {
			_, err = g.Stdout.Write(out)
		}
		return changed, fmtResult{}, err
	}
	if !changed {
		return false, fmtResult{}, nil
	}
	if !o.diff {
		fmt.Fprintln(g.Stdout, path)
	}
	if o.check {
		return true, fmtResult{}, nil
	}
	info, err := os.Stat(path)
	if err != nil {
		return true, fmtResult{}, err
	}
	if err := os.WriteFile(path, out, info.Mode().Perm()); err != nil {
		return true, fmtResult{}, err
	}
	return true, fmtResult{}, nil
}
