package groups

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

func TestFixtures(t *testing.T) {
	cases := []struct {
		fixture string
		want    map[string]facts.Group // the GPU groups
	}{
		{"ubuntu2204-h100-fresh", map[string]facts.Group{
			"video":  {Name: "video", GID: 44, Members: []string{}},
			"render": {Name: "render", GID: 109, Members: []string{}},
		}},
		{"ubuntu2204-working", map[string]facts.Group{
			"video":  {Name: "video", GID: 44, Members: []string{"ubuntu", "ml"}},
			"render": {Name: "render", GID: 109, Members: []string{"ubuntu", "ml"}},
			"ml":     {Name: "ml", GID: 1001, Members: []string{}, PrimaryOf: []string{"ml"}},
		}},
		{"rhel9", map[string]facts.Group{
			"video":  {Name: "video", GID: 39, Members: []string{}},
			"render": {Name: "render", GID: 998, Members: []string{}},
		}},
		{"debian12-distro", map[string]facts.Group{
			"video": {Name: "video", GID: 44, Members: []string{"debian"}},
		}},
	}
	for _, c := range cases {
		t.Run(c.fixture, func(t *testing.T) {
			h := hosttest.Fixture(t, c.fixture)
			got, warns := Observe(h)
			hosttest.NoWarnings(t, warns)
			if len(got) < 30 {
				t.Errorf("%d groups: not a whole /etc/group", len(got))
			}
			found := 0
			for _, g := range got {
				if w, ok := c.want[g.Name]; ok {
					found++
					if diff := cmp.Diff(w, g); diff != "" {
						t.Errorf("group %s (-want +got):\n%s", g.Name, diff)
					}
				}
			}
			if found != len(c.want) {
				t.Errorf("found %d of %d groups", found, len(c.want))
			}
		})
	}
}
