package environment

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

// Team files are read as the profile script reads them: only
// CUDA_VISIBLE_DEVICES= lines, their value as it stands, each with the
// group the file is named for; every file is one of gpuenv's.
func TestObserveTeams(t *testing.T) {
	h := hosttest.Host(t, `-- etc/gpuenv/teams/vision.env --
# Written by gpuenv
CUDA_VISIBLE_DEVICES=4,5
-- etc/gpuenv/teams/infer.env --
CUDA_VISIBLE_DEVICES="MIG-0c4b2a1e-3f3e-5a6d-8b9c-0d1e2f3a4b5c"
export CUDA_VISIBLE_DEVICES=7
  CUDA_VISIBLE_DEVICES=6
-- etc/gpuenv/teams/README --
not a team
`)
	env, warns := Observe(h)
	want := []facts.Assignment{
		{Name: "CUDA_VISIBLE_DEVICES", Value: `"MIG-0c4b2a1e-3f3e-5a6d-8b9c-0d1e2f3a4b5c"`, File: "/etc/gpuenv/teams/infer.env", Line: 1, Group: "infer"},
		{Name: "CUDA_VISIBLE_DEVICES", Value: "4,5", File: "/etc/gpuenv/teams/vision.env", Line: 2, Group: "vision"},
	}
	if diff := cmp.Diff(want, env.Teams); diff != "" {
		t.Errorf("teams (-want +got):\n%s", diff)
	}
	if len(env.Variables) != 0 {
		t.Errorf("a team's setting is taken for everyone's: %+v", env.Variables)
	}
	if diff := cmp.Diff([]string{"/etc/gpuenv/teams/infer.env", "/etc/gpuenv/teams/vision.env"}, env.Managed); diff != "" {
		t.Errorf("managed (-want +got):\n%s", diff)
	}
	if len(env.ManagedDigests) != 2 || env.ManagedDigests[1].SHA256 == "" {
		t.Errorf("digests %+v", env.ManagedDigests)
	}
	var msgs []string
	for _, w := range warns {
		msgs = append(msgs, w.Path+": "+w.Message)
	}
	wantWarns := []string{
		`/etc/gpuenv/teams/infer.env: line 2 is ignored: the profile script reads only CUDA_VISIBLE_DEVICES= lines: "export CUDA_VISIBLE_DEVICES=7"`,
		`/etc/gpuenv/teams/infer.env: line 3 is ignored: the profile script reads only CUDA_VISIBLE_DEVICES= lines: "  CUDA_VISIBLE_DEVICES=6"`,
	}
	if diff := cmp.Diff(wantWarns, msgs); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
}

// The team part of the profile script has no assignment the observer
// would take for a host-wide setting.
func TestTeamScriptSetsNothingHostWide(t *testing.T) {
	if as := ParseShell(ManagedProfile, []byte(teamScript)); len(as) != 0 {
		t.Errorf("the team script reads as host-wide settings: %+v", as)
	}
}

// A team file written by plan is read back by Written as Observe reads
// it, in name order; removing it drops its settings and its place among
// gpuenv's files.
func TestWrittenTeams(t *testing.T) {
	env := facts.Environment{Teams: []facts.Assignment{
		{Name: "CUDA_VISIBLE_DEVICES", Value: "9", File: TeamFile("vision"), Line: 2, Group: "vision"},
	}, Managed: []string{TeamFile("vision")}}
	got := Written(env, TeamFile("infer"), []byte("# x\nCUDA_VISIBLE_DEVICES=6,7\n"), false)
	got = Written(got, TeamFile("vision"), nil, true)
	want := facts.Environment{Teams: []facts.Assignment{
		{Name: "CUDA_VISIBLE_DEVICES", Value: "6,7", File: TeamFile("infer"), Line: 2, Group: "infer"},
	}, Managed: []string{TeamFile("infer")}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after the writes (-want +got):\n%s", diff)
	}
	if env.Teams[0].Value != "9" {
		t.Errorf("Written changed its argument: %+v", env)
	}
}

// The profile script's team part, run by the system's shells: a user
// gets the devices of the first team (by file name) whose group they are
// in, by group ID, over the host-wide value; a user in no team keeps the
// host-wide value; a file's line is exported, never run.
func TestTeamScriptInShells(t *testing.T) {
	dir := t.TempDir()
	teams := filepath.Join(dir, "teams")
	bin := filepath.Join(dir, "bin")
	for _, d := range []string{teams, bin} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		filepath.Join(teams, "a-infer.env"): "# Written by gpuenv\nCUDA_VISIBLE_DEVICES=MIG-0c4b2a1e-3f3e-5a6d-8b9c-0d1e2f3a4b5c\n",
		filepath.Join(teams, "vision.env"):  "CUDA_VISIBLE_DEVICES=4,5",
		filepath.Join(teams, "hack.env"):    "CUDA_VISIBLE_DEVICES=$(touch " + filepath.Join(dir, "ran") + ")\n",
		filepath.Join(teams, "users.env"):   "CUDA_VISIBLE_DEVICES=3\n",
		// The user's groups, by ID, and the group database: "domain
		// users" is a directory service's name with a space.
		filepath.Join(bin, "id"):     "#!/bin/sh\necho $GROUPS_OF_USER\n",
		filepath.Join(bin, "getent"): "#!/bin/sh\ncase $2 in\na-infer) echo 'a-infer:x:1010:' ;;\nvision) echo 'vision:x:1003:alice' ;;\nhack) echo 'hack:x:1004:' ;;\nusers) echo 'users:x:100:' ;;\n*) exit 2 ;;\nesac\n",
	}
	for p, c := range files {
		if err := os.WriteFile(p, []byte(c), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	script := strings.ReplaceAll(teamScript, TeamsDir, teams)
	cases := []struct {
		name, gids, want string
	}{
		{"in vision", "1000 1003", "4,5"},
		{"in two teams: the first by name", "1003 1010", "MIG-0c4b2a1e-3f3e-5a6d-8b9c-0d1e2f3a4b5c"},
		{"in no team", "1000 27", "0"},
		{"in a group whose ID only starts alike", "10030", "0"},
		{"the file's value is not run", "1004", "$(touch " + filepath.Join(dir, "ran") + ")"},
	}
	shells := 0
	// Not busybox: its sh runs its own id and getent before PATH's, so
	// the fakes here would not be asked.
	for _, sh := range []string{"/bin/sh", "/bin/dash", "/bin/bash"} {
		if _, err := os.Stat(sh); err != nil {
			continue
		}
		shells++
		for _, c := range cases {
			cmd := exec.Command(sh, "-c", "CUDA_VISIBLE_DEVICES=0; export CUDA_VISIBLE_DEVICES\n"+script+"\nprintf '%s|%s' \"$CUDA_VISIBLE_DEVICES\" \"$gpuenv_gid\"; sh -c 'printf \"|%s\" \"$CUDA_VISIBLE_DEVICES\"'")
			cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin", "GROUPS_OF_USER=" + c.gids}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s, %s: %v\n%s", sh, c.name, err, out)
			}
			// The value, no helper variable left behind, and the same
			// value in a child process (exported).
			if want := c.want + "||" + c.want; string(out) != want {
				t.Errorf("%s, %s: %q, want %q", sh, c.name, out, want)
			}
		}
	}
	if shells == 0 {
		t.Skip("no POSIX shell on this machine")
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Error("a team file's value was run")
	}
}
