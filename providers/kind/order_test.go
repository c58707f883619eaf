package kind

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/planner/facts"
)

func nothing(context.Context, Input, *facts.Observation) []facts.Warning { return nil }

func observer(name string, reads, writes []string) Observer {
	return Observer{Name: name, Reads: reads, Writes: writes, Observe: nothing}
}

func names(obs []*Observer) []string {
	var out []string
	for _, o := range obs {
		out = append(out, o.Name)
	}
	return out
}

// CheckOrder reports the first reader that order runs before one of the
// other writers of what it reads.
func checkOrder(order []*Observer) string {
	for i, r := range order {
		for _, sec := range r.Reads {
			for _, w := range order[i+1:] {
				if slices.Contains(w.Writes, sec) {
					return r.Name + " runs before " + w.Name + ", which writes " + sec + " that it reads"
				}
			}
		}
	}
	return ""
}

func TestObserveOrderFeedsReadersAfterWriters(t *testing.T) {
	ds := []*Descriptor{
		{Name: "loader", Observers: []Observer{observer("loader", []string{CUDA, Environment}, []string{Loader})}},
		{Name: "cuda", Observers: []Observer{observer("cuda", []string{Packages}, []string{CUDA})}},
		{Name: "driver", Observers: []Observer{
			observer("driver", []string{OS, Kernel}, []string{Kernel, DeviceNodes}),
			observer("driver.unit", nil, []string{Units}),
		}},
		{Name: "groups", Observers: []Observer{
			observer("groups", nil, []string{Groups}),
			observer("groups.device_nodes", []string{Groups, DeviceNodes}, []string{DeviceNodes}),
		}},
		{Name: "runtime", Observers: []Observer{observer("runtime", []string{DeviceNodes}, []string{Context})}},
		{Name: "packages", Observers: []Observer{observer("packages", []string{OS}, []string{Packages})}},
		{Name: "environment", Observers: []Observer{observer("environment", nil, []string{Environment})}},
		{Name: "system", Observers: []Observer{observer("system", nil, []string{OS, Kernel})}},
		{Name: "devices", Observers: []Observer{observer("devices.unit", nil, []string{Units})}},
	}
	got, err := ObserveOrder(ds)
	if err != nil {
		t.Fatal(err)
	}
	// Where the sections leave observers free, the list decides.
	want := []string{"driver.unit", "groups", "environment", "system", "driver", "groups.device_nodes", "runtime", "packages", "cuda", "loader", "devices.unit"}
	if diff := cmp.Diff(want, names(got)); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
	// However the descriptors are listed, every reader runs after every
	// other writer of what it reads, and the same list gives the same
	// order.
	r := rand.New(rand.NewPCG(3, 4))
	for range 50 {
		in := slices.Clone(ds)
		r.Shuffle(len(in), func(i, j int) { in[i], in[j] = in[j], in[i] })
		got, err := ObserveOrder(in)
		if err != nil {
			t.Fatal(err)
		}
		if msg := checkOrder(got); msg != "" {
			t.Fatalf("listed as %v: %s", names(got), msg)
		}
		again, _ := ObserveOrder(in)
		if !slices.Equal(names(got), names(again)) {
			t.Fatalf("one list, two orders: %v and %v", names(got), names(again))
		}
	}
}

func TestObserveOrderRefuses(t *testing.T) {
	for _, tt := range []struct {
		name string
		obs  []Observer
		want string
	}{
		{"a cycle", []Observer{
			observer("a", []string{CUDA}, []string{Python}),
			observer("b", []string{Python}, []string{CuDNN}),
			observer("c", []string{CuDNN}, []string{CUDA}),
			observer("d", nil, []string{OS}),
		}, "observers wait on each other in a cycle: a, b, c"},
		{"two that complete one section", []Observer{
			observer("a", nil, []string{DeviceNodes}),
			observer("b", []string{DeviceNodes}, []string{DeviceNodes}),
			observer("c", []string{DeviceNodes}, []string{DeviceNodes}),
		}, "cycle: b, c"},
		{"a missing writer", []Observer{observer("loader", []string{CUDA}, []string{Loader})}, "observer loader reads cuda, which no other observer writes"},
		{"reading only what it writes", []Observer{observer("health", []string{Health}, []string{Health})}, "observer health reads health, which no other observer writes"},
		{"an unknown section", []Observer{observer("a", []string{"cdua"}, nil)}, `reads "cdua", which is no section`},
		{"an unknown section written", []Observer{observer("a", nil, []string{"cdua"})}, `writes "cdua", which is no section`},
		{"one name twice", []Observer{observer("a", nil, nil), observer("a", nil, nil)}, `observer "a": an observer has a name of its own`},
		{"no function", []Observer{{Name: "a"}}, `observer "a": an observer has a name of its own and a function`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ObserveOrder([]*Descriptor{{Name: "x", Observers: tt.obs}})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ObserveOrder = %v, want an error saying %q", err, tt.want)
			}
		})
	}
}
