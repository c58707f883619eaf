// Package health turns what gpuenv knows of a host — doctor's report, the
// drift timer's last plan, the state directory's last generation — into
// the formats that fleet tools read: node_exporter's textfile collector,
// a Node Feature Discovery features.d file, and a Slurm drain decision.
// It holds formats and decisions only; writing files and running scontrol
// is left to the command, so that every rule here is a pure function
// tested on its own.
package export

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/gpuenv/gpuenv/internal/jsonformat"
)

// DriftFile is the drift record's name in the state directory. plan
// --record-drift writes it; doctor --prometheus reads it. It is
// world-readable, like the status file, so that an exporter running as an
// unprivileged user can read it.
const DriftFile = "drift.json"

// DriftFormatVersion is the drift record's format version: the major
// number changes when a reader of an older format would misread it.
const DriftFormatVersion = jsonformat.Version

// Outcome is how the drift timer's plan ended.
type Outcome string

const (
	// NoChanges: the host matches the spec.
	NoChanges Outcome = "no-changes"
	// Changes: the host has drifted; the counts say by how much.
	Changes Outcome = "changes"
	// Error: no plan could be made (the spec does not load, the host
	// cannot be observed); Error says why. An operator must see it as
	// surely as drift: a host whose spec cannot be read is not managed.
	Error Outcome = "error"
)

// Outcomes are every outcome, in the order metrics list them.
var Outcomes = []Outcome{NoChanges, Changes, Error}

// DriftRecord is one run of `gpuenv plan --record-drift`.
type DriftRecord struct {
	FormatVersion string    `json:"format_version"`
	Time          time.Time `json:"time"`
	Outcome       Outcome   `json:"outcome"`
	// ExitCode is the plan's own exit status (with --detailed-exitcode:
	// 0, 2, or 1 on error).
	ExitCode int `json:"exit_code"`
	// Spec is the spec's path as given to plan.
	Spec string `json:"spec"`
	// SpecDigest is the planner's SHA-256 over the spec's files as they
	// were parsed; empty when they could not be.
	SpecDigest  string `json:"spec_digest,omitempty"`
	Add         int    `json:"add"`
	Change      int    `json:"change"`
	Remove      int    `json:"remove"`
	NeedsReboot bool   `json:"needs_reboot"`
	// Error is the error in words, for Outcome Error.
	Error string `json:"error,omitempty"`
}

// Encode is the record's file content: indented JSON and a newline.
func (r *DriftRecord) Encode() ([]byte, error) {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// ReadDrift decodes a drift record, refusing one of another major format
// version or an outcome this gpuenv does not know: a metric built from a
// misread record would say the wrong thing with confidence.
func ReadDrift(r io.Reader) (*DriftRecord, error) {
	var rec DriftRecord
	dec := json.NewDecoder(r)
	if err := dec.Decode(&rec); err != nil {
		return nil, fmt.Errorf("reading the drift record: %w", err)
	}
	// A record written before the documents shared one version is 1.x,
	// and says the same.
	if err := jsonformat.Check("drift record", rec.FormatVersion, jsonformat.LegacyMajor); err != nil {
		return nil, err
	}
	switch rec.Outcome {
	case NoChanges, Changes, Error:
	default:
		return nil, fmt.Errorf("the drift record has an unknown outcome %q", rec.Outcome)
	}
	return &rec, nil
}
