package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner/fleet"
)

// TestPlanFactsJSON: plan --facts --json is one JSON document however it
// is streamed: its rows, in input order, and a summary that counts them;
// with an invalid spec, the diagnostics and no hosts.
func TestPlanFactsJSON(t *testing.T) {
	dir := t.TempDir()
	doc := func(name, members string) {
		data := `{"schema_version":1,"schema_minor":1,"hostname":"` + name + `","os":{"id":"debian","version_id":"12","family":"deb"},` +
			`"groups":[{"name":"video","gid":44,"members":[` + members + `]}],"repositories":[],"init":{},"repository_files":{},"units":[],` +
			`"package_indexes":{"indexes":[],"packages":[]},"context":{},"loader":{},"containers":{}}`
		if err := os.WriteFile(filepath.Join(dir, name+".json"), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	doc("n1", `"alice"`)
	doc("n2", ``)
	doc("n3", `"bob"`)
	os.WriteFile(filepath.Join(dir, "n4.json"), []byte(`{"schema_version":3}`), 0o644)
	specs := t.TempDir()
	good := filepath.Join(specs, "good.hcl")
	os.WriteFile(good, []byte("group \"video\" {\n  members = [\"alice\"]\n}\n"), 0o644)
	bad := filepath.Join(specs, "bad.hcl")
	os.WriteFile(bad, []byte("group \"video\" {\n  members = 7\n}\n"), 0o644)

	type document struct {
		FormatVersion string         `json:"format_version"`
		Errored       bool           `json:"errored"`
		SpecDigest    string         `json:"spec_digest"`
		Diagnostics   []any          `json:"diagnostics"`
		Hosts         []fleet.Host   `json:"hosts"`
		Summary       *fleet.Summary `json:"summary"`
	}
	planFacts := func(specPath string) (int, document, string) {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), []string{"plan", "--json", "--facts", dir, specPath}, strings.NewReader(""), &stdout, &stderr, nil)
		var d document
		dec := json.NewDecoder(&stdout)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&d); err != nil {
			t.Fatalf("not one JSON document: %v\n%s", err, stdout.String())
		}
		return code, d, stderr.String()
	}

	code, d, stderr := planFacts(good)
	var names, outcomes []string
	for _, h := range d.Hosts {
		names = append(names, h.Name)
		outcomes = append(outcomes, h.Outcome.String())
	}
	if code != exitError || d.Errored || d.FormatVersion != fleet.FormatVersion || stderr != "" ||
		strings.Join(names, " ") != "n1 n2 n3 n4" || strings.Join(outcomes, " ") != "unchanged change change refused" {
		t.Errorf("exit %d, errored %v, hosts %q %q, stderr %q", code, d.Errored, names, outcomes, stderr)
	}
	if s := d.Summary; s == nil || s.Hosts != 4 || s.Unchanged != 1 || s.Change != 2 || s.Refused != 1 ||
		len(s.Refusals) != 1 || s.Refusals[0].Key != fleet.ReasonSchema || !strings.Contains(s.Refusals[0].Error, "n4.json: the document's schema_version is 3, and this gpuenv reads schema_version 1 only") {
		t.Errorf("summary %+v", d.Summary)
	}

	code, d, _ = planFacts(bad)
	if code != exitError || !d.Errored || len(d.Diagnostics) == 0 || len(d.Hosts) != 0 || d.Summary != nil {
		t.Errorf("invalid spec: exit %d, %+v", code, d)
	}
}
