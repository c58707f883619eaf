// Package finding is the one shape of everything gpuenv finds wrong or
// worth knowing about a host: observe's problems, plan's warnings and
// doctor's checks are each a list of Finding, told apart by the stage
// that reports them. A rule is worded once, where it is judged (the
// doctor package), and every command that reports it prints that wording.
//
// The package is a leaf: it imports nothing of gpuenv's, so that the
// observation document (planner/facts) can hold findings.
package finding

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Status is a finding's verdict.
type Status string

// The verdicts, from best to worst. Skipped means the rule did not apply
// (nothing to judge, or an earlier problem already explains it).
const (
	Skipped Status = "skipped"
	OK      Status = "ok"
	Warning Status = "warning"
	Problem Status = "problem"
)

// Mark is the one-character sign of a status in human output.
func (s Status) Mark() string {
	switch s {
	case OK:
		return "✓"
	case Warning:
		return "!"
	case Problem:
		return "✗"
	}
	return "-"
}

// Flagged reports whether the status is one a user must hear of: a
// warning or a problem.
func (s Status) Flagged() bool { return s == Warning || s == Problem }

// Stage is the first command that can judge a rule, from what it has:
// observe has the facts, plan has the facts and the plan (so the host as
// it will be), doctor has the facts and the invoking user's session. A
// command reports the findings of its stage and those before it, so
// plan's warnings include observe's problems about the planned end state,
// and doctor reports everything.
type Stage int

const (
	// Doctor is the zero value: a rule that says nothing of its stage is
	// reported by doctor alone.
	Doctor Stage = iota
	Observe
	Plan
)

var stageNames = [...]string{Doctor: "doctor", Observe: "observe", Plan: "plan"}

func (s Stage) String() string {
	if s < 0 || int(s) >= len(stageNames) {
		return fmt.Sprintf("Stage(%d)", int(s))
	}
	return stageNames[s]
}

// Group is one of the stages an expert goes through, in order.
type Group struct {
	Number int    `json:"number"`
	Name   string `json:"name"`
}

// Fix is how to remove what a finding reports: a spec change for gpuenv,
// a command, or both. Spec is HCL to merge into the spec; Commands are run
// in order.
type Fix struct {
	Text     string   `json:"text"`
	Spec     string   `json:"spec,omitempty"`
	Commands []string `json:"commands,omitempty"`
}

// Finding is one rule's verdict on a host. Its own JSON is doctor's
// report's check; the observation's problems (Problems) and the plan's
// warnings (Warnings) write it in their documents' older shapes.
type Finding struct {
	// ID names the rule, stable across releases ("kernel.nouveau",
	// "secure-boot-dkms"); a rule about one of several things (an
	// environment, a toolkit) adds the subject after a colon.
	ID     string `json:"id"`
	Group  Group  `json:"group"`
	Status Status `json:"status"`
	// Summary is the rule's verdict in one sentence.
	Summary string `json:"summary"`
	// Evidence are the observed facts the verdict rests on, each naming
	// where it was seen.
	Evidence []string `json:"evidence"`
	Fix      *Fix     `json:"fix,omitempty"`
	// Detail explains the verdict beyond its summary, in a paragraph: why
	// it matters and what follows.
	Detail string `json:"detail,omitempty"`
	// Stage is the first command that reports the rule.
	Stage Stage `json:"-"`
	// Layer is the section of the observation the finding concerns
	// ("kernel", "driver", "packages"), where observe prints it.
	Layer string `json:"-"`
}

// Message is the finding as one line: its summary, then what to do when
// the fix says it in words alone. A fix with a spec or commands does not
// fit a line: it is the summary alone, and the fix is told apart.
func (f Finding) Message() string {
	if f.Fix == nil || f.Fix.Text == "" || f.Fix.Spec != "" || len(f.Fix.Commands) > 0 {
		return f.Summary
	}
	return f.Summary + " — " + f.Fix.Text
}

// Problems are an observation's problems. They are written as
// observation documents have always written them, "layer" and "message"
// (Message), with the rule's "id", "evidence" and "fix" added where it
// has them, and "status" where the rule rates the case a warning.
type Problems []Finding

type problemJSON struct {
	Layer   string `json:"layer"`
	Message string `json:"message"`
	ID      string `json:"id,omitempty"`
	// Status is set where the rule rates the case a warning: every
	// problem of an older observation was one.
	Status   Status   `json:"status,omitempty"`
	Evidence []string `json:"evidence,omitempty"`
	Fix      *Fix     `json:"fix,omitempty"`
}

// MarshalJSON writes each finding in the observation's shape.
func (ps Problems) MarshalJSON() ([]byte, error) {
	if ps == nil {
		return []byte("null"), nil
	}
	out := make([]problemJSON, len(ps))
	for i, p := range ps {
		st := p.Status
		if st == Problem {
			st = ""
		}
		out[i] = problemJSON{Layer: p.Layer, Message: p.Message(), ID: p.ID, Status: st, Evidence: p.Evidence, Fix: p.Fix}
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads what MarshalJSON writes, and the problems of older
// documents, which have only a layer and a message: the message less the
// fix's text is the summary.
func (ps *Problems) UnmarshalJSON(b []byte) error {
	var in []problemJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	if in == nil {
		*ps = nil
		return nil
	}
	out := make(Problems, len(in))
	for i, p := range in {
		st := p.Status
		if st == "" {
			st = Problem
		}
		f := Finding{ID: p.ID, Status: st, Stage: Observe, Layer: p.Layer, Summary: p.Message, Evidence: p.Evidence, Fix: p.Fix}
		if m := f.Message(); m != f.Summary {
			f.Summary = strings.TrimSuffix(p.Message, m[len(f.Summary):])
		}
		out[i] = f
	}
	*ps = out
	return nil
}

// Warnings are a plan's warnings. They are written as plan documents have
// always written them, the rule's ID under "check" with "summary",
// "detail" and "evidence", with "fix" added where the rule has one and
// "status" where it is a problem.
type Warnings []Finding

type warningJSON struct {
	Check    string   `json:"check,omitempty"`
	Status   Status   `json:"status,omitempty"`
	Summary  string   `json:"summary"`
	Detail   string   `json:"detail,omitempty"`
	Evidence []string `json:"evidence,omitempty"`
	Fix      *Fix     `json:"fix,omitempty"`
}

// MarshalJSON writes each finding in the plan's shape.
func (ws Warnings) MarshalJSON() ([]byte, error) {
	if ws == nil {
		return []byte("null"), nil
	}
	out := make([]warningJSON, len(ws))
	for i, w := range ws {
		st := w.Status
		if st == Warning {
			// Every warning of an older plan was one: only a problem
			// says so.
			st = ""
		}
		out[i] = warningJSON{Check: w.ID, Status: st, Summary: w.Summary, Detail: w.Detail, Evidence: w.Evidence, Fix: w.Fix}
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads what MarshalJSON writes, and the warnings of older
// plans.
func (ws *Warnings) UnmarshalJSON(b []byte) error {
	var in []warningJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	if in == nil {
		*ws = nil
		return nil
	}
	out := make(Warnings, len(in))
	for i, w := range in {
		st := w.Status
		if st == "" {
			st = Warning
		}
		out[i] = Finding{ID: w.Check, Status: st, Stage: Plan, Summary: w.Summary, Detail: w.Detail, Evidence: w.Evidence, Fix: w.Fix}
	}
	*ws = out
	return nil
}
