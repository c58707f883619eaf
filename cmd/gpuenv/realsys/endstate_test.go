//go:build realsystem

package realsys

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers"
)

// applyPredicted plans the spec at dir, applies it with the root's own
// tools, and returns the end state plan predicted for its steps (what
// plan judges doctor's rules on) with what observe sees once apply is
// done, for the caller to hold one to the other.
func (r *Root) applyPredicted(dir string) (p *plan.Plan, predicted, after *facts.Observation) {
	r.t.Helper()
	before := r.Observe()
	res := r.Gpuenv("plan", "--json", dir)
	p = new(plan.Plan)
	if res.Code != 0 || json.Unmarshal([]byte(res.Stdout), p) != nil {
		r.t.Fatalf("plan --json: %s", res)
	}
	if res := r.Gpuenv("apply", "--auto-approve", dir); res.Code != 0 {
		r.t.Fatalf("apply: %s", res)
	}
	return p, providers.EndState(before, p.Steps), r.Observe()
}

// checkPredictedPackages holds the predicted package database to the
// observed one for every package the plan's system transactions name:
// installed at the pinned version where the plan knew it, gone where it
// removes it.
func checkPredictedPackages(t *testing.T, p *plan.Plan, predicted, after *facts.Observation) {
	t.Helper()
	find := func(o *facts.Observation, name string) (facts.Package, bool) {
		i := slices.IndexFunc(o.Packages.Packages, func(q facts.Package) bool { return q.Name == name })
		if i < 0 {
			return facts.Package{}, false
		}
		return o.Packages.Packages[i], true
	}
	named := 0
	for _, s := range p.Steps {
		for _, op := range s.Operations {
			po := op.Packages
			if po == nil || po.Manager == plan.ManagerPip {
				continue
			}
			for _, pin := range po.Install {
				want, wok := find(predicted, pin.Name)
				got, gok := find(after, pin.Name)
				if wok != gok || wok && want.Version != "" && want.Version != got.Version {
					t.Errorf("%s: predicted %+v (listed %v), observed after apply %+v (listed %v)", pin.Name, want, wok, got, gok)
				}
				if wok && want.Hold != got.Hold {
					t.Errorf("%s: predicted hold %v, observed %v", pin.Name, want.Hold, got.Hold)
				}
				named++
			}
			for _, name := range po.Remove {
				if _, ok := find(after, name); ok {
					t.Errorf("%s: predicted removed, observed installed", name)
				}
				named++
			}
		}
	}
	if named == 0 {
		t.Error("the plan names no package: nothing predicted was checked")
	}
}

// checkPredictedGroups holds the predicted groups to those observed.
func checkPredictedGroups(t *testing.T, predicted, after *facts.Observation) {
	t.Helper()
	type group struct {
		GID     uint32
		Members []string
	}
	index := func(o *facts.Observation) map[string]group {
		m := map[string]group{}
		for _, g := range o.Groups {
			m[g.Name] = group{g.GID, g.Members}
		}
		return m
	}
	if diff := cmp.Diff(index(predicted), index(after)); diff != "" {
		t.Errorf("the groups plan predicted differ from those observed after apply (-predicted +observed):\n%s", diff)
	}
}

// checkPredictedContainers holds the predicted engines, toolkit, CDI
// spec in use and /dev/char links to those observed.
func checkPredictedContainers(t *testing.T, predicted, after *facts.Observation) {
	t.Helper()
	pc, ac := predicted.Containers, after.Containers
	type engine struct {
		Exists, NVIDIARuntime bool
		DefaultRuntime        string
		SHA256                string
		Error                 string
	}
	engines := func(c facts.Containers) map[string]engine {
		m := map[string]engine{}
		for _, e := range c.Engines {
			m[e.Engine] = engine{e.Exists, e.NVIDIARuntime, e.DefaultRuntime, e.SHA256, e.Error}
		}
		return m
	}
	if diff := cmp.Diff(engines(pc), engines(ac)); diff != "" {
		t.Errorf("the engines plan predicted differ from those observed after apply (-predicted +observed):\n%s", diff)
	}
	if pc.Toolkit.Version != plan.KnownAfterApply && pc.Toolkit.Version != ac.Toolkit.Version {
		t.Errorf("toolkit predicted %q, observed %q", pc.Toolkit.Version, ac.Toolkit.Version)
	}
	if pc.CDIInUse != ac.CDIInUse || pc.DriverVersion != ac.DriverVersion {
		t.Errorf("CDI spec in use predicted %q for driver %q, observed %q for driver %q", pc.CDIInUse, pc.DriverVersion, ac.CDIInUse, ac.DriverVersion)
	}
	if diff := cmp.Diff(predicted.DeviceAccess.MissingCharLinks, after.DeviceAccess.MissingCharLinks); diff != "" {
		t.Errorf("the nodes without /dev/char links plan predicted differ from those observed after apply (-predicted +observed):\n%s", diff)
	}
	for _, s := range ac.CDISpecs {
		if s.Path == ac.CDIInUse && pc.DriverVersion != "" && s.DriverVersion != pc.DriverVersion {
			t.Errorf("%s names driver %q, predicted %q", s.Path, s.DriverVersion, pc.DriverVersion)
		}
	}
}
