package planner

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

// ApplyStatus is the status file's content as the planner reads it:
//
//	{"unfinished": true, "generation": 7, "kind": "apply",
//	 "command": "apply", "started": "2026-01-02T03:04:05Z", "pid": 4242}
//
// Only "unfinished" and "generation" are required for the warning; the
// other members, when present, are shown as evidence. Members the planner
// does not know are ignored, so that apply can add to the file freely.
type ApplyStatus struct {
	Unfinished bool `json:"unfinished"`
	Generation int  `json:"generation"`
	// Kind is the generation's kind: "apply" or "rollback".
	Kind    string    `json:"kind,omitempty"`
	Command string    `json:"command,omitempty"`
	Started time.Time `json:"started,omitzero"`
	PID     int       `json:"pid,omitempty"`
}

// ReadApplyStatus decodes a status file.
func ReadApplyStatus(r io.Reader) (*ApplyStatus, error) {
	var st ApplyStatus
	if err := json.NewDecoder(r).Decode(&st); err != nil {
		return nil, fmt.Errorf("reading the apply status: %w", err)
	}
	return &st, nil
}
