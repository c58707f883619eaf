package planner

import (
	"slices"
	"testing"

	"github.com/gpuenv/gpuenv/planner/plan"
)

// Target keeps the targeted steps and every step they depend on,
// transitively, in plan order, and says what it left out.
func TestTarget(t *testing.T) {
	steps := []plan.Step{
		{Address: "repository.cuda"},
		{Address: "index.apt", DependsOn: []string{"repository.cuda"}},
		{Address: "driver", DependsOn: []string{"index.apt"}},
		{Address: "driver.hold", DependsOn: []string{"driver"}},
		{Address: "cuda", DependsOn: []string{"driver"}},
		{Address: "framework.pytorch"},
		{Address: "framework.pytorch[/opt/b]"},
		{Address: "group.video"},
	}
	for _, tc := range []struct {
		targets []string
		want    []string
	}{
		{[]string{"cuda"}, []string{"repository.cuda", "index.apt", "driver", "cuda"}},
		{[]string{"driver"}, []string{"repository.cuda", "index.apt", "driver", "driver.hold"}},
		{[]string{"framework"}, []string{"framework.pytorch", "framework.pytorch[/opt/b]"}},
		{[]string{"framework.pytorch"}, []string{"framework.pytorch", "framework.pytorch[/opt/b]"}},
		{[]string{"group.video", "group.render"}, []string{"group.video"}},
	} {
		got, w := Target(slices.Clone(steps), tc.targets)
		var addrs []string
		for _, s := range got {
			addrs = append(addrs, s.Address)
		}
		if !slices.Equal(addrs, tc.want) {
			t.Errorf("Target(%v) = %v, want %v", tc.targets, addrs, tc.want)
		}
		if len(w) != 1 || w[0].ID != TargetCheck {
			t.Errorf("Target(%v) warns %+v, want the targeting warning", tc.targets, w)
		}
	}
	_, w := Target(steps, []string{"group.video", "group.render"})
	if !slices.Contains(w[0].Evidence, "nothing to change at group.render") {
		t.Errorf("an unchanged target is not said: %v", w[0].Evidence)
	}
	if d := CheckTargets([]string{"driver", "framework.jax", "drvier", "", "group."}, stackKinds()); len(d) != 3 {
		t.Errorf("CheckTargets refused %d addresses, want 3: %v", len(d), d)
	}
}
