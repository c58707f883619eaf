package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner/fleet"
)

// TestPlanFactsJSON: plan --facts --json is one JSON document however it
// is streamed: the groups of hosts that plan alike, with --hosts the
// rows, in input order, each naming its group, and a summary that counts
// them; with an invalid spec, the diagnostics and no hosts.
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
		FormatVersion string             `json:"format_version"`
		Errored       bool               `json:"errored"`
		SpecDigest    string             `json:"spec_digest"`
		Diagnostics   []any              `json:"diagnostics"`
		Groups        []*fleet.PlanGroup `json:"groups"`
		Hosts         []fleet.Host       `json:"hosts"`
		Summary       *fleet.Summary     `json:"summary"`
	}
	planFacts := func(specPath string, more ...string) (int, document, string) {
		var stdout, stderr bytes.Buffer
		args := append([]string{"plan", "--json", "--facts", dir, specPath}, more...)
		code := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr, nil)
		var d document
		dec := json.NewDecoder(&stdout)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&d); err != nil {
			t.Fatalf("not one JSON document: %v\n%s", err, stdout.String())
		}
		return code, d, stderr.String()
	}

	code, d, stderr := planFacts(good, "--hosts", "--canaries", "1")
	var names, outcomes []string
	for _, h := range d.Hosts {
		names = append(names, h.Name)
		outcomes = append(outcomes, fmt.Sprintf("%s#%d", h.Outcome, h.Group))
	}
	// n2 and n3 differ in a fact, the group's members, and plan alike:
	// one group.
	if code != exitError || d.Errored || d.FormatVersion != fleet.FormatVersion || stderr != "" ||
		strings.Join(names, " ") != "n1 n2 n3 n4" || strings.Join(outcomes, " ") != "unchanged#1 change#2 change#2 refused#3" {
		t.Errorf("exit %d, errored %v, hosts %q %q, stderr %q", code, d.Errored, names, outcomes, stderr)
	}
	var groups []string
	for _, g := range d.Groups {
		groups = append(groups, fmt.Sprintf("#%d %s %d %q %q", g.ID, g.Outcome, g.Hosts, g.First, g.Canaries))
	}
	if want := []string{`#2 change 2 ["n2" "n3"] ["n2"]`, `#1 unchanged 1 ["n1"] ["n1"]`, `#3 refused 1 ["n4"] ["n4"]`}; !slices.Equal(groups, want) {
		t.Errorf("groups %q, want %q", groups, want)
	}
	_, d, _ = planFacts(good)
	if len(d.Hosts) != 0 || len(d.Groups) != 3 || d.Summary == nil || d.Summary.Hosts != 4 {
		t.Errorf("without --hosts: %d rows, %d groups", len(d.Hosts), len(d.Groups))
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
