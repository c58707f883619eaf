package main

import (
	"github.com/gpuenv/gpuenv/internal/jsonformat"
	"github.com/gpuenv/gpuenv/planner/doctor"
	"github.com/gpuenv/gpuenv/planner/export"
	"github.com/gpuenv/gpuenv/planner/fleet"
	"github.com/gpuenv/gpuenv/planner/plan"
)

// The versions of the documents whose format is kept here; the others'
// are kept with the types they describe (jsonFormats names them all).
const (
	validateFormatVersion = jsonformat.Version
	historyFormatVersion  = jsonformat.Version
	versionFormatVersion  = jsonformat.Version
	slurmFormatVersion    = jsonformat.Version
)

// jsonFormat is one JSON document or stream gpuenv prints.
type jsonFormat struct {
	// Name is the document's name in version --json's "formats".
	Name string
	// Commands print it.
	Commands string
	// Version is its "format_version": "MAJOR.MINOR". A reader refuses
	// a major it does not know; a minor only adds fields.
	Version string
}

// jsonFormats is the one table of gpuenv's JSON documents: every one
// carries "format_version" as its first field (an event stream on its
// first event), versioned by the same scheme. version --json prints the
// table; a test runs every command and holds it to it.
func jsonFormats() []jsonFormat {
	return []jsonFormat{
		{"plan", "plan --json, show --json, the plan in apply --json", plan.FormatVersion},
		{"fleet-plan", "plan --facts --json", fleet.FormatVersion},
		{"observation", "observe --json (also schema_version, schema_minor)", jsonformat.Version},
		{"events", "apply --json, rollback --json (the first event)", streamFormatVersion},
		{"doctor", "doctor --json", doctor.FormatVersion},
		{"verify", "verify --json", verifyFormatVersion},
		{"validate", "validate --json", validateFormatVersion},
		{"history", "history --json", historyFormatVersion},
		{"version", "version --json", versionFormatVersion},
		{"slurm-health", "slurm-health --json", slurmFormatVersion},
		{"error", "any command with --json that fails before its own document", errorFormatVersion},
		{"drift", "the state directory's drift.json (plan --record-drift)", export.DriftFormatVersion},
		{"refresh", "plan --refresh-only --json", refreshFormatVersion},
	}
}

func formatVersions() map[string]string {
	m := map[string]string{}
	for _, f := range jsonFormats() {
		m[f.Name] = f.Version
	}
	return m
}
