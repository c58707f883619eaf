package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpuenv/gpuenv/apply"
	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/providers"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
	"github.com/gpuenv/gpuenv/spec"
)

// TestEveryPlanPassesTheRules plans every example spec (and the converged
// spec) against every fixture root, the working DGX also with go-nvml's
// DGX H100 mock, and holds each plan to the rules a saved plan read back
// is held to: Plan.Validate, the same after a round trip through a saved
// plan file, and apply's own check. The planner's output must pass what
// it asks of an edited plan file.
func TestEveryPlanPassesTheRules(t *testing.T) {
	specs, err := filepath.Glob(filepath.Join("..", "..", "examples", "*"))
	if err != nil {
		t.Fatal(err)
	}
	specs = append(specs, filepath.Join("testdata", "plan", "ubuntu2204-working", "converged.hcl"))
	entries, err := os.ReadDir(filepath.Join(repoTestdata(), "roots"))
	if err != nil {
		t.Fatal(err)
	}
	var roots []string
	for _, e := range entries {
		if e.IsDir() {
			roots = append(roots, e.Name())
		}
	}
	roots = append(roots, "ubuntu2204-working+dgxh100")
	planned := 0
	for _, name := range roots {
		t.Run(name, func(t *testing.T) {
			fixture, mock, _ := cutPlus(name)
			root := hosttest.Build(t, fixture)
			h, err := host.New(root, host.WithRunner(runnerFor(t, fixture)))
			if err != nil {
				t.Fatal(err)
			}
			for _, sp := range specs {
				opts := spec.LoadOptions{}
				if filepath.Base(sp) == "variables" {
					opts.VarFiles = []string{filepath.Join(sp, "cuda-12.6.vars")}
				}
				s, diags := spec.Load(sp, opts)
				if diags.HasErrors() {
					t.Fatalf("%s: %s", sp, diags.Error())
				}
				oo := providers.ObserveOptions{Pythons: pythonsToObserve(s, nil)}
				if mock != "" {
					oo.NVML = host.NewNVML(hosttest.NVMLServer(mock))
				}
				obs := providers.Observe(context.Background(), h, oo)
				pl := planner.New(providers.Planners()...)
				pl.Candidates = loadCandidates(t, fixture)
				p, diags := pl.Plan(context.Background(), s, obs)
				for _, d := range diags {
					if d.Summary == "Invalid plan" {
						t.Errorf("%s: %s", sp, d.Detail)
					}
				}
				if p == nil {
					// The spec does not fit this machine (a diagnostic
					// says why); there is no plan to hold to the rules.
					continue
				}
				planned++
				if err := p.Validate(); err != nil {
					t.Errorf("%s: %v", sp, err)
				}
				if err := apply.ValidatePlan(p); err != nil {
					t.Errorf("%s: apply refuses it: %v", sp, err)
				}
				ss, err := planner.SaveSpec(sp, s, opts)
				if err != nil {
					t.Fatal(err)
				}
				from := &planner.PlannedFrom{Spec: ss, Root: root, StateDir: defaultStateDir}
				var buf bytes.Buffer
				if err := planner.WriteSavedPlan(&buf, p, obs, from, providers.Kinds()); err != nil {
					t.Fatal(err)
				}
				saved := bytes.Clone(buf.Bytes())
				read, err := planner.ReadSavedPlan(&buf)
				if err != nil {
					t.Errorf("%s: saved, it reads back as %v", sp, err)
					continue
				}
				// Planned again from the spec it keeps, on the same
				// facts, the plan is the same, so apply takes it.
				s2, diags := spec.Load("elsewhere", read.From.Spec.LoadOptions())
				if diags.HasErrors() {
					t.Fatalf("%s: the saved spec: %s", sp, diags.Error())
				}
				p2, _ := pl.Plan(context.Background(), s2, obs)
				if err := planner.CompareSaved(saved, planner.Save(p2, obs, read.From, providers.Kinds())); err != nil {
					t.Errorf("%s: planned again from its saved spec: %v", sp, err)
				}
			}
		})
	}
	if planned < 20 {
		t.Errorf("only %d of the plans were made; the test holds too few to the rules", planned)
	}
}

func cutPlus(name string) (fixture, mock string, ok bool) {
	for i := range name {
		if name[i] == '+' {
			return name[:i], name[i+1:], true
		}
	}
	return name, "", false
}
