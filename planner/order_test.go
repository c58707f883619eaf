package planner

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/planner/plan"
)

func addresses(steps []plan.Step) []string {
	out := make([]string, len(steps))
	for i, s := range steps {
		out[i] = s.Address
	}
	return out
}

func step(addr string, deps ...string) plan.Step {
	return plan.Step{Address: addr, Action: plan.Create, DependsOn: deps}
}

func TestOrder(t *testing.T) {
	tests := []struct {
		name  string
		steps []plan.Step
		want  []string
	}{
		{
			name: "the stack's layers, without dependencies",
			steps: []plan.Step{
				step("framework.pytorch"), step("cudnn"), step("cuda"), step("driver.hold"),
				step("driver"), step("kernel.headers"), step("kernel.nouveau"), step("driver.purge"),
				step("repository.cuda"), step("environment"), step("group.video"), step("device.all"),
				step("driver.persistence"), step("zzz.unknown"),
			},
			want: []string{
				"repository.cuda", "driver.purge", "kernel.nouveau", "kernel.headers", "driver",
				"driver.hold", "cuda", "cudnn", "framework.pytorch",
				"group.video", "environment", "driver.persistence", "device.all", "zzz.unknown",
			},
		},
		{
			name:  "ties within a layer by address",
			steps: []plan.Step{step("group.video"), step("group.render"), step("repository.z"), step("repository.a")},
			want:  []string{"repository.a", "repository.z", "group.render", "group.video"},
		},
		{
			// Layers only break ties: cuda depends on nothing, so it is free
			// to go before a group the driver waits for.
			name: "a dependency overrides the layers",
			steps: []plan.Step{
				step("cuda"), step("driver", "group.video"), step("group.video"), step("repository.cuda"),
			},
			want: []string{"repository.cuda", "cuda", "group.video", "driver"},
		},
		{
			name: "dependencies on steps not in the plan are met",
			steps: []plan.Step{
				step("cuda", "driver"), step("framework.pytorch", "cuda", "cudnn"),
			},
			want: []string{"cuda", "framework.pytorch"},
		},
		{
			name: "a chain across layers",
			steps: []plan.Step{
				step("device.0", "driver"), step("driver", "repository.cuda"), step("repository.cuda"),
				step("environment", "cuda"), step("cuda", "driver"),
			},
			want: []string{"repository.cuda", "driver", "cuda", "environment", "device.0"},
		},
		{
			name:  "repeated dependencies count once",
			steps: []plan.Step{step("cuda", "driver", "driver"), step("driver")},
			want:  []string{"driver", "cuda"},
		},
		{name: "nothing", steps: nil, want: []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The order must not depend on the order providers returned
			// their steps in.
			r := rand.New(rand.NewPCG(1, 2))
			for range 20 {
				in := slices.Clone(tt.steps)
				r.Shuffle(len(in), func(i, j int) { in[i], in[j] = in[j], in[i] })
				got, err := Order(in, stackKinds())
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tt.want, addresses(got)); diff != "" {
					t.Fatalf("order (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestOrderCycle(t *testing.T) {
	tests := []struct {
		steps []plan.Step
		want  []string
	}{
		{[]plan.Step{step("cuda", "driver"), step("driver", "cuda")}, []string{"driver", "cuda", "driver"}},
		{[]plan.Step{step("a", "b"), step("b", "c"), step("c", "a"), step("repository.x")}, []string{"a", "b", "c", "a"}},
		{[]plan.Step{step("driver", "driver")}, []string{"driver", "driver"}},
		// A step waiting on a cycle is not part of it.
		{[]plan.Step{step("framework.x", "cuda"), step("cuda", "cudnn"), step("cudnn", "cuda")}, []string{"cuda", "cudnn", "cuda"}},
	}
	for _, tt := range tests {
		_, err := Order(tt.steps, stackKinds())
		var ce *CycleError
		if !errors.As(err, &ce) {
			t.Fatalf("Order(%v) = %v, want a CycleError", addresses(tt.steps), err)
		}
		if diff := cmp.Diff(tt.want, ce.Cycle); diff != "" {
			t.Errorf("cycle (-want +got):\n%s", diff)
		}
	}
}

func TestOrderDuplicate(t *testing.T) {
	if _, err := Order([]plan.Step{step("cuda"), step("cuda")}, stackKinds()); err == nil {
		t.Fatal("two steps with one address ordered without error")
	}
}
