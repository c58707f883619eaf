package main

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/spf13/cobra"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/spec"
)

// varFlags are the flags that give a spec's input variables values; every
// command that loads a spec takes them.
type varFlags struct {
	vars     []string
	varFiles []string
}

func (v *varFlags) register(cmd *cobra.Command) {
	repeatable(cmd.Flags(), &v.vars, "var", "set an input variable, as `NAME=VALUE` (repeatable; overrides --var-file and GPUENV_VAR_NAME)")
	repeatable(cmd.Flags(), &v.varFiles, "var-file", "read input variable values from an HCL `FILE` of NAME = VALUE lines (repeatable)")
}

// loadOptions turns the flags into spec.LoadOptions. A malformed --var is a
// diagnostic, so that it comes out in the format the user chose.
func (v *varFlags) loadOptions(env []string) (spec.LoadOptions, hcl.Diagnostics) {
	opts := spec.LoadOptions{VarFiles: v.varFiles, Environ: env}
	var diags hcl.Diagnostics
	if len(v.vars) > 0 {
		opts.Vars = make(map[string]string, len(v.vars))
	}
	for _, kv := range v.vars {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid --var option",
				Detail:   fmt.Sprintf("The option --var %q is not of the form NAME=VALUE, such as --var cuda=12.4.", kv),
			})
			continue
		}
		opts.Vars[name] = value
	}
	return opts, diags
}

// completeSpecPaths offers spec files and directories for PATH arguments.
func completeSpecPaths(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
	return []cobra.Completion{strings.TrimPrefix(spec.FileExt, ".")}, cobra.ShellCompDirectiveFilterFileExt
}

func newValidateCmd(g *globalOptions) *cobra.Command {
	var vf varFlags
	cmd := &cobra.Command{
		Use:   "validate [PATH]",
		Short: "Check a spec for errors",
		Long: `Validate reads the spec at PATH (a .hcl file, or a directory whose *.hcl files
form one spec; default ".") and reports every problem it finds: syntax,
unknown blocks and attributes, wrong types, invalid versions and constraints,
names, paths, URLs and device identifiers, and input variables without a
value, and layers that cannot work together on any host (a driver too old
for the CUDA asked for, a framework build that does not exist for it, a
cuDNN without a build for it), judged from gpuenv's tables. It does not
look at the host.

Exit status: 0 when the spec is valid (warnings allowed), 1 when it is not.`,
		Example: `  gpuenv validate examples/pytorch-workstation
  gpuenv validate --var cuda=12.6 examples/variables
  gpuenv validate --json gpuenv.hcl`,
		ValidArgsFunction: completeSpecPaths,
		Args:              cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			view := newValidateView(g)
			path := "."
			if len(args) == 1 {
				path = args[0]
			}
			opts, diags := vf.loadOptions(g.Env)
			var files map[string]*hcl.File
			if !diags.HasErrors() {
				s, more := spec.Load(path, opts)
				diags = append(diags, more...)
				files = s.Files
				if !diags.HasErrors() {
					diags = append(diags, planner.CheckSpec(s)...)
				}
			}
			if err := view.Diagnostics(files, diags); err != nil {
				return err
			}
			if diags.HasErrors() {
				return &exitCodeError{code: exitError}
			}
			return view.Valid(len(diags) > 0)
		},
	}
	vf.register(cmd)
	addJSONFlag(cmd, g)
	return cmd
}
