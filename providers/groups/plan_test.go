package groups_test

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/planner/plantest"
	"github.com/gpuenv/gpuenv/providers/groups"
)

// planApply changes the observed groups as gpasswd and groupadd would.
func planApply(obs *facts.Observation, steps []plan.Step) {
	for _, s := range steps {
		op := s.Operations[0].Group
		i := slices.IndexFunc(obs.Groups, func(g facts.Group) bool { return g.Name == op.Group })
		switch {
		case op.Delete:
			obs.Groups = slices.Delete(obs.Groups, i, i+1)
			continue
		case op.Create:
			obs.Groups = append(obs.Groups, facts.Group{Name: op.Group, GID: 1000})
			i = len(obs.Groups) - 1
		}
		g := &obs.Groups[i]
		g.Members = slices.DeleteFunc(g.Members, func(u string) bool { return slices.Contains(op.Remove, u) })
		g.Members = append(g.Members, op.Add...)
	}
}

func TestPlan(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []plan.Step
	}{
		{
			name: "members added; others stay",
			src:  "group \"video\" {\n  members = [\"alice\", \"bob\", \"carol\"]\n}\n",
			want: []plan.Step{{
				Address: "group.video", Action: plan.Update,
				Before:     map[string]string{"members": "alice, mallory"},
				After:      map[string]string{"members": "alice, mallory, bob, carol"},
				Reason:     "Adds bob and carol, whom the spec lists, to video.",
				ReasonCode: plan.ReasonMembersDiffer,
				Operations: []plan.Operation{{Kind: plan.OpGroup, Group: &plan.GroupOp{Group: "video", Add: []string{"bob", "carol"}}}},
			}},
		},
		{
			name: "exclusive removes the others",
			src:  "group \"video\" {\n  members = [\"alice\"]\n  exclusive = true\n}\n",
			want: []plan.Step{{
				Address: "group.video", Action: plan.Update,
				Before:     map[string]string{"members": "alice, mallory"},
				After:      map[string]string{"members": "alice"},
				Reason:     "Removes mallory from video: exclusive = true admits only the listed members.",
				ReasonCode: plan.ReasonMembersDiffer,
				Operations: []plan.Operation{{Kind: plan.OpGroup, Group: &plan.GroupOp{Group: "video", Remove: []string{"mallory"}}}},
			}},
		},
		{
			name: "a missing group is created",
			src:  "group \"render\" {\n  members = [\"alice\", \"bob\"]\n}\n",
			want: []plan.Step{{
				Address: "group.render", Action: plan.Create,
				After:      map[string]string{"members": "alice, bob"},
				Reason:     "The group render does not exist: it is created with alice and bob.",
				ReasonCode: plan.ReasonMissing,
				Operations: []plan.Operation{{Kind: plan.OpGroup, Group: &plan.GroupOp{Group: "render", Create: true, System: true, Add: []string{"alice", "bob"}}}},
			}},
		},
		{
			name: "absent removes the group",
			src:  "group \"video\" {\n  absent = true\n}\n",
			want: []plan.Step{{
				Address: "group.video", Action: plan.Delete,
				Before:     map[string]string{"members": "alice, mallory"},
				Reason:     "absent = true removes the group video.",
				ReasonCode: plan.ReasonAbsentRequested,
				Operations: []plan.Operation{{Kind: plan.OpGroup, Group: &plan.GroupOp{Group: "video", Delete: true}}},
			}},
		},
		{
			name: "a user whose primary group it is counts as a member",
			src:  "group \"video\" {\n  members = [\"alice\", \"vid\"]\n}\n",
		},
	}
	// No step has a flag: a group change needs neither a reboot nor a
	// module reload (its members take it at their next login), so Flags
	// is compared with the rest, as the zero value every want leaves it.
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obs := &facts.Observation{Groups: []facts.Group{{Name: "video", GID: 44, Members: []string{"alice", "mallory"}, PrimaryOf: []string{"vid"}}}}
			s := plantest.LoadSpec(t, tt.src)
			pl := planner.New(groups.Kind.Provider())
			plan := plantest.Plan(t, pl, s, obs)
			if diff := cmp.Diff(tt.want, plan.Steps, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("steps (-want +got):\n%s", diff)
			}
			planApply(obs, plan.Steps)
			plantest.Converged(t, pl, s, obs, "applying")
		})
	}
}

// A member whom /etc/passwd does not know is named in a warning, once per
// group; known users, and a host whose /etc/passwd was not read, get none.
func TestPlanWarnsOfUnknownMembers(t *testing.T) {
	src := "group \"video\" {\n  members = [\"alice\", \"alcie\", \"bob\"]\n}\ngroup \"render\" {\n  members = [\"alice\"]\n}\n"
	obs := &facts.Observation{Groups: []facts.Group{
		{Name: "video", GID: 44, Members: []string{"alice"}},
		{Name: "render", GID: 105},
		{Name: "alice", GID: 1000, PrimaryOf: []string{"alice"}},
	}}
	plan := plantest.Plan(t, planner.New(groups.Kind.Provider()), plantest.LoadSpec(t, src), obs)
	var got []string
	for _, w := range plan.Warnings {
		if w.ID == groups.UnknownUserCheck {
			got = append(got, w.Summary+" | "+w.Detail[:len("The group video lists alcie and bob")])
		}
	}
	want := []string{"No such user: alcie and bob | The group video lists alcie and bob"}
	if !slices.Equal(got, want) {
		t.Errorf("warnings %q, want %q", got, want)
	}

	obs.Groups[2].PrimaryOf = nil
	plan = plantest.Plan(t, planner.New(groups.Kind.Provider()), plantest.LoadSpec(t, src), obs)
	if len(plan.Warnings) != 0 {
		t.Errorf("without /etc/passwd's users: %v", plan.Warnings)
	}
}
