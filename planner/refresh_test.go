package planner

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/spec"
)

// A version known after apply is written as null and says so; a known
// one as its text. Format 1.1's empty version reads as known after apply,
// and a pin that claims both is refused.
func TestPinJSON(t *testing.T) {
	for _, tc := range []struct {
		pin  plan.PackagePin
		json string
	}{
		{plan.PackagePin{Name: "nvidia-smi", Constraint: "535.*"}, `{"name":"nvidia-smi","version":null,"known_after_apply":true,"constraint":"535.*"}`},
		{plan.PackagePin{Name: "nvidia-smi", Version: "535.261.03-1"}, `{"name":"nvidia-smi","version":"535.261.03-1"}`},
		{plan.PackagePin{Name: "torch", Version: "2.5.1", Extras: []string{"x"}}, `{"name":"torch","version":"2.5.1","extras":["x"]}`},
	} {
		b, err := json.Marshal(tc.pin)
		if err != nil || string(b) != tc.json {
			t.Errorf("%+v encodes as %s (%v), want %s", tc.pin, b, err, tc.json)
		}
		var back plan.PackagePin
		if err := json.Unmarshal(b, &back); err != nil || !cmp.Equal(back, tc.pin) {
			t.Errorf("%s decodes as %+v (%v)", b, back, err)
		}
	}
	var old plan.PackagePin
	if err := json.Unmarshal([]byte(`{"name":"cuda-toolkit-12-4","version":"","constraint":"12.4"}`), &old); err != nil || !old.KnownAfterApply() || old.Constraint != "12.4" {
		t.Errorf("format 1.1's pin reads as %+v, %v", old, err)
	}
	var both plan.PackagePin
	if err := json.Unmarshal([]byte(`{"name":"x","version":"1.0","known_after_apply":true}`), &both); err == nil {
		t.Error("a pin with a version and known_after_apply was accepted")
	}
}

// noIndexes are the facts of an image root before its first apt-get
// update: two sources configured, no list on disk.
func noIndexes() *facts.Observation {
	obs := fingerprintFacts()
	obs.PackageIndexes = facts.PackageIndexes{Manager: "apt", Indexes: []facts.PackageIndex{}, Missing: []facts.IndexSource{
		{File: "/etc/apt/sources.list", URI: "http://deb.debian.org/debian", Suite: "bookworm", Component: "main"},
		{File: "/etc/apt/sources.list", URI: "http://deb.debian.org/debian", Suite: "bookworm", Component: "non-free"},
	}}
	return obs
}

// deferredDriver is a driver step whose pins are known after apply.
func deferredDriver() plan.Step {
	return plan.Step{Address: "driver", Action: plan.Create, ReasonCode: plan.ReasonMissing, Reason: "r",
		After:      map[string]string{"version": plan.KnownAfterApply, "packages": "nvidia-smi, libcuda1"},
		Operations: []plan.Operation{pkgOp(plan.PackagesOp{Manager: "apt", Install: []plan.PackagePin{{Name: "nvidia-smi", Constraint: "535.*"}, {Name: "libcuda1", Constraint: "535.*"}}})}}
}

// A plan whose versions are known after apply fetches the indexes first,
// in a step of its own that the steps installing them wait for — unless
// a step of the plan runs apt-get update already, or no version waits.
func TestRefreshStepFirst(t *testing.T) {
	repo := plan.Step{Address: "repository.cuda", Action: plan.Create, ReasonCode: plan.ReasonMissing, After: map[string]string{"url": "u"},
		Operations: []plan.Operation{{Kind: plan.OpFile, File: &plan.FileOp{Path: "/etc/apt/sources.list.d/gpuenv-cuda.sources", Content: "x\n", Mode: 0o644, After: []string{"apt-get", "update"}}}}}
	known := plan.Step{Address: "cuda", Action: plan.Create, ReasonCode: plan.ReasonMissing, After: map[string]string{"version": "12.4.1", "package": "cuda-toolkit-12-4=12.4.1-1"},
		Operations: []plan.Operation{aptOp("cuda-toolkit-12-4", "12.4.1-1")}}
	for _, tc := range []struct {
		name    string
		steps   []plan.Step
		refresh bool
	}{
		{"versions known after apply", []plan.Step{deferredDriver(), known}, true},
		{"a repository step runs apt-get update", []plan.Step{repo, deferredDriver()}, false},
		{"every version known", []plan.Step{known}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prov := &testProvider{name: "p", PlanFn: func(context.Context, *Request) *Response { return &Response{Steps: slices.Clone(tc.steps)} }}
			p, diags := newTestPlanner(prov).Plan(context.Background(), &spec.Spec{}, noIndexes())
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			st := p.Step("index.apt")
			if !tc.refresh {
				if st != nil {
					t.Fatalf("a refresh is planned: %+v", st)
				}
				return
			}
			if st == nil || p.Steps[0].Address != "index.apt" {
				t.Fatalf("steps %v: want index.apt first", addressesOf(p))
			}
			if len(st.Operations) != 1 || st.Operations[0].Refresh == nil || st.Operations[0].Refresh.Manager != plan.ManagerApt || st.Action != plan.Update || st.ReasonCode != plan.ReasonDependency {
				t.Errorf("refresh step %+v", st)
			}
			for _, want := range []string{"apt-get update has not run for the 2 configured sources", "http://deb.debian.org/debian bookworm non-free", "the versions driver installs are known after apply", "rollback does not restore"} {
				if !strings.Contains(st.Reason, want) {
					t.Errorf("reason %q lacks %q", st.Reason, want)
				}
			}
			if d := p.Step("driver"); d == nil || !slices.Contains(d.DependsOn, "index.apt") {
				t.Errorf("the driver does not wait for the refresh: %+v", d)
			}
			if c := p.Step("cuda"); c == nil || slices.Contains(c.DependsOn, "index.apt") {
				t.Errorf("a step whose versions are known waits for the refresh: %+v", c)
			}
			if p.Steps[1].Operations[0].Transaction != 1 || len(p.Transactions) != 1 {
				t.Errorf("the refresh is part of a transaction: %+v", p.Transactions)
			}
			// The plan file carries it as the planner made it.
			roundTrip(t, p)
		})
	}
}

func addressesOf(p *plan.Plan) []string {
	var out []string
	for _, s := range p.Steps {
		out = append(out, s.Address)
	}
	return out
}

// A refresh names apt or dnf, which have indexes; pip has none.
func TestCheckRefresh(t *testing.T) {
	for m, ok := range map[plan.Manager]bool{plan.ManagerApt: true, plan.ManagerDnf: true, plan.ManagerPip: false, "zypper": false} {
		err := plan.CheckOperation(plan.Operation{Kind: plan.OpRefresh, Refresh: &plan.RefreshOp{Manager: m}})
		if ok != (err == nil) {
			t.Errorf("refresh of %s: %v", m, err)
		}
	}
	if err := plan.CheckOperation(plan.Operation{Kind: plan.OpRefresh}); err == nil {
		t.Error("a refresh without its field was accepted")
	}
}
