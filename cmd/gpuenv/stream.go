package main

import (
	"encoding/json"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpuenv/gpuenv/apply"
	"github.com/gpuenv/gpuenv/internal/jsonformat"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/spec"
)

// streamFormatVersion versions the event stream of `apply --json` and
// `rollback --json` as the plan format is versioned: a minor version adds
// events or fields, a major one changes what is there.
const streamFormatVersion = jsonformat.Version

// eventStream is the JSON view of apply and rollback: JSON Lines on
// stdout, one object per event, each with "type" and "@timestamp", the
// first one carrying "format_version". Nothing else is written to stdout.
type eventStream struct {
	mu  sync.Mutex
	enc *json.Encoder
	err error
	// ended: the summary is out; nothing follows it.
	ended bool
}

func newEventStream(w io.Writer) *eventStream {
	s := &eventStream{enc: json.NewEncoder(w)}
	s.write(map[string]any{"type": "version", "format_version": streamFormatVersion, "gpuenv": buildVersion().Version})
	return s
}

// write prints one event built here, stamping it.
func (s *eventStream) write(ev map[string]any) {
	if _, ok := ev["@timestamp"]; !ok {
		ev["@timestamp"] = time.Now().UTC()
	}
	s.encode(ev)
}

// run prints one of the engine's events, stamped when it happened.
func (s *eventStream) run(e apply.RunEvent) { s.encode(e) }

// encode prints one object; the first write error is kept and later
// events are dropped, since a reader that went away reads nothing.
func (s *eventStream) encode(v any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = s.enc.Encode(v)
	}
}

// plan prints the plan document, as `plan --json` prints it.
func (s *eventStream) plan(p *plan.Plan) {
	s.write(map[string]any{"type": "plan", "plan": planDocument{FormatVersion: plan.FormatVersion, Plan: p, Diagnostics: []spec.JSONDiagnostic{}}})
}

// diagnostics prints one event per diagnostic.
func (s *eventStream) diagnostics(diags hcl.Diagnostics) {
	for _, d := range spec.DiagnosticsJSON(diags) {
		s.write(map[string]any{"type": "diagnostic", "diagnostic": d})
	}
}

// fail turns an error that ends the command into a diagnostic event and a
// summary, and returns the exit status, so that nothing but the stream
// reaches stdout and nothing at all reaches stderr.
func (s *eventStream) fail(kind apply.Kind, err error) error {
	code := exitError
	var ec *exitCodeError
	if errors.As(err, &ec) {
		code = ec.code
	}
	s.mu.Lock()
	ended := s.ended
	s.mu.Unlock()
	if ended {
		return &exitCodeError{code: code}
	}
	if ec == nil {
		s.write(map[string]any{"type": "diagnostic", "diagnostic": spec.JSONDiagnostic{Severity: "error", Summary: err.Error()}})
	}
	s.write(map[string]any{"type": "summary", "kind": kind, "outcome": "error", "exit_code": code})
	return &exitCodeError{code: code}
}

// summary prints how the run ended, and returns the stream's first write
// error.
func (s *eventStream) summary(res *apply.Result, code int) error {
	s.write(map[string]any{
		"type":         "summary",
		"kind":         res.Kind,
		"outcome":      res.Status,
		"generation":   res.Generation,
		"done":         len(res.Done),
		"skipped":      len(res.Skipped),
		"reverted":     len(res.Reverted),
		"needs_reboot": res.NeedsReboot,
		"exit_code":    code,
		"result":       res,
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended = true
	return s.err
}

// end prints the summary of a run that exits with code, and returns what
// the command returns: the stream's write error, or the exit status.
func (s *eventStream) end(res *apply.Result, code int) error {
	if err := s.summary(res, code); err != nil {
		return err
	}
	if code != 0 {
		return &exitCodeError{code: code}
	}
	return nil
}
