//go:build realsystem

package realsys

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner/facts"
)

// Scenario 5: a real user made by useradd is added to video and render by
// apply, through the root's own gpasswd and groupadd, and rollback takes
// exactly that back: /etc/group and /etc/gshadow are as they were, byte for
// byte.
func TestGroupsWithRealUser(t *testing.T) {
	r := h.NewRoot(t, Base, Mounts{Proc: true})
	// bob is already in video; the spec does not name him and must leave
	// him there (members are users that must be in the group, no more).
	r.MustSh("useradd -m alice && useradd -m bob && gpasswd -a bob video")
	before := map[string][]byte{}
	for _, f := range []string{"/etc/group", "/etc/gshadow"} {
		before[f] = r.readFile(f)
	}
	if r.Sh("getent group render").Code == 0 {
		t.Fatal("the minimal root already has a render group; the scenario needs it created")
	}

	r.WriteFile("/root/spec/gpuenv.hcl", `group "video" {
  members = ["alice"]
}

group "render" {
  members = ["alice"]
}
`)
	res := r.Gpuenv("plan", "--detailed-exitcode", "/root/spec")
	if res.Code != 2 || !strings.Contains(res.Stdout, "group.video") || !strings.Contains(res.Stdout, "group.render") {
		t.Fatalf("plan: want changes to group.video and group.render; %s", res)
	}
	// What plan predicts of the groups, for judging doctor's rules, is
	// what the root's groupadd and gpasswd make: render's GID included.
	_, predicted, after := r.applyPredicted("/root/spec")
	checkPredictedGroups(t, predicted, after)
	if got := r.groupMembers("video"); !slices.Equal(got, []string{"bob", "alice"}) {
		t.Errorf("video members after apply %v, want [bob alice]", got)
	}
	if got := r.groupMembers("render"); !slices.Equal(got, []string{"alice"}) {
		t.Errorf("render members after apply %v, want [alice]", got)
	}
	if got := strings.Fields(r.MustSh("id -nG alice")); !slices.Contains(got, "video") || !slices.Contains(got, "render") {
		t.Errorf("id -nG alice: %v", got)
	}
	obs := r.Observe()
	for _, g := range []string{"video", "render"} {
		i := slices.IndexFunc(obs.Groups, func(o facts.Group) bool { return o.Name == g })
		if i < 0 || !slices.Contains(obs.Groups[i].Members, "alice") {
			t.Errorf("observe: group %s without alice: %+v", g, obs.Groups)
		}
	}
	if res := r.Gpuenv("plan", "--detailed-exitcode", "/root/spec"); res.Code != 0 || !strings.Contains(res.Stdout, "No changes") {
		t.Errorf("plan after apply: want no changes; %s", res)
	}

	res = r.Gpuenv("rollback", "--auto-approve")
	if res.Code != 0 {
		t.Fatalf("rollback: %s", res)
	}
	for f, want := range before {
		if got := r.readFile(f); string(got) != string(want) {
			t.Errorf("%s after rollback:\n%s\nwant, as before apply:\n%s", f, got, want)
		}
	}
	if res := r.Sh("getent group render"); res.Code == 0 {
		t.Errorf("render still exists after rollback: %s", res.Stdout)
	}
	if res := r.Gpuenv("rollback", "--auto-approve"); res.Code != 0 || !strings.Contains(res.Stdout, "Nothing to roll back") {
		t.Errorf("a second rollback: want nothing to roll back; %s", res)
	}
}

// groupMembers reads a group's member list from the root's /etc/group.
func (r *Root) groupMembers(name string) []string {
	r.t.Helper()
	for _, line := range strings.Split(string(r.readFile("/etc/group")), "\n") {
		f := strings.Split(line, ":")
		if len(f) == 4 && f[0] == name {
			if f[3] == "" {
				return []string{}
			}
			return strings.Split(f[3], ",")
		}
	}
	r.t.Fatalf("no group %s in /etc/group", name)
	return nil
}

func (r *Root) readFile(p string) []byte {
	r.t.Helper()
	data, err := os.ReadFile(r.Path(p))
	if err != nil {
		r.t.Fatal(err)
	}
	return data
}
