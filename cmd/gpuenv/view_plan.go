package main

import (
	"fmt"
	"io"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/spec"
)

// planView shows what gpuenv plan found. One is chosen from the flags when
// the command starts (newPlanView), so that plan itself never asks which
// format it writes. Every method returns the first write error.
type planView interface {
	// Plan shows p with diags, the spec's and the planner's diagnostics;
	// files are the spec's sources, for the source lines diagnostics cite.
	// p is nil when the spec or planning failed and only diags are shown.
	Plan(files map[string]*hcl.File, p *plan.Plan, diags hcl.Diagnostics) error
	// Saved says that the plan was saved to path for gpuenv apply, made
	// from from.
	Saved(path string, from *planner.PlannedFrom) error
}

// newPlanView returns the view the flags ask for.
func newPlanView(g *globalOptions) planView {
	if g.JSON {
		return &planJSON{g: g}
	}
	return &planHuman{w: g.Stdout, color: g.Color(), diagnostics: g.diagnosticWriter}
}

// planHuman writes the plan for a person: diagnostics on stderr, then the
// plan, as humanPlan renders it, on w.
type planHuman struct {
	w           io.Writer
	color       bool
	diagnostics func(files map[string]*hcl.File) hcl.DiagnosticWriter
}

var _ planView = (*planHuman)(nil)

func (v *planHuman) Plan(files map[string]*hcl.File, p *plan.Plan, diags hcl.Diagnostics) error {
	if len(diags) > 0 {
		if err := v.diagnostics(files).WriteDiagnostics(diags); err != nil {
			return err
		}
	}
	if p == nil {
		return nil
	}
	return (&humanPlan{w: v.w, color: v.color}).render(p)
}

func (v *planHuman) Saved(path string, from *planner.PlannedFrom) error {
	sw := &stickyWriter{w: v.w}
	fmt.Fprintf(sw, "\nSaved the plan to %s; gpuenv show %s prints it again.\n", esc(path), esc(shellWord(path)))
	writeApplyHint(sw, path, from)
	return sw.err
}

// planJSON writes the plan as one planDocument on stdout, with the
// diagnostics in it.
type planJSON struct {
	g *globalOptions
}

var _ planView = (*planJSON)(nil)

func (v *planJSON) Plan(_ map[string]*hcl.File, p *plan.Plan, diags hcl.Diagnostics) error {
	return writeJSON(v.g, planDocument{
		FormatVersion: plan.FormatVersion,
		Errored:       p == nil || diags.HasErrors(),
		Plan:          p,
		Diagnostics:   spec.DiagnosticsJSON(diags),
	})
}

// Saved writes nothing: the document is the plan, and a program that asked
// for --out knows where it is.
func (v *planJSON) Saved(string, *planner.PlannedFrom) error { return nil }
