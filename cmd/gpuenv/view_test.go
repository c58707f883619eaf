package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpuenv/gpuenv/apply"
)

// Each command's view is chosen once, from --json.
func TestViewsChosenByJSONFlag(t *testing.T) {
	for _, json := range []bool{false, true} {
		g := &globalOptions{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}, JSON: json}
		for _, tt := range []struct {
			view   any
			isJSON bool
		}{
			{newPlanView(g), is[*planJSON](newPlanView(g))},
			{newValidateView(g), is[*validateJSON](newValidateView(g))},
			{newHistoryView(g), is[*historyJSON](newHistoryView(g))},
			{newVersionView(g), is[*versionJSON](newVersionView(g))},
		} {
			if tt.isJSON != json {
				t.Errorf("--json=%v: the view is %T", json, tt.view)
			}
		}
	}
}

func is[T any](v any) bool {
	_, ok := v.(T)
	return ok
}

// The human views report a closed stdout instead of ignoring it.
func TestHumanViewsReportWriteErrors(t *testing.T) {
	gens := []apply.Meta{
		{ID: 1, Started: time.Unix(0, 0), Kind: "apply", Status: "succeeded", Summary: "installed the driver"},
		{ID: 2, Status: apply.StatusDamaged, Damaged: "meta.json is missing"},
	}
	for name, write := range map[string]func(g *globalOptions) error{
		"plan saved":     func(g *globalOptions) error { return newPlanView(g).Saved("tonight.plan", nil) },
		"validate valid": func(g *globalOptions) error { return newValidateView(g).Valid(false) },
		"history pruned": func(g *globalOptions) error { return newHistoryView(g).Pruned(&apply.Pruned{}) },
		"history table":  func(g *globalOptions) error { return newHistoryView(g).Generations(gens) },
		"history none":   func(g *globalOptions) error { return newHistoryView(g).Generations(nil) },
		"history untrusted": func(g *globalOptions) error {
			return newHistoryView(g).Untrusted([]error{errors.New("mode 0777")}, true)
		},
		"version": func(g *globalOptions) error { return newVersionView(g).Version(buildVersion()) },
		"validate diagnostic": func(g *globalOptions) error {
			return newValidateView(g).Diagnostics(nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Broken"}})
		},
	} {
		g := &globalOptions{Stdout: &failingWriter{}, Stderr: &failingWriter{}, NoColor: true}
		if err := write(g); err == nil || !strings.Contains(err.Error(), "broken pipe") {
			t.Errorf("%s into a closed pipe: %v", name, err)
		}
		g = &globalOptions{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}, NoColor: true}
		if err := write(g); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
