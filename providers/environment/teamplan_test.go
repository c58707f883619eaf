package environment_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	planpkg "github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/planner/plantest"
	"github.com/gpuenv/gpuenv/providers/environment"
	"github.com/gpuenv/gpuenv/providers/host"
)

// Teams are planned as files: one KEY=VALUE file per team, and the
// profile script that reads them after the host-wide assignments. Plan
// shows each file's content; once applied and observed, nothing is left
// to do; an absent team's file is removed, the others kept.
func TestPlanTeams(t *testing.T) {
	root := t.TempDir()
	h, _ := host.New(root)
	obs := &facts.Observation{
		Init:   facts.Init{PID1: "systemd", Live: true, Systemd: true},
		Groups: []facts.Group{{Name: "vision", GID: 1003}},
	}
	s := plantest.LoadSpec(t, `
environment {
  cuda_visible_devices = ["0"]
}

group "infer" {
  members = ["carol"]
}

team "vision" {
  cuda_visible_devices = ["4", "5"]
}

team "infer" {
  cuda_visible_devices = ["MIG-0c4b2a1e-3f3e-5a6d-8b9c-0d1e2f3a4b5c"]
}
`)
	pl := planner.New(environment.Kind.Provider())
	plan := plantest.Plan(t, pl, s, obs)
	if len(plan.Steps) != 1 {
		t.Fatalf("steps %+v", plan.Steps)
	}
	st := plan.Steps[0]
	contents := map[string]string{}
	for _, op := range st.Operations {
		contents[op.File.Path] = op.File.Content
	}
	if got, want := contents[environment.TeamFile("vision")], "# Written by gpuenv from the spec's team \"vision\": the members of the group vision get these devices at login.\nCUDA_VISIBLE_DEVICES=4,5\n"; got != want {
		t.Errorf("vision's file:\n%s\nwant:\n%s", got, want)
	}
	if got := contents[environment.TeamFile("infer")]; !strings.HasSuffix(got, "\nCUDA_VISIBLE_DEVICES=MIG-0c4b2a1e-3f3e-5a6d-8b9c-0d1e2f3a4b5c\n") {
		t.Errorf("infer's file:\n%s", got)
	}
	profile := contents[environment.ManagedProfile]
	hostWide := strings.Index(profile, "export CUDA_VISIBLE_DEVICES='0'")
	if team := strings.Index(profile, environment.TeamsDir+"/*.env"); hostWide < 0 || team < hostWide {
		t.Errorf("the profile script does not read the teams after the host-wide value:\n%s", profile)
	}
	if strings.Contains(profile, "vision") || strings.Contains(profile, "4,5") {
		t.Errorf("the profile script names a team's group or devices, which belong in the team's file:\n%s", profile)
	}
	if got, want := st.After[environment.TeamFile("vision")], "CUDA_VISIBLE_DEVICES=4,5"; got != want {
		t.Errorf("after %q, want %q", got, want)
	}
	if got, want := st.After[environment.ManagedProfile], "export CUDA_VISIBLE_DEVICES='0'; team members: CUDA_VISIBLE_DEVICES from /etc/gpuenv/teams/<group>.env"; got != want {
		t.Errorf("after %q, want %q", got, want)
	}
	if !strings.Contains(st.Reason, "writes /etc/gpuenv/teams/vision.env (the team vision's devices)") {
		t.Errorf("reason %q", st.Reason)
	}
	planApply(t, root, plan.Steps)
	obs.Environment, _ = environment.Observe(h)
	if len(obs.Environment.Teams) != 2 || obs.Environment.Teams[1].Group != "vision" || obs.Environment.Teams[1].Value != "4,5" {
		t.Errorf("observed teams %+v", obs.Environment.Teams)
	}
	plantest.Converged(t, pl, s, obs, "applying")

	// An absent team: its file goes, the other team's stays, and so does
	// the script that reads it.
	gone := plantest.LoadSpec(t, `
environment {
  cuda_visible_devices = ["0"]
}

team "vision" {
  cuda_visible_devices = ["4", "5"]
}

team "infer" {
  absent = true
}
`)
	plan = plantest.Plan(t, pl, gone, obs)
	if len(plan.Steps) != 1 || len(plan.Steps[0].Operations) != 1 || !plan.Steps[0].Operations[0].File.Remove || plan.Steps[0].Operations[0].File.Path != environment.TeamFile("infer") {
		t.Fatalf("absent team: %+v", plan.Steps)
	}
	planApply(t, root, plan.Steps)
	obs.Environment, _ = environment.Observe(h)
	plantest.Converged(t, pl, gone, obs, "removing a team")
	if _, err := os.Stat(filepath.Join(root, environment.TeamFile("vision"))); err != nil {
		t.Error(err)
	}

	// Without teams, the script no longer reads the team files.
	none := plantest.LoadSpec(t, "environment {\n  cuda_visible_devices = [\"0\"]\n}\n")
	plan = plantest.Plan(t, pl, none, obs)
	if len(plan.Steps) != 1 || len(plan.Steps[0].Operations) != 1 || strings.Contains(plan.Steps[0].Operations[0].File.Content, environment.TeamsDir) {
		t.Errorf("no teams: %+v", plan.Steps)
	}
	if plan.Steps[0].Action != planpkg.Update {
		t.Errorf("action %s", plan.Steps[0].Action)
	}
}

// A team's group must be one the host has or the spec makes: plan
// refuses another, or one the spec removes, at the team's label.
func TestPlanTeamGroups(t *testing.T) {
	obs := &facts.Observation{Groups: []facts.Group{{Name: "vision", GID: 1003}}}
	cases := []struct {
		src, want, at string
	}{
		{"team \"nlp\" {\n  cuda_visible_devices = [\"1\"]\n}\n", `Unknown group: The host has no group "nlp" in /etc/group, and the spec makes none`, ":1,6-11"},
		{"group \"vision\" {\n  absent = true\n}\nteam \"vision\" {\n  cuda_visible_devices = [\"1\"]\n}\n", `Team of a removed group: The group block at `, ":4,6-14"},
	}
	pl := planner.New(environment.Kind.Provider())
	for _, c := range cases {
		s := plantest.LoadSpec(t, c.src)
		plan, diags := pl.Plan(context.Background(), s, obs)
		if !diags.HasErrors() || plan != nil {
			t.Errorf("%s: planned %+v, diagnostics %v", c.src, plan, diags)
			continue
		}
		d := diags[0]
		if got := d.Summary + ": " + d.Detail; !strings.HasPrefix(got, c.want) || d.Subject == nil || !strings.HasSuffix(d.Subject.String(), c.at) {
			t.Errorf("%s: %s at %v, want %s at %s", c.src, got, d.Subject, c.want, c.at)
		}
	}
	// The group the host has, or one the spec makes, is fine.
	for _, src := range []string{
		"team \"vision\" {\n  cuda_visible_devices = [\"1\"]\n}\n",
		"group \"nlp\" {\n  members = [\"bob\"]\n}\nteam \"nlp\" {\n  cuda_visible_devices = [\"1\"]\n}\n",
	} {
		plantest.Plan(t, pl, plantest.LoadSpec(t, src), obs)
	}
}
