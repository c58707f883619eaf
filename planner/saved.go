package planner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/spec"
)

// SavedPlanMarker is the value of "gpuenv_saved_plan" in a saved plan: it
// tells a saved plan from a spec or a plain --json plan, and numbers the
// saved-plan layout. Layout 2 added planned_from, the spec and flags the
// plan was made from; a layout 1 plan cannot be planned again, so it is
// refused.
const SavedPlanMarker = 2

// SavedPlan is what plan --out writes and apply FILE reads: the JSON plan
// document with a marker, a fingerprint of the facts it was made from, so
// that apply can refuse it once the host has changed under it, and what
// else it was planned from, so that apply can plan again and refuse a
// plan that is not what plan says (Terraform's plan file keeps its
// configuration for the same reason).
type SavedPlan struct {
	Marker      int          `json:"gpuenv_saved_plan"`
	Fingerprint FactsDigest  `json:"facts_fingerprint"`
	From        *PlannedFrom `json:"planned_from"`
	plan.Plan
}

// PlannedFrom is what a plan was made from besides the host's facts: the
// spec, as the files plan read, and every flag that changed the plan.
type PlannedFrom struct {
	Spec SavedSpec `json:"spec"`
	// Root is --root, as an absolute path.
	Root string `json:"root"`
	// StateDir is --state-dir, whose status the plan's warnings report.
	StateDir string `json:"state_dir"`
	// Pythons are --python's interpreters.
	Pythons               []string `json:"python,omitempty"`
	InterruptGPUProcesses bool     `json:"interrupt_gpu_processes,omitempty"`
	// RootBoots is --root-boots: the root gets its kernel-side steps
	// even where its files say container.
	RootBoots bool `json:"root_boots,omitempty"`
	// Targets are -target's addresses: the plan is limited to them.
	Targets []string `json:"target,omitempty"`
	// Replace are -replace's addresses: what the plan reinstalls.
	Replace []string `json:"replace,omitempty"`
}

// SavedSpec is a spec as plan loaded it: its files' bytes and the values
// its input variables were given outside them.
type SavedSpec struct {
	// Path is the spec's PATH argument, for messages.
	Path     string      `json:"path"`
	Files    []SavedFile `json:"files"`
	VarFiles []SavedFile `json:"var_files,omitempty"`
	// Vars are the --var assignments.
	Vars map[string]string `json:"vars,omitempty"`
	// Environment holds the GPUENV_VAR_<name> values of the variables the
	// spec declares, by name; other variables of the environment are not
	// kept.
	Environment map[string]string `json:"environment,omitempty"`
}

// SavedFile is one file of a saved spec. Spec files are UTF-8 (HCL reads
// nothing else), so the content is kept as text a reviewer can read.
type SavedFile struct {
	Name    string `json:"name"`
	Content string `json:"content"`
}

// SaveSpec returns the spec s as loaded from path with opts, to keep in a
// saved plan.
func SaveSpec(path string, s *spec.Spec, opts spec.LoadOptions) (SavedSpec, error) {
	ss := SavedSpec{Path: path}
	for _, f := range s.Sources.Files {
		if !utf8.Valid(f.Bytes) {
			return ss, fmt.Errorf("the spec file %s is not UTF-8", f.Name)
		}
		ss.Files = append(ss.Files, SavedFile{Name: f.Name, Content: string(f.Bytes)})
	}
	for _, f := range s.Sources.VarFiles {
		if !utf8.Valid(f.Bytes) {
			return ss, fmt.Errorf("the var file %s is not UTF-8", f.Name)
		}
		ss.VarFiles = append(ss.VarFiles, SavedFile{Name: f.Name, Content: string(f.Bytes)})
	}
	if len(opts.Vars) > 0 {
		ss.Vars = maps.Clone(opts.Vars)
	}
	for _, kv := range opts.Environ {
		name, value, _ := strings.Cut(strings.TrimPrefix(kv, spec.EnvPrefix), "=")
		if !strings.HasPrefix(kv, spec.EnvPrefix) || !slices.ContainsFunc(s.Variables, func(v *spec.Variable) bool { return v.Name == name }) {
			continue
		}
		if ss.Environment == nil {
			ss.Environment = map[string]string{}
		}
		// The last assignment wins, as in the loader.
		ss.Environment[name] = value
	}
	return ss, nil
}

// LoadOptions are the options that load the saved spec again, from its
// saved files and values alone.
func (ss *SavedSpec) LoadOptions() spec.LoadOptions {
	src := &spec.Sources{}
	for _, f := range ss.Files {
		src.Files = append(src.Files, spec.SourceFile{Name: f.Name, Bytes: []byte(f.Content)})
	}
	for _, f := range ss.VarFiles {
		src.VarFiles = append(src.VarFiles, spec.SourceFile{Name: f.Name, Bytes: []byte(f.Content)})
	}
	opts := spec.LoadOptions{Vars: ss.Vars, Saved: src}
	for _, name := range slices.Sorted(maps.Keys(ss.Environment)) {
		opts.Environ = append(opts.Environ, spec.EnvPrefix+name+"="+ss.Environment[name])
	}
	return opts
}

// validate refuses a saved spec that names no file, or one file twice.
func (f *PlannedFrom) validate() error {
	if len(f.Spec.Files) == 0 {
		return fmt.Errorf("planned_from holds no spec file")
	}
	seen := map[string]bool{}
	for _, list := range [][]SavedFile{f.Spec.Files, f.Spec.VarFiles} {
		for _, sf := range list {
			if sf.Name == "" || seen[sf.Name] {
				return fmt.Errorf("planned_from names the spec file %q twice or not at all", sf.Name)
			}
			seen[sf.Name] = true
		}
	}
	if !path.IsAbs(f.Root) || !path.IsAbs(f.StateDir) {
		return fmt.Errorf("planned_from's root %q and state_dir %q must be absolute paths", f.Root, f.StateDir)
	}
	return nil
}

// Save returns p as a saved plan, fingerprinted with obs, the observation
// it was made from, over the sections its steps' kinds depend on, and
// keeping from, the spec and flags it was made from. Only tests save a
// plan without them; apply refuses such a plan.
func Save(p *plan.Plan, obs *facts.Observation, from *PlannedFrom, kinds *Kinds) *SavedPlan {
	return &SavedPlan{Marker: SavedPlanMarker, Fingerprint: Fingerprint(p, obs, kinds), From: from, Plan: *p}
}

// WriteSavedPlan writes p, fingerprinted with obs and keeping from, as
// indented JSON.
func WriteSavedPlan(w io.Writer, p *plan.Plan, obs *facts.Observation, from *PlannedFrom, kinds *Kinds) error {
	b, err := json.MarshalIndent(Save(p, obs, from, kinds), "", "  ")
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

// MaxSavedPlan is the largest saved plan read: a plan with the spec it
// keeps is tens of kilobytes.
const MaxSavedPlan = 64 << 20

// ReadSavedPlan reads a saved plan, refusing a file that is not one, a
// layout or plan format this gpuenv does not know, and a plan whose
// operations are not well formed.
func ReadSavedPlan(r io.Reader) (*SavedPlan, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxSavedPlan+1))
	if err != nil {
		return nil, fmt.Errorf("reading the saved plan: %w", err)
	}
	if len(data) > MaxSavedPlan {
		return nil, fmt.Errorf("the saved plan is larger than %d MiB, which no plan gpuenv writes is", MaxSavedPlan>>20)
	}
	if !IsSavedPlan(data) {
		return nil, fmt.Errorf("not a saved plan: no %q marker", "gpuenv_saved_plan")
	}
	var sp SavedPlan
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&sp); err != nil {
		return nil, fmt.Errorf("reading the saved plan: %s", jsonProblem(err))
	}
	if sp.Marker == 1 {
		return nil, fmt.Errorf("saved plan layout 1 keeps no copy of the spec it was planned from, so this gpuenv cannot plan it again to check that it is what plan would say: make it again with gpuenv plan --out FILE")
	}
	if sp.Marker != SavedPlanMarker {
		return nil, fmt.Errorf("saved plan layout %d is not known to this gpuenv (it knows %d)", sp.Marker, SavedPlanMarker)
	}
	if err := plan.CheckFormatVersion(sp.FormatVersion); err != nil {
		return nil, fmt.Errorf("saved plan: %w", err)
	}
	if sp.Fingerprint.Algorithm != "sha256" || sp.Fingerprint.Digest == "" {
		return nil, fmt.Errorf("saved plan has no sha256 facts fingerprint")
	}
	if err := sp.Plan.Validate(); err != nil {
		return nil, fmt.Errorf("saved plan: %w", err)
	}
	if sp.From != nil {
		if err := sp.From.validate(); err != nil {
			return nil, fmt.Errorf("saved plan: %w", err)
		}
	}
	return &sp, nil
}

// jsonProblem says what a JSON decoder found wrong in a document in the
// document's own terms (the field, the kinds of value), not the Go
// types it was being read into.
func jsonProblem(err error) string {
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		field := te.Field
		if field == "" {
			field = "the document"
		} else {
			field = "the field " + strconv.Quote(field)
		}
		return fmt.Sprintf("%s holds a JSON %s where %s belongs (byte %d)", field, te.Value, jsonKind(te.Type), te.Offset)
	}
	if se, ok := errors.AsType[*json.SyntaxError](err); ok {
		return fmt.Sprintf("the JSON is malformed at byte %d", se.Offset)
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// jsonKind names the JSON value a Go type is read from.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number in range"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "another kind of value"
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
