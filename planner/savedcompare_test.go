package planner

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func sampleFrom() *PlannedFrom {
	return &PlannedFrom{
		Spec:     SavedSpec{Path: "gpuenv.hcl", Files: []SavedFile{{Name: "gpuenv.hcl", Content: "cuda {\n  version = \"12.4\"\n}\n"}}},
		Root:     "/",
		StateDir: "/var/lib/gpuenv",
	}
}

// TestCompareSaved edits a saved plan's file in the ways an editor can
// and wants the first difference named, with both values, as apply shows
// it; the file as written compares equal.
func TestCompareSaved(t *testing.T) {
	now := Save(samplePlan(), fingerprintFacts(), sampleFrom(), stackKinds())
	var buf bytes.Buffer
	if err := WriteSavedPlan(&buf, samplePlan(), fingerprintFacts(), sampleFrom(), stackKinds()); err != nil {
		t.Fatal(err)
	}
	if err := CompareSaved(buf.Bytes(), now); err != nil {
		t.Fatalf("the plan as written: %v", err)
	}
	op := func(m map[string]any, step, i int) map[string]any {
		return m["steps"].([]any)[step].(map[string]any)["operations"].([]any)[i].(map[string]any)
	}
	tests := []struct {
		name string
		edit func(m map[string]any)
		want string
	}{
		{"a file's content", func(m map[string]any) {
			f := op(m, 1, 0)["file"].(map[string]any)
			f["content"] = "blacklist nouveau\ninstall nvidia /bin/sh -c 'id > /tmp/pwned'\n"
		}, `step kernel.nouveau operation 1 file.content differs: saved "blacklist nouveau\ninstall nvidia /bin/sh -c 'id > /tmp/pwned…", planned now "blacklist nouveau\n"`},
		{"a file's path", func(m map[string]any) {
			op(m, 1, 0)["file"].(map[string]any)["path"] = "/etc/ld.so.conf.d/x.conf"
		}, `step kernel.nouveau operation 1 file.path differs: saved "/etc/ld.so.conf.d/x.conf", planned now "/etc/modprobe.d/gpuenv-nouveau.conf"`},
		{"a number written otherwise", func(m map[string]any) {
			op(m, 1, 0)["file"].(map[string]any)["mode"] = json.Number("420.0")
		}, `step kernel.nouveau operation 1 file.mode differs: saved 420.0, planned now 420`},
		{"an operation added", func(m map[string]any) {
			s := m["steps"].([]any)[1].(map[string]any)
			s["operations"] = append(s["operations"].([]any), map[string]any{"kind": "kernel", "kernel": map[string]any{"action": "load", "module": "evil"}})
		}, `step kernel.nouveau operation 3 differs: saved {"kernel":{"action":"load","module":"evil"},"kind":"kernel"}, planned now absent`},
		{"a member this gpuenv does not read", func(m map[string]any) {
			op(m, 1, 0)["file"].(map[string]any)["Content"] = "evil\n"
		}, `step kernel.nouveau operation 1 file.Content differs: saved "evil\n", planned now absent`},
		{"steps swapped", func(m map[string]any) {
			s := m["steps"].([]any)
			s[0], s[1] = s[1], s[0]
		}, `step 1 address differs: saved "kernel.nouveau", planned now "repository.cuda"`},
		{"a warning's text", func(m map[string]any) {
			m["warnings"] = append(m["warnings"].([]any), map[string]any{"summary": "All is well\x1b[2J"})
		}, `warning 2 differs: saved {"summary":"All is well\u001b[2J"}, planned now absent`},
		{"the saved spec", func(m map[string]any) {
			f := m["planned_from"].(map[string]any)["spec"].(map[string]any)["files"].([]any)[0].(map[string]any)
			f["content"] = "cuda {\n  version = \"11.8\"\n}\n"
		}, `planned_from.spec file 1 content differs: saved "cuda {\n  version = \"11.8\"\n}\n", planned now "cuda {\n  version = \"12.4\"\n}\n"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dec := json.NewDecoder(bytes.NewReader(buf.Bytes()))
			dec.UseNumber()
			var m map[string]any
			if err := dec.Decode(&m); err != nil {
				t.Fatal(err)
			}
			tt.edit(m)
			edited, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			err = CompareSaved(edited, now)
			d, ok := errors.AsType[*DiffersError](err)
			if !ok {
				t.Fatalf("CompareSaved = %v, want a *DiffersError", err)
			}
			if got := d.Path + " differs: saved " + d.Saved + ", planned now " + d.Now; got != tt.want {
				t.Errorf("difference:\n got %s\nwant %s", got, tt.want)
			}
			if strings.ContainsAny(d.Diagnostic().Detail, "\x1b\n") {
				t.Errorf("the message holds a control character: %q", d.Diagnostic().Detail)
			}
		})
	}
}

// TestSavedSpecLoadOptions: the values a saved spec keeps come back as
// load options that read nothing but the saved bytes, the environment's
// variables in name order.
func TestSavedSpecLoadOptions(t *testing.T) {
	ss := SavedSpec{
		Path:        "dir",
		Files:       []SavedFile{{Name: "dir/a.hcl", Content: "a"}},
		VarFiles:    []SavedFile{{Name: "prod.vars", Content: "b"}},
		Vars:        map[string]string{"x": "1"},
		Environment: map[string]string{"z": "3", "y": "2"},
	}
	opts := ss.LoadOptions()
	if opts.Saved == nil || len(opts.Saved.Files) != 1 || string(opts.Saved.Files[0].Bytes) != "a" || opts.Saved.VarFiles[0].Name != "prod.vars" {
		t.Errorf("saved sources: %+v", opts.Saved)
	}
	if len(opts.VarFiles) != 0 {
		t.Errorf("var files read from disk: %v", opts.VarFiles)
	}
	if got := strings.Join(opts.Environ, " "); got != "GPUENV_VAR_y=2 GPUENV_VAR_z=3" {
		t.Errorf("environment: %s", got)
	}
	if opts.Vars["x"] != "1" {
		t.Errorf("vars: %v", opts.Vars)
	}
}

// FuzzCompareSaved: whatever a saved plan file holds, comparing it ends
// with an answer, and only the file as written compares equal.
func FuzzCompareSaved(f *testing.F) {
	now := Save(samplePlan(), fingerprintFacts(), sampleFrom(), stackKinds())
	written, err := json.MarshalIndent(now, "", "  ")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(written)
	f.Add([]byte(`{"steps": [{"address": "driver", "operations": [[[[]]]]}]}`))
	f.Add([]byte(`{"gpuenv_saved_plan": 2.0}`))
	f.Add([]byte(`[]`))
	f.Add([]byte("{\"warnings\": [\"\\u009b2J\x7f\"]}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		err := CompareSaved(data, now)
		if err == nil && !json.Valid(data) {
			t.Fatalf("invalid JSON compares equal: %q", data)
		}
		if d, ok := errors.AsType[*DiffersError](err); ok {
			for _, s := range []string{d.Path, d.Saved, d.Now} {
				if strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r == 0x7f || r >= 0x80 && r < 0xa0 }) {
					t.Fatalf("the difference holds a control character: %q", s)
				}
			}
		}
	})
}
