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
by any collector (the Ansible collection's gather playbook, say). Each
--facts names one document (NAME.json, or gzip-compressed NAME.json.gz), an
archive of them (.tar, .tar.gz, .tgz), a directory (every *.json and
*.json.gz file in it and below), or "-" (standard input: one document per
line, JSON lines, or a tar archive, either gzip-compressed or not), and may
be repeated. A document that cannot be read is a refused row with its
reason, and the run goes on. Nothing is read of the machine running the command but the spec
and the documents, and no process is started: a host whose plan needs a
fact its document lacks (package versions that only its package manager
could tell, a fact older gpuenv did not record) is refused with the reason.
Documents of another schema_version are refused, naming both versions. The
summary counts the hosts unchanged, to change, to change and needing a
reboot, and refused, and groups the hosts that plan alike: each group's
steps, warnings or reason for refusal are shown once. Hosts whose documents
agree in every fact planning reads are planned once. --canaries N names
at most N hosts of each group to try the spec on first, together covering
every distinct plan and refusal, preferring hosts whose last apply
succeeded (a document's "last_apply", which the gather playbook adds).
--json writes the groups, then with --hosts each host's row (name, file,
group, outcome, steps or error), then the summary.

Exit status with --facts: 1 when the spec is invalid or any host is refused
(the rollout would fail there); otherwise 0, or with --detailed-exitcode 2
when any host would change and 0 when none would.`

// factsFlagConflicts are plan's flags that concern this host, which
// --facts does not plan.
var factsFlagConflicts = []string{"out", "python", "record-drift", "root", "state-dir"}

// factsOnlyFlags are plan's flags that only --facts reads.
var factsOnlyFlags = []string{"hosts", "canaries"}

// runPlanFacts plans the spec at specPath against the documents that
// --facts names.
func runPlanFacts(cmd *cobra.Command, g *globalOptions, o *planOptions, specPath string) error {
	for _, name := range factsFlagConflicts {
		if f := cmd.Flags().Lookup(name); f != nil && f.Changed {
			return fmt.Errorf("--%s concerns this host, and --facts plans saved observations instead: leave one out", name)
		}
	}
	if o.hosts && !g.JSON {
		return errors.New("--hosts adds each host's row to --json: give --json too, or leave --hosts out (the summary names the first hosts of each group)")
	}
	if o.canaries < 0 {
		return fmt.Errorf("--canaries %d: give the number of hosts of each group to name, 1 or more", o.canaries)
	}
	view, err := newFactsView(g, o.hosts)
	if err != nil {
		return err
	}
	defer view.Close()
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
	sum, err := fleet.Plan(cmd.Context(), fleet.Options{Spec: s, Planner: newFactsPlanner, Canaries: o.canaries}, inputs, view.Host)
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
	pl.EndState = providers.EndState
	return pl
}

// errFactsArgs is plan's answer to a shell pattern after --facts, which
// leaves every file but the first as an argument.
var errFactsArgs = errors.New("plan takes one spec PATH: give --facts a directory, or --facts before each file")
