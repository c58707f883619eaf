package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/spf13/cobra"

	"github.com/gpuenv/gpuenv/internal/safefile"
	"github.com/gpuenv/gpuenv/providers"
	"github.com/gpuenv/gpuenv/providers/export/capture"
	"github.com/gpuenv/gpuenv/spec"
)

func newInitCmd(g *globalOptions) *cobra.Command {
	var pythons []string
	var out string
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Write a spec that describes this host as it is",
		Long: `Init observes the host (--root) and writes a spec, as formatted HCL, that
describes its GPU stack: the package repositories beyond the distribution's
archive that it came from (each with its keyring and the fingerprint of the
key in it), the driver (version, kernel-module flavour, source, nouveau
blacklist, hold, persistence mode), the CUDA toolkit, cuDNN, each framework
with its interpreter (the system's Python and every --python INTERPRETER)
or, for a distribution's package, its version, NVIDIA's container toolkit
and the engines it configures, compute modes gpuenv keeps at boot, the
members of the groups that give access to the GPUs, and the variables in
gpuenv's own environment files. Planning the spec against the same host
shows no changes; planning it on a fresh host of the same OS and release
installs the same versions, once each repository's keyring is in place.

What gpuenv cannot manage as it is (a driver installed without a package,
a repository listed by a mirror list, variables set in other files) is
noted in comments instead, with the reason.

The spec goes to standard output, or to --out FILE (on this machine, not
inside --root), which must not exist yet.`,
		Example: `  gpuenv init --python /opt/venv/bin/python --out gpuenv.hcl
  gpuenv plan gpuenv.hcl`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, err := openHost(g)
			if err != nil {
				return err
			}
			if err := checkPrograms(h, "--python", pythons); err != nil {
				return err
			}
			obs := providers.Observe(cmd.Context(), h, providers.ObserveOptions{Pythons: pythons})
			src := capture.Spec(obs)
			// The spec must read back as written: a capture that gpuenv
			// itself would reject or reformat is a bug, not output.
			name := "init.hcl"
			if out != "" {
				name = out
			}
			formatted, diags := spec.Format(src, name)
			if diags.HasErrors() {
				return fmt.Errorf("the captured spec does not parse: %s", diags.Error())
			}
			if string(formatted) != string(src) {
				return fmt.Errorf("the captured spec is not formatted as gpuenv fmt writes it")
			}
			if _, diags := spec.Load(name, spec.LoadOptions{Saved: &spec.Sources{Files: []spec.SourceFile{{Name: name, Bytes: src}}}}); diags.HasErrors() {
				return fmt.Errorf("the captured spec does not load: %s", diags.Error())
			}
			if out == "" {
				_, err := g.Stdout.Write(src)
				return err
			}
			if err := writeNewFile(out, src); err != nil {
				return err
			}
			fmt.Fprintf(g.Stdout, "Wrote the spec of %s to %s. See what it would change with:\n    gpuenv plan %s\n", g.Root, out, out)
			return nil
		},
	}
	repeatable(cmd.Flags(), &pythons, "python", "also capture the frameworks of `INTERPRETER`, a path inside the root (repeatable)")
	cmd.Flags().StringVar(&out, "out", "", "write the spec to `FILE` instead of standard output; FILE must not exist")
	return cmd
}

// writeNewFile writes data to name, which must not exist, through a
// temporary file linked into place, so that an interrupted init leaves no
// half-written spec.
func writeNewFile(name string, data []byte) error {
	if _, err := os.Lstat(name); err == nil {
		return fmt.Errorf("--out %s already exists; remove it or choose another name", name)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("--out: %w", err)
	}
	if err := safefile.WriteFile(name, data, 0o644, safefile.Options{NoReplace: true}); err != nil {
		return fmt.Errorf("writing the spec: %w", err)
	}
	return nil
}
