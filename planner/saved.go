package planner

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/Masterminds/semver/v3"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpuenv/gpuenv/planner/facts"
)

// SavedPlanMarker is the value of "gpuenv_saved_plan" in a saved plan: it
// tells a saved plan from a spec or a plain --json plan, and numbers the
// saved-plan layout.
const SavedPlanMarker = 1

// SavedPlan is what plan --out writes and apply FILE reads: the JSON plan
// document with a marker and a fingerprint of the facts it was made from,
// so that apply can refuse it once the host has changed under it.
type SavedPlan struct {
	Marker      int         `json:"gpuenv_saved_plan"`
	Fingerprint FactsDigest `json:"facts_fingerprint"`
	Plan
}

// Save returns p as a saved plan, fingerprinted with obs, the observation
// it was made from.
func Save(p *Plan, obs *facts.Observation) *SavedPlan {
	return &SavedPlan{Marker: SavedPlanMarker, Fingerprint: Fingerprint(p, obs), Plan: *p}
}

// WriteSavedPlan writes p, fingerprinted with obs, as indented JSON.
func WriteSavedPlan(w io.Writer, p *Plan, obs *facts.Observation) error {
	b, err := json.MarshalIndent(Save(p, obs), "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// IsSavedPlan reports whether data looks like a saved plan rather than a
// spec: a JSON object with the marker. It does not validate the rest.
func IsSavedPlan(data []byte) bool {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return false
	}
	var probe struct {
		Marker *int `json:"gpuenv_saved_plan"`
	}
	return json.Unmarshal(data, &probe) == nil && probe.Marker != nil
}

// IsPlanDocument reports whether data looks like a plan document that is
// not a saved plan: a JSON object with a plan's format_version or a saved
// plan's fingerprint but no marker, as plan --json prints or an edited
// saved plan is. It tells such a file from a spec, which is not JSON.
func IsPlanDocument(data []byte) bool {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' || IsSavedPlan(data) {
		return false
	}
	var probe struct {
		FormatVersion *string          `json:"format_version"`
		Fingerprint   *json.RawMessage `json:"facts_fingerprint"`
	}
	return json.Unmarshal(data, &probe) == nil && (probe.FormatVersion != nil || probe.Fingerprint != nil)
}

// ReadSavedPlan reads a saved plan, refusing a file that is not one, a
// layout or plan format this gpuenv does not know, and a plan whose
// operations are not well formed.
func ReadSavedPlan(r io.Reader) (*SavedPlan, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("reading the saved plan: %w", err)
	}
	if !IsSavedPlan(data) {
		return nil, fmt.Errorf("not a saved plan: no %q marker", "gpuenv_saved_plan")
	}
	var sp SavedPlan
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&sp); err != nil {
		return nil, fmt.Errorf("reading the saved plan: %w", err)
	}
	if sp.Marker != SavedPlanMarker {
		return nil, fmt.Errorf("saved plan layout %d is not known to this gpuenv (it knows %d)", sp.Marker, SavedPlanMarker)
	}
	if err := CheckFormatVersion(sp.FormatVersion); err != nil {
		return nil, fmt.Errorf("saved plan: %w", err)
	}
	if sp.Fingerprint.Algorithm != "sha256" || sp.Fingerprint.Digest == "" {
		return nil, fmt.Errorf("saved plan has no sha256 facts fingerprint")
	}
	if err := sp.Plan.Validate(); err != nil {
		return nil, fmt.Errorf("saved plan: %w", err)
	}
	return &sp, nil
}

// CheckFormatVersion accepts a plan document's format_version when this
// gpuenv can read it: any minor version of its own major, since minor
// versions only add fields. Format versions are semantic versions (unlike
// the versions of what gpuenv installs), so Masterminds/semver reads them.
func CheckFormatVersion(v string) error {
	got, err := semver.NewVersion(v)
	if err != nil {
		return fmt.Errorf("plan format version %q is not a version: %w", v, err)
	}
	own := semver.MustParse(FormatVersion)
	if got.Major() != own.Major() || got.Prerelease() != "" {
		return fmt.Errorf("plan format %s is not known to this gpuenv (it reads %d.x, writes %s)", v, own.Major(), FormatVersion)
	}
	return nil
}

// StaleError says that the host changed after a saved plan was made.
type StaleError struct {
	// Changed names the fact sections that differ ("packages", "kernel").
	Changed []string
}

func (e *StaleError) Error() string {
	return "saved plan is stale: the host's " + strings.Join(e.Changed, ", ") + " changed since it was made"
}

// Diagnostic is the error as apply shows it.
func (e *StaleError) Diagnostic() *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Saved plan is stale",
		Detail: fmt.Sprintf("The host's %s changed after the plan was made, so the plan may no longer be what the "+
			"host needs. Run gpuenv plan again and review the new plan.", strings.Join(e.Changed, ", ")),
	}
}

// CheckFresh compares the plan's fingerprint with obs, a new observation
// of the host: a *StaleError when any fact the plan depends on changed.
func (sp *SavedPlan) CheckFresh(obs *facts.Observation) error {
	names := make([]string, len(sp.Fingerprint.Sections))
	for i, s := range sp.Fingerprint.Sections {
		names[i] = s.Name
	}
	now := digestSections(names, obs)
	if now.Digest == sp.Fingerprint.Digest {
		return nil
	}
	changed := sp.Fingerprint.Changed(now)
	if len(changed) == 0 {
		changed = []string{"facts"}
	}
	return &StaleError{Changed: changed}
}
