package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers"
)

// goInternals are the marks of a Go error that reached a message
// unchanged: a package's name, a Go type, a temporary file's name.
var goInternals = regexp.MustCompile(`json: |strconv\.|Go (struct|value)|\*os\.|interface \{\}|map\[string\]|\.tmp[0-9]`)

// FuzzShowSavedPlan: whatever file show is handed as a plan, it prints
// the plan or returns one error that names the file and no Go internals,
// never both and never a panic; what it prints with --json is one JSON
// document, and the text ends with the command that applies the plan.
func FuzzShowSavedPlan(f *testing.F) {
	var buf bytes.Buffer
	from := &planner.PlannedFrom{Spec: planner.SavedSpec{Path: "spec.hcl", Files: []planner.SavedFile{{Name: "spec.hcl", Content: "group \"video\" {}\n"}}, Vars: map[string]string{"x": "it's"}},
		Root: "/srv/root dir", StateDir: "/var/lib/gpuenv", RootBoots: true}
	if err := planner.WriteSavedPlan(&buf, &plan.Plan{FormatVersion: plan.FormatVersion, Steps: []plan.Step{}}, &facts.Observation{}, from, providers.Kinds()); err != nil {
		f.Fatal(err)
	}
	whole := buf.Bytes()
	f.Add(whole)
	f.Add(whole[:len(whole)/2])
	f.Add([]byte(strings.Replace(string(whole), `"gpuenv_saved_plan": 2`, `"gpuenv_saved_plan": "2"`, 1)))
	f.Add([]byte(strings.Replace(string(whole), `"root_boots": true`, `"root_boots": 1e400`, 1)))
	for _, s := range []string{``, ` `, `{`, `{}`, `{"gpuenv_saved_plan":2}`, `{"format_version":"x"}`, "\x00\xff{"} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		name := filepath.Join(dir, "fuzz.plan")
		if err := os.WriteFile(name, data, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, asJSON := range []bool{false, true} {
			var out bytes.Buffer
			g := &globalOptions{Stdout: &out, Stderr: &out, JSON: asJSON}
			err := runShow(g, name)
			if err != nil {
				if out.Len() > 0 {
					t.Fatalf("show failed (%v) and printed:\n%s", err, out.Bytes())
				}
				if !strings.Contains(err.Error(), name) || goInternals.MatchString(err.Error()) {
					t.Fatalf("show's error does not name the file, or shows Go internals: %v", err)
				}
				continue
			}
			if asJSON {
				var doc map[string]any
				if err := json.Unmarshal(out.Bytes(), &doc); err != nil || doc["format_version"] == nil {
					t.Fatalf("show --json printed no plan document (%v):\n%s", err, out.Bytes())
				}
			} else if !strings.Contains(out.String(), "Apply exactly this plan with:\n    gpuenv ") {
				t.Fatalf("show printed no apply command:\n%s", out.Bytes())
			}
		}
	})
}
