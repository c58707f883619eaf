package plan

import (
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// StatusFile is the name of the world-readable status file in the state
// directory. Apply writes it; plan reads it, so that a user without access
// to the generations still learns that an apply did not finish.
const StatusFile = "status.json"

// GenerationKind says what a generation did.
type GenerationKind string

const (
	KindApply    GenerationKind = "apply"
	KindRollback GenerationKind = "rollback"
)

// GenerationStatus is where a generation stands.
type GenerationStatus string

const (
	// StatusRunning: started and not finished. Found on disk with no live
	// holder of the lock, it means the process was killed.
	StatusRunning GenerationStatus = "running"
	// StatusApplied: an apply whose every operation succeeded.
	StatusApplied GenerationStatus = "applied"
	// StatusReverted: an apply that failed and whose completed operations
	// were all undone; the host is as it was before it.
	StatusReverted GenerationStatus = "reverted"
	// StatusFailed: an apply or rollback that failed and left operations
	// done that are not undone (revert incomplete or --no-revert); the
	// host needs `gpuenv rollback`.
	StatusFailed GenerationStatus = "failed"
	// StatusDone: a rollback that undid everything it set out to.
	StatusDone GenerationStatus = "done"
	// StatusDamaged is never written: it is how a generation is listed
	// whose meta.json is missing or unreadable though its directory
	// holds a journal or saved files. What it did cannot be known, so
	// rollback stops at it (see apply.DamagedError).
	StatusDamaged GenerationStatus = "damaged"
)

// Unfinished reports whether a generation in this status left the host
// between two states: plan warns, apply refuses, rollback finishes it.
func (s GenerationStatus) Unfinished() bool { return s == StatusRunning || s == StatusFailed }

// ApplyStatus is the status file, <state>/status.json: a world-readable
// summary of the newest unfinished generation, else of the newest. Apply
// writes it (Encode); plan, run by any user, reads it (ReadApplyStatus)
// to warn about an unfinished generation:
//
//	{"unfinished": true, "generation": 7, "kind": "apply", "status": "running",
//	 "command": "apply", "started": "2026-01-02T03:04:05Z", "pid": 4242, …}
//
// Only "unfinished" and "generation" are required for the warning; the
// other members, when present, are shown as evidence. Members a reader
// does not know are ignored, so that apply can add to the file freely.
type ApplyStatus struct {
	Unfinished bool             `json:"unfinished"`
	Generation int              `json:"generation"`
	Kind       GenerationKind   `json:"kind"`
	Status     GenerationStatus `json:"status"`
	// Command, Started and PID are the generation's run, shown by plan as
	// evidence.
	Command string    `json:"command,omitempty"`
	Started time.Time `json:"started,omitzero"`
	PID     int       `json:"pid,omitempty"`
	Updated time.Time `json:"updated"`
	// Message says what to do when Unfinished.
	Message string `json:"message,omitempty"`
}

// ReadApplyStatus decodes a status file.
func ReadApplyStatus(r io.Reader) (*ApplyStatus, error) {
	var st ApplyStatus
	if err := json.NewDecoder(r).Decode(&st); err != nil {
		return nil, fmt.Errorf("reading the apply status: %w", err)
	}
	return &st, nil
}

// Encode is the status file's content: indented JSON and a newline.
func (st *ApplyStatus) Encode() ([]byte, error) {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}
