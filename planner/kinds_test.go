package planner

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/planner/plan"
)

// Sections of the facts the stack's kinds are decided from, as the
// providers describe them; the planner's tests plan with this stack.
var (
	driverSections   = []string{FactsOS, FactsKernel, FactsPCI, FactsNVML, FactsDriver, FactsPackages}
	settingsSections = []string{FactsOS, FactsKernel, FactsPCI, FactsNVML, FactsDriver, FactsPackages, FactsInit, FactsUnits}
)

var stackSteps = map[string][]StepKind{
	"repository": {{Layer: LayerRepositories, Sections: []string{FactsOS, FactsPackages, FactsRepos, FactsRepoFiles}}},
	"kernel": {
		{Address: "kernel.headers", Layer: LayerKernelHeaders, Sections: driverSections},
		{Layer: LayerNouveau, Sections: driverSections},
	},
	"driver": {
		{Address: "driver", Layer: LayerDriver, Sections: driverSections},
		{Address: "driver.purge", Layer: LayerPurge, Sections: driverSections},
		{Address: "driver.hold", Layer: LayerHold, Sections: driverSections},
		{Layer: LayerDriverSettings, Sections: settingsSections},
	},
	"cuda":              {{Layer: LayerCUDA, Sections: []string{FactsOS, FactsPCI, FactsNVML, FactsDriver, FactsPackages, FactsCUDA}}},
	"cudnn":             {{Layer: LayerCuDNN, Sections: []string{FactsOS, FactsPackages, FactsCUDA, FactsCuDNN}}},
	"framework":         {{Layer: LayerFrameworks, Sections: []string{FactsOS, FactsPCI, FactsDriver, FactsPackages, FactsCUDA, FactsCuDNN, FactsPython}}},
	"group":             {{Layer: LayerGroups, Sections: []string{FactsGroups, FactsDeviceNodes}}},
	"environment":       {{Layer: LayerEnvironment, Sections: []string{FactsCUDA, FactsEnvironment, FactsInit}}},
	"device":            {{Layer: LayerDevices, Sections: []string{FactsPCI, FactsNVML, FactsDevices, FactsInit, FactsUnits}}},
	"container_toolkit": {{Layer: LayerContainers, Sections: []string{FactsOS, FactsDriver, FactsDeviceNodes, FactsPackages, FactsInit, FactsContainers}}},
}

// stackProviders are providers of every kind of the stack that names
// do not already have, planning nothing: they describe the stack's
// steps to a test planner whose providers make steps of other kinds.
func stackProviders(names ...string) []Provider {
	var out []Provider
	for _, name := range []string{"repository", "kernel", "driver", "cuda", "cudnn", "framework", "group", "environment", "device", "container_toolkit"} {
		if !contains(names, name) {
			out = append(out, &testProvider{name: name, PlanFn: respond(nil)})
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// stackKinds are the kinds of the whole stack.
func stackKinds() *Kinds { return NewKinds(stackProviders()...) }

func TestKindsLayer(t *testing.T) {
	k := stackKinds()
	if err := k.Err(); err != nil {
		t.Fatal(err)
	}
	for addr, want := range map[string]Layer{
		"repository.cuda":                 LayerRepositories,
		"index.apt":                       LayerIndexes,
		"driver.purge":                    LayerPurge,
		"kernel.nouveau":                  LayerNouveau,
		"kernel":                          LayerNouveau,
		"kernel.headers":                  LayerKernelHeaders,
		"driver":                          LayerDriver,
		"driver.hold":                     LayerHold,
		"driver.persistence":              LayerDriverSettings,
		"cuda":                            LayerCUDA,
		"cudnn":                           LayerCuDNN,
		"framework.pytorch":               LayerFrameworks,
		"group.video":                     LayerGroups,
		"environment":                     LayerEnvironment,
		"device.0":                        LayerDevices,
		"device.all":                      LayerDevices,
		"container_toolkit":               LayerContainers,
		"container_toolkit.cdi":           LayerContainers,
		"container_toolkit.engine.docker": LayerContainers,
		"something.else":                  LayerOther,
		"framework.jax[/opt]":             LayerFrameworks,
	} {
		if got := k.Layer(addr); got != want {
			t.Errorf("Layer(%q) = %v, want %v", addr, got, want)
		}
		if got := k.Known(addr); got != (want != LayerOther) {
			t.Errorf("Known(%q) = %v", addr, got)
		}
	}
	if diff := cmp.Diff(settingsSections, k.Sections("driver.fabricmanager")); diff != "" {
		t.Errorf("sections of driver.fabricmanager (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(allSections, k.Sections("index.apt")); diff != "" {
		t.Errorf("sections of index.apt (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(allSections, k.Sections("something.else")); diff != "" {
		t.Errorf("sections of an unknown kind (-want +got):\n%s", diff)
	}
}

// TestKindsRefuseBadDescriptions: a kind the planner cannot place its
// steps by is a programming error, which planning reports rather than
// ordering or fingerprinting by a guess.
func TestKindsRefuseBadDescriptions(t *testing.T) {
	for _, tt := range []struct {
		name  string
		provs []Provider
		want  string
	}{
		{"two providers of a kind", []Provider{&testProvider{name: "cuda"}, &testProvider{name: "cuda"}}, `two providers are of the kind "cuda"`},
		{"two providers of a kind that describe nothing", []Provider{&testProvider{name: "x", steps: []StepKind{}}, &testProvider{name: "x", steps: []StepKind{}}}, `two providers are of the kind "x"`},
		{"the planner's own kind", []Provider{&testProvider{name: "index"}}, `two providers are of the kind "index"`},
		{"an address of another kind", []Provider{&testProvider{name: "cuda", steps: []StepKind{{Layer: LayerCUDA}, {Address: "cudnn", Layer: LayerCuDNN}}}}, `describes the address "cudnn", which is not of its kind`},
		{"an address twice", []Provider{&testProvider{name: "cuda", steps: []StepKind{{Layer: LayerCUDA}, {Layer: LayerCUDA}}}}, `describes the address "" twice`},
		{"no layer", []Provider{&testProvider{name: "cuda", steps: []StepKind{{Address: "cuda"}}}}, `places "cuda" in no layer`},
		{"no addresses", []Provider{&testProvider{name: "cuda", steps: []StepKind{}}}, `describes neither`},
		{"a dotted name", []Provider{&testProvider{name: "a.b"}}, `is not a word of an address`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := NewKinds(tt.provs...).Err()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Err() = %v, want one saying %q", err, tt.want)
			}
			pl := New(tt.provs...)
			pl.Resolve = nil
			if p, diags := pl.Plan(context.Background(), nil, nil); p != nil || !diags.HasErrors() || !strings.Contains(diags[0].Detail, tt.want) {
				t.Fatalf("planned %v, %v", p, diags)
			}
		})
	}
}

// TestPlannerRefusesStepOfNoKind: a step whose address no provider
// describes is a bug, not a step of the last layer that every fact
// fingerprints.
func TestPlannerRefusesStepOfNoKind(t *testing.T) {
	prov := &testProvider{name: "cuda", PlanFn: respond(&Response{Steps: []plan.Step{{Address: "cudaa", Action: plan.Create, ReasonCode: plan.ReasonMissing}}})}
	p, diags := newTestPlanner(prov).Plan(context.Background(), nil, nil)
	if p != nil || !diags.HasErrors() || !strings.Contains(diags[0].Detail, `the cuda provider made the step "cudaa", of no kind the planner knows`) {
		t.Fatalf("planned %v, %v", p, diags)
	}
}
