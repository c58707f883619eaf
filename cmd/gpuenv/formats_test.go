package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryJSONDocumentCarriesFormatVersion runs every command that
// prints JSON and holds its document, or its stream's first event, to
// the one table: "format_version" is there, with the table's version.
// A failure under --json is a JSON document on stdout too.
func TestEveryJSONDocumentCarriesFormatVersion(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	files := map[string]string{
		"root/etc/os-release": "ID=debian\nVERSION_ID=\"12\"\n",
		"root/etc/group":      "video:x:44:\nalice:x:1000:\n",
		"root/etc/passwd":     "alice:x:1000:1000::/home/alice:/bin/bash\n",
		"spec.hcl":            "group \"video\" {\n  members = [\"alice\"]\n}\n",
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	spec := filepath.Join(dir, "spec.hcl")
	saved := filepath.Join(dir, "t.plan")
	facts := filepath.Join(dir, "facts.json")
	versions := formatVersions()
	gpuenv := func(args ...string) []byte {
		var out, errb bytes.Buffer
		run(context.Background(), args, strings.NewReader(""), &out, &errb, nil)
		return out.Bytes()
	}
	if err := os.WriteFile(facts, gpuenv("--root", root, "observe", "--json"), 0o644); err != nil {
		t.Fatal(err)
	}
	gpuenv("--root", root, "plan", "--out", saved, spec)

	for _, tc := range []struct {
		format string
		args   []string
		stream bool
	}{
		{"plan", []string{"--root", root, "plan", "--json", spec}, false},
		{"plan", []string{"show", "--json", saved}, false},
		{"fleet-plan", []string{"plan", "--json", "--facts", facts, spec}, false},
		{"observation", []string{"--root", root, "observe", "--json"}, false},
		{"doctor", []string{"--root", root, "doctor", "--json"}, false},
		{"verify", []string{"--root", root, "verify", "--json"}, false},
		{"validate", []string{"validate", "--json", spec}, false},
		{"history", []string{"--root", root, "history", "--json"}, false},
		{"version", []string{"version", "--json"}, false},
		{"error", []string{"--root", root, "observe", "--json", "--python", "/etc"}, false},
		{"error", []string{"show", "--json", spec}, false},
		{"events", []string{"--root", root, "apply", "--json", "--auto-approve", spec}, true},
		{"events", []string{"--root", root, "rollback", "--json", "--auto-approve"}, true},
		{"refresh", []string{"--root", root, "plan", "--refresh-only", "--json"}, false},
	} {
		out := gpuenv(tc.args...)
		if tc.stream {
			line, _, _ := bufio.NewReader(bytes.NewReader(out)).ReadLine()
			out = line
		}
		var doc map[string]any
		if err := json.Unmarshal(out, &doc); err != nil {
			t.Errorf("gpuenv %s: not one JSON document (%v):\n%s", strings.Join(tc.args, " "), err, out)
			continue
		}
		if got := doc["format_version"]; got != versions[tc.format] {
			t.Errorf("gpuenv %s: format_version %v, want %s's %s", strings.Join(tc.args, " "), got, tc.format, versions[tc.format])
		}
	}
}
