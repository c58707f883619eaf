package doctor_test

import (
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner/doctor"
	"github.com/gpuenv/gpuenv/planner/facts"
)

// TestVLLMVisibleUUIDs: vLLM up to 0.20.1 stops on any GPU UUID in
// CUDA_VISIBLE_DEVICES; a later one only on a shortened UUID; indexes
// never matter.
func TestVLLMVisibleUUIDs(t *testing.T) {
	const full = "GPU-551720f0-caf0-22b7-f525-2a51a6ab478d"
	vllm := func(v string) func(*testing.T, string) {
		return writeFile("opt/venv/lib/python3.10/site-packages/vllm-"+v+".dist-info/METADATA", "Metadata-Version: 2.4\nName: vllm\nVersion: "+v+"\n")
	}
	for _, tc := range []struct {
		name, vllm, visible string
		want                doctor.Status
		summary             string
	}{
		{"old release, full UUID", "0.9.2", full, doctor.Problem, "reads as integers"},
		{"old release, MIG UUID", "0.20.1", "MIG-377e0049-554c-540b-93c6-d0976f8426cb", doctor.Problem, "invalid literal for int()"},
		{"old release, indexes", "0.9.2", "0,1", "", ""},
		{"newer release, full UUID", "0.21.0", full, "", ""},
		{"newer release, short UUID", "0.21.0", "GPU-551720f0", doctor.Problem, "shortened UUID"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := machine{fixture: "ubuntu2204-working", pythons: []string{"/opt/venv/bin/python"}, change: vllm(tc.vllm),
				session: []facts.Assignment{{Name: "CUDA_VISIBLE_DEVICES", Value: tc.visible, File: "/proc/4242/environ"}}}.report(t)
			var got *doctor.Check
			for i, c := range r.Checks {
				if c.ID == "env.visible-devices-uuid:/opt/venv/bin/python:vllm" {
					got = &r.Checks[i]
				}
			}
			if tc.want == "" {
				if got != nil {
					t.Fatalf("unexpected finding: %s: %s", got.Status, got.Summary)
				}
				return
			}
			if got == nil {
				t.Fatal("no env.visible-devices-uuid finding for vllm")
			}
			if got.Status != tc.want || !strings.Contains(got.Summary, tc.summary) || got.Fix == nil {
				t.Errorf("%s: %s (fix %v)", got.Status, got.Summary, got.Fix)
			}
		})
	}
}
