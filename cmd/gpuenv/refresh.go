package main

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuenv/gpuenv/apply"
	"github.com/gpuenv/gpuenv/internal/jsonformat"
	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/providers"
)

// refreshFormatVersion versions refreshDocument.
const refreshFormatVersion = jsonformat.Version

// refreshDocument is what plan -refresh-only --json prints.
type refreshDocument struct {
	FormatVersion string `json:"format_version"`
	RefreshOnly   bool   `json:"refresh_only"`
	// Baseline is the generation whose observation the host is compared
	// with.
	Baseline refreshBaseline `json:"baseline"`
	// Drifted is true when any section differs.
	Drifted bool                   `json:"drifted"`
	Drift   []planner.SectionDrift `json:"drift"`
}

type refreshBaseline struct {
	Generation int        `json:"generation"`
	Kind       apply.Kind `json:"kind"`
	// Observed is "after" (observed once the apply succeeded) or
	// "before" (the observation its plan was made from, which predates
	// its own changes).
	Observed string     `json:"observed"`
	Finished *time.Time `json:"finished,omitempty"`
	// Unrecorded are the newer generations that recorded no observation
	// (a rollback, a failed apply): their changes show as drift.
	Unrecorded []int `json:"unrecorded_generations,omitempty"`
}

// refreshOnlyConflicts are plan's flags that change or save a plan,
// which a drift report makes none of.
var refreshOnlyConflicts = []string{"out", "target", "replace", "facts", "record-drift", "hosts", "canaries", "interrupt-gpu-processes", "root-boots"}

// runRefreshOnly is plan -refresh-only: the host observed now, compared
// section by section with the observation the newest generation recorded,
// changing nothing and planning nothing. With --detailed-exitcode it
// exits 2 when anything drifted.
func runRefreshOnly(cmd *cobra.Command, g *globalOptions, o *planOptions) error {
	for _, name := range refreshOnlyConflicts {
		if cmd.Flags().Changed(name) {
			return fmt.Errorf("--%s cannot be given with --refresh-only, which reports what changed on the host since the last apply and plans nothing", name)
		}
	}
	h, err := openHost(g)
	if err != nil {
		return err
	}
	if err := checkPrograms(h, "--python", o.pythons); err != nil {
		return err
	}
	last, err := apply.LastObserved(h, g.stateDir())
	if err != nil {
		return fmt.Errorf("reading the last recorded observation: %w", err)
	}
	if last == nil {
		return errors.New("nothing to compare with: no generation in the state directory " + g.stateDir() +
			" recorded an observation of the host (gpuenv apply records one); plan -refresh-only reports what changed since the last apply")
	}
	// The Python environments the recorded observation has, and those
	// named now: an environment not looked at would read as gone.
	pythons := slices.Clone(o.pythons)
	for _, env := range last.Observation.Python {
		if env.Interpreter != "" && !slices.Contains(pythons, env.Interpreter) {
			pythons = append(pythons, env.Interpreter)
		}
	}
	now := providers.Observe(cmd.Context(), h, providers.ObserveOptions{Pythons: pythons})
	doc := refreshDocument{
		FormatVersion: refreshFormatVersion,
		RefreshOnly:   true,
		Baseline: refreshBaseline{
			Generation: last.Generation.ID,
			Kind:       last.Generation.Kind,
			Observed:   "before",
			Finished:   last.Generation.Finished,
		},
		Drift: planner.Drift(last.Observation, now),
	}
	if last.After {
		doc.Baseline.Observed = "after"
	}
	for _, m := range last.Newer {
		doc.Baseline.Unrecorded = append(doc.Baseline.Unrecorded, m.ID)
	}
	if doc.Drift == nil {
		doc.Drift = []planner.SectionDrift{}
	}
	doc.Drifted = len(doc.Drift) > 0
	if g.JSON {
		err = writeJSON(g, doc)
	} else {
		err = writeRefreshText(g, doc)
	}
	if err != nil {
		return err
	}
	if o.detailedExitcode && doc.Drifted {
		return &exitCodeError{code: exitChanges}
	}
	return nil
}

func writeRefreshText(g *globalOptions, doc refreshDocument) error {
	sw := &stickyWriter{w: g.Stdout}
	b := doc.Baseline
	when := ""
	if b.Finished != nil {
		when = ", " + b.Finished.UTC().Format(time.RFC3339)
	}
	what := fmt.Sprintf("observed after generation %d (%s%s)", b.Generation, b.Kind, when)
	if b.Observed == "before" {
		what = fmt.Sprintf("observed before generation %d (%s%s) made its own changes", b.Generation, b.Kind, when)
	}
	if len(b.Unrecorded) > 0 {
		fmt.Fprintf(sw, "Note: generations %s recorded no observation; what they changed shows as drift.\n\n", joinInts(b.Unrecorded))
	}
	if !doc.Drifted {
		fmt.Fprintf(sw, "No drift: the host is as it was %s.\n", what)
		return sw.err
	}
	fmt.Fprintf(sw, "Drift since the host was %s:\n", what)
	for _, s := range doc.Drift {
		fmt.Fprintf(sw, "\n  %s\n", s.Section)
		for _, c := range s.Changes {
			fmt.Fprintf(sw, "    %s\n", esc(c.String()))
		}
		if s.More > 0 {
			fmt.Fprintf(sw, "    … and %d more\n", s.More)
		}
	}
	fmt.Fprintf(sw, "\n%s. Nothing was changed: -refresh-only reports drift and plans nothing; gpuenv plan says what applying the spec would change.\n", planner.DriftSummary(doc.Drift))
	return sw.err
}
