package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"runtime/debug"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpuenv/gpuenv/internal/jsonformat"
	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	planpkg "github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/spec"
)

// FormatVersion is the version of plan --facts --json's document: its
// rows (Host) and its summary (Summary). A reader refuses a major version
// it does not know.
const FormatVersion = jsonformat.Version

// Outcome is what the spec would do to one host.
type Outcome int

const (
	Unchanged Outcome = iota // the host matches the spec
	Change                   // steps, none of which needs a reboot
	Reboot                   // steps, one or more of which needs a reboot
	Refused                  // no plan: the document is unreadable or lacks facts, or the spec cannot work there
)

var outcomeNames = [...]string{Unchanged: "unchanged", Change: "change", Reboot: "reboot", Refused: "refused"}

func (o Outcome) String() string {
	if o < 0 || int(o) >= len(outcomeNames) {
		return fmt.Sprintf("Outcome(%d)", int(o))
	}
	return outcomeNames[o]
}

// MarshalJSON writes the outcome's name.
func (o Outcome) MarshalJSON() ([]byte, error) {
	if o < 0 || int(o) >= len(outcomeNames) {
		return nil, fmt.Errorf("invalid outcome %d", int(o))
	}
	return json.Marshal(outcomeNames[o])
}

// UnmarshalJSON is the exact inverse of MarshalJSON.
func (o *Outcome) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	for i, n := range outcomeNames {
		if n == s {
			*o = Outcome(i)
			return nil
		}
	}
	return fmt.Errorf("unknown outcome %q", s)
}

// Host is one host's result: small, so that a fleet's rows can be
// streamed out, and nothing of the observation or the plan is kept.
type Host struct {
	// Name is the host's name: its hostname fact, else the document's
	// file name without ".json", else its place in the stream ("-:3").
	Name string `json:"name"`
	// File is the document: a path as given, or "-:LINE" for line LINE
	// of the stream on standard input.
	File     string  `json:"file"`
	Hostname string  `json:"hostname,omitempty"`
	Outcome  Outcome `json:"outcome"`
	// Summary counts the plan's steps as plan's closing line does.
	Summary     planpkg.Summary `json:"summary"`
	NeedsReboot bool            `json:"needs_reboot"`
	Steps       []StepRow       `json:"steps,omitempty"`
	// Warnings are the summaries of the plan's warnings.
	Warnings []string `json:"warnings,omitempty"`
	// Lacks are the facts added to the schema since the document was
	// written, which it does not have (facts.Additions' keys).
	Lacks []string `json:"lacks,omitempty"`
	// Reason groups a refused host with others refused for the same
	// reason; Error says in full why.
	Reason string `json:"reason,omitempty"`
	Error  string `json:"error,omitempty"`
	// Group is the number of the host's group (PlanGroup.ID).
	Group int `json:"group"`
	// LastApply is what the document's collector noted of the host's
	// last apply or rollback, its kind and status ("apply applied",
	// "apply reverted", "apply unfinished", "rollback done"); "" when it
	// noted nothing.
	LastApply string `json:"last_apply,omitempty"`

	// key identifies the host's plan (verdictKey).
	key string
}

// StepRow is one step of a host's plan, without its operations.
type StepRow struct {
	Address     string         `json:"address"`
	Action      planpkg.Action `json:"action"`
	NeedsReboot bool           `json:"needs_reboot,omitempty"`
}

// Reasons a host is refused before it is planned.
const (
	ReasonUnreadable = "Unreadable observation"
	ReasonSchema     = "Observation of another schema version"
	ReasonLacking    = "Observation lacks facts the plan needs"
	ReasonPanic      = "Planning failed"
)

// verdict is what planning one document came to, apart from the host's
// names: what every host of one digest shares.
type verdict struct {
	row Host
	// The row's error is errHead, the document's file when errFile is
	// set, and errTail: the file is each host's own.
	errHead, errTail string
	errFile          bool
	// key identifies the plan among a run's verdicts: hosts of one key
	// are one group.
	key string
	// shared is false for a verdict that is the document's alone (it did
	// not decode), which no other host of its digest may take.
	shared bool
}

// host is the verdict's row for one host.
func (v *verdict) host(file, name, hostname string) Host {
	h := v.row
	h.File, h.Name, h.Hostname = file, name, hostname
	if hostname != "" {
		h.Name = hostname
	}
	if h.Outcome == Refused {
		h.Error = v.errHead + v.errTail
		if v.errFile {
			h.Error = v.errHead + file + v.errTail
		}
	}
	return h
}

// refuse makes v a refusal whose error names the document's file first.
func (v *verdict) refuse(reason, tail string) {
	v.row.Outcome, v.row.Reason = Refused, reason
	v.errFile, v.errTail = true, tail
}

// judge plans s against one document: the verdict, and the document's
// hostname, which is not part of it.
func judge(ctx context.Context, s *spec.Spec, interpreters []string, newPlanner func() *planner.Planner, data []byte) (v verdict, hostname string, last json.RawMessage) {
	v.shared = true
	// A document from a collector may hold what observe never writes;
	// where the planner trips over it, that host is refused and the
	// fleet's other hosts are still planned.
	defer func() {
		if r := recover(); r != nil {
			v = verdict{shared: true}
			v.refuse(ReasonPanic, fmt.Sprintf(": planning failed: %v. This is a bug in gpuenv.\n\n%s", r, debug.Stack()))
			v.key = verdictKey(&v)
		}
	}()
	obs, last, lacks, err := decode(data)
	if err != nil {
		v.shared = false
		v.refuse(ReasonUnreadable, fmt.Sprintf(": %v", err))
		if se := (*SchemaError)(nil); errors.As(err, &se) && se.Version != 0 {
			v.row.Reason = ReasonSchema
		}
		v.key = verdictKey(&v)
		return v, "", nil
	}
	hostname = obs.Hostname
	v.decide(ctx, s, interpreters, newPlanner, obs, lacks)
	v.key = verdictKey(&v)
	return v, hostname, last
}

func (v *verdict) decide(ctx context.Context, s *spec.Spec, interpreters []string, newPlanner func() *planner.Planner, obs *facts.Observation, lacks []facts.Addition) {
	row := &v.row
	var needed []string
	for _, a := range lacks {
		row.Lacks = append(row.Lacks, a.Key)
		if a.Planned {
			needed = append(needed, fmt.Sprintf("%s (%q)", a.What, a.Key))
		}
	}
	if len(needed) > 0 {
		v.refuse(ReasonLacking, fmt.Sprintf(" was written before gpuenv recorded %s; observe the host again with this gpuenv (observe --json)", strings.Join(needed, ", ")))
		return
	}
	if missing := unobservedInterpreters(obs, interpreters); len(missing) > 0 {
		v.refuse(ReasonLacking, fmt.Sprintf(" holds no Python environment of %s, which the spec's framework blocks name; observe the host with --python %s", strings.Join(missing, ", "), strings.Join(missing, " --python ")))
		return
	}
	p, diags := newPlanner().Plan(ctx, s, obs)
	if diags.HasErrors() || p == nil {
		row.Outcome = Refused
		row.Reason, v.errHead = refusal(diags)
		return
	}
	row.Summary, row.NeedsReboot = p.Summary, p.NeedsReboot
	switch {
	case len(p.Steps) == 0:
		row.Outcome = Unchanged
	case p.NeedsReboot:
		row.Outcome = Reboot
	default:
		row.Outcome = Change
	}
	for _, st := range p.Steps {
		row.Steps = append(row.Steps, StepRow{Address: st.Address, Action: st.Action, NeedsReboot: st.Flags.NeedsReboot})
	}
	for _, w := range p.Warnings {
		row.Warnings = append(row.Warnings, w.Summary)
	}
}

// verdictKey tells plans apart by all their rows show but the host: the
// steps, warnings, lacking facts, and for a refusal its reason and
// error (but for a document that does not decode, whose error differs
// by where the document breaks: those are one group per reason).
func verdictKey(v *verdict) string {
	r := &v.row
	if r.Reason == ReasonUnreadable {
		return unreadableKey
	}
	// The text is digested: a run keeps a key for each verdict and each
	// group, and a refusal's text runs to kilobytes.
	b := newHasher()
	fmt.Fprintf(b, "%d\x00%s\x00%s\x00%t\x00%s\x00", r.Outcome, r.Reason, v.errHead, v.errFile, v.errTail)
	for _, st := range r.Steps {
		fmt.Fprintf(b, "s%s\x00%d\x00%t\x00", st.Address, st.Action, st.NeedsReboot)
	}
	for _, w := range r.Warnings {
		fmt.Fprintf(b, "w%s\x00", w)
	}
	for _, l := range r.Lacks {
		fmt.Fprintf(b, "l%s\x00", l)
	}
	d := b.sum()
	return fmt.Sprintf("%016x%016x", d[0], d[1])
}

// refusal is the reason of a failed plan, the first error's summary,
// and its text, every error's place, summary and detail.
func refusal(diags hcl.Diagnostics) (reason, text string) {
	for _, d := range diags {
		if d.Severity == hcl.DiagError {
			return d.Summary, spec.ErrorsText(diags)
		}
	}
	return ReasonPanic, "the planner returned neither a plan nor an error. This is a bug in gpuenv."
}

// unobservedInterpreters are those of interpreters outside the system's
// prefixes that obs says nothing of: neither an environment nor a
// warning that the interpreter was not found. Their frameworks would be
// planned as into an empty environment.
func unobservedInterpreters(obs *facts.Observation, interpreters []string) []string {
	var out []string
	for _, in := range interpreters {
		in = path.Clean(in)
		// The distribution's environment is observed whether named or
		// not.
		if prefix := path.Dir(path.Dir(in)); prefix == "/usr" || prefix == "/usr/local" {
			continue
		}
		seen := false
		for _, env := range obs.Python {
			seen = seen || env.Interpreter == in
		}
		for _, w := range obs.Warnings {
			seen = seen || w.Path == in
		}
		if !seen {
			out = append(out, in)
		}
	}
	return out
}
