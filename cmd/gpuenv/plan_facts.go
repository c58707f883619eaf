package main

import (
	"errors"
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/spf13/cobra"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/fleet"
	"github.com/gpuenv/gpuenv/providers"
	"github.com/gpuenv/gpuenv/spec"
)

// factsHelp is plan's help on --facts, appended to its Long text.
const factsHelp = `

--facts plans the spec against saved observations instead of this host: the
documents "gpuenv observe --json" printed on each host of a fleet, gathered
by any collector. Each --facts names one document, a directory (every *.json
file in it), or "-" (standard input, one document per line: JSON lines), and
may be repeated. Nothing is read of the machine running the command but the spec
and the documents, and no process is started: a host whose plan needs a
fact its document lacks (package versions that only its package manager
could tell, a fact older gpuenv did not record) is refused with the reason.
Documents of another schema_version are refused, naming both versions. The
summary counts the hosts unchanged, to change, to change and needing a
reboot, and refused, with the steps and reasons behind each; --json prints
each host's row (name, file, outcome, counts, steps or error) as it is
planned, then the summary.

Exit status with --facts: 1 when the spec is invalid or any host is refused
(the rollout would fail there); otherwise 0, or with --detailed-exitcode 2
when any host would change and 0 when none would.`

// factsFlagConflicts are plan's flags that concern this host, which
// --facts does not plan.
var factsFlagConflicts = []string{"out", "python", "record-drift", "root", "state-dir"}

// runPlanFacts plans the spec at specPath against the documents that
// --facts names.
func runPlanFacts(cmd *cobra.Command, g *globalOptions, o *planOptions, specPath string) error {
	for _, name := range factsFlagConflicts {
		if f := cmd.Flags().Lookup(name); f != nil && f.Changed {
			return fmt.Errorf("--%s concerns this host, and --facts plans saved observations instead: leave one out", name)
		}
	}
	view := newFactsView(g)
	opts, diags := o.vars.loadOptions(g.Env)
	var s *spec.Spec
	var files map[string]*hcl.File
	if !diags.HasErrors() {
		s, diags = loadSpec(specPath, opts, diags)
		files = s.Files
	}
	if err := view.Start(specPath, files, s, diags); err != nil {
		return err
	}
	if diags.HasErrors() {
		return &exitCodeError{code: exitError}
	}
	inputs, err := fleet.Inputs(o.facts, g.Stdin)
	if err != nil {
		return err
	}
	sum, err := fleet.Plan(cmd.Context(), fleet.Options{Spec: s, Planner: newFactsPlanner}, inputs, view.Host)
	if err != nil {
		return err
	}
	if err := view.Summary(sum); err != nil {
		return err
	}
	switch {
	case sum.Refused > 0:
		return &exitCodeError{code: exitError}
	case o.detailedExitcode && sum.Change+sum.Reboot > 0:
		return &exitCodeError{code: exitChanges}
	}
	return nil
}

// newFactsPlanner is the planner of one host known by its document: every
// provider, with package versions from the document alone.
func newFactsPlanner() *planner.Planner {
	pl := planner.New(providers.Planners()...)
	pl.Candidates = providers.FactsCandidates()
	return pl
}

// errFactsArgs is plan's answer to a shell pattern after --facts, which
// leaves every file but the first as an argument.
var errFactsArgs = errors.New("plan takes one spec PATH: give --facts a directory, or --facts before each file")
