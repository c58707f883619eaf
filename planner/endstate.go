package planner

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpuenv/gpuenv/planner/doctor"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/finding"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/spec"
)

// EndStateFunc predicts the host as a plan leaves it: the observation
// with each step's changes made, as far as the steps say (a file a step
// writes holds what it writes; a fact no step changes stays as observed).
// It must not change obs. The command hands in the providers' (it reads
// a written file as their observers read it), which the planner cannot
// import.
type EndStateFunc func(obs *facts.Observation, steps []plan.Step) *facts.Observation

// EndStateFindings are the findings doctor's rules make of the host as
// the plan leaves it (end) that a user must hear of: warnings and
// problems, those of stage observe (which observe reports of the host as
// it is) first, then those of stage plan. user is whose access to the
// device nodes is judged (nil: no one's).
func EndStateFindings(end *facts.Observation, user *doctor.User) []finding.Finding {
	var out []finding.Finding
	in := doctor.Input{Obs: end, User: user}
	for _, c := range append(doctor.Judge(in, finding.Observe), doctor.Judge(in, finding.Plan)...) {
		if c.Status.Flagged() {
			out = append(out, c)
		}
	}
	return out
}

// judgeEndState turns what doctor would find after apply into the plan's
// warnings, and into errors where a problem is the spec's own doing: its
// evidence is a file gpuenv writes (the plan writes it, or it is
// gpuenv's and the plan keeps it), on a host whose GPUs NVML lists, so
// that the GPUs programs will see are known. A problem the host has
// regardless of the spec stays a warning, as doctor reports it, and so
// does one judged from the PCI bus alone (a root not running its driver,
// an image, a machine whose GPU is not yet passed through), where the
// no-gpu warning or the driver the plan installs may yet change what
// programs see.
func judgeEndState(s *spec.Spec, obs, end *facts.Observation, steps []plan.Step, user *doctor.User) ([]finding.Finding, hcl.Diagnostics) {
	owned := map[string]bool{}
	for _, p := range obs.Environment.Managed {
		owned[p] = true
	}
	for _, st := range steps {
		for _, op := range st.Operations {
			if f := op.File; f != nil {
				owned[f.Path] = !f.Remove
			}
		}
	}
	var warns []finding.Finding
	var diags hcl.Diagnostics
	for _, f := range EndStateFindings(end, user) {
		f.Stage = finding.Plan
		if f.Status != finding.Problem || len(end.NVML.Devices) == 0 || !citesOwned(f.Evidence, owned) {
			warns = append(warns, f)
			continue
		}
		diags = append(diags, refusal(s, f))
	}
	return warns, diags
}

// citesOwned reports whether an evidence line names one of the files
// ("path:line: …" or "path: …").
func citesOwned(evidence []string, owned map[string]bool) bool {
	for _, e := range evidence {
		if p, _, ok := strings.Cut(e, ":"); ok && owned[p] {
			return true
		}
	}
	return false
}

// refusal is the error for a problem the spec makes: doctor's wording,
// with where the spec says it, what gpuenv would write, and the fix.
func refusal(s *spec.Spec, f finding.Finding) *hcl.Diagnostic {
	var b strings.Builder
	fmt.Fprintf(&b, "Applied, this spec leaves a problem that gpuenv doctor reports (%s):", f.ID)
	for _, e := range f.Evidence {
		fmt.Fprintf(&b, "\n  - %s", e)
	}
	if f.Fix != nil {
		fmt.Fprintf(&b, "\n%s", f.Fix.Text)
		if f.Fix.Spec != "" {
			fmt.Fprintf(&b, "\n\n%s", f.Fix.Spec)
		}
	}
	d := &hcl.Diagnostic{Severity: hcl.DiagError, Summary: f.Summary, Detail: b.String()}
	if r := specRange(s, f.ID); r.Filename != "" {
		d.Subject = r.Ptr()
	}
	return d
}

// specRange is the spec attribute a rule's verdict rests on: the one the
// fix changes.
func specRange(s *spec.Spec, id string) hcl.Range {
	if group, ok := strings.CutPrefix(id, "env.cuda-visible-devices:"); ok {
		if t := s.Team(group); t != nil {
			if t.CUDAVisibleDevices.Set {
				return t.CUDAVisibleDevices.Range
			}
			return t.DefRange
		}
		return hcl.Range{}
	}
	e := s.Environment
	if e == nil {
		return hcl.Range{}
	}
	switch id {
	case "env.cuda-visible-devices":
		if e.CUDAVisibleDevices.Set {
			return e.CUDAVisibleDevices.Range
		}
	case "env.cuda-device-order":
		if e.CUDADeviceOrder.Set {
			return e.CUDADeviceOrder.Range
		}
	}
	return e.DefRange
}
