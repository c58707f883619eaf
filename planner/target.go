package planner

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpuenv/gpuenv/planner/finding"
	"github.com/gpuenv/gpuenv/planner/plan"
)

// TargetCheck names the warning a targeted plan carries.
const TargetCheck = "resource-targeting"

// CheckTargets refuses a -target address that names no kind of resource
// gpuenv plans, with the kinds it knows; an address of a known kind that
// has nothing to change is not an error (the plan then says so).
func CheckTargets(targets []string, kinds *Kinds) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, t := range targets {
		if t == "" || !kinds.Known(t) || strings.HasSuffix(t, ".") {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid target address",
				Detail: fmt.Sprintf("-target %q names no resource gpuenv plans. An address is a step's, as the plan prints it: "+
					"driver, driver.hold, kernel.nouveau, cuda, cudnn, framework.pytorch, group.video, environment, device.0, "+
					"container_toolkit, repository.NAME; a kind alone (framework, group) targets every resource of that kind.", t),
			})
		}
	}
	return diags
}

// targeted reports whether the step at address is one that target names:
// the address itself, or one under it (driver names driver.hold,
// framework names framework.pytorch and framework.pytorch[/opt/venv]).
func targeted(address, target string) bool {
	return address == target || strings.HasPrefix(address, target+".") || strings.HasPrefix(address, target+"[")
}

// Target keeps of the ordered steps those that targets name and those
// they depend on, directly or not, in their order, as Terraform's
// -target does; the warning says that the plan is partial, and which
// targets had nothing to change.
func Target(steps []plan.Step, targets []string) ([]plan.Step, []finding.Finding) {
	byAddr := make(map[string]*plan.Step, len(steps))
	for i := range steps {
		byAddr[steps[i].Address] = &steps[i]
	}
	keep := map[string]bool{}
	var visit func(addr string)
	visit = func(addr string) {
		s, ok := byAddr[addr]
		if !ok || keep[addr] {
			return
		}
		keep[addr] = true
		for _, d := range s.DependsOn {
			visit(d)
		}
	}
	var unchanged []string
	for _, t := range targets {
		found := false
		for _, s := range steps {
			if targeted(s.Address, t) {
				found = true
				visit(s.Address)
			}
		}
		if !found {
			unchanged = append(unchanged, t)
		}
	}
	var out []plan.Step
	var left []string
	for _, s := range steps {
		if keep[s.Address] {
			out = append(out, s)
		} else {
			left = append(left, s.Address)
		}
	}
	if out == nil {
		out = []plan.Step{}
	}
	w := finding.Finding{
		ID:      TargetCheck,
		Summary: "Resource targeting is in effect",
		Detail: fmt.Sprintf("The plan is limited to %s and what it depends on, so it may not make the host match the spec. "+
			"Targeting is for exceptional cases, such as a change that must go first or recovering from a mistake; "+
			"plan without -target afterwards and apply what it still shows.", strings.Join(targets, ", ")),
	}
	if len(left) > 0 {
		w.Evidence = append(w.Evidence, "left out: "+strings.Join(left, ", "))
	}
	if len(unchanged) > 0 {
		slices.Sort(unchanged)
		w.Evidence = append(w.Evidence, "nothing to change at "+strings.Join(unchanged, ", "))
	}
	return out, []finding.Finding{w}
}
