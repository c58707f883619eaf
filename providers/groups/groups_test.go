package groups

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

func TestObserve(t *testing.T) {
	h := hosttest.Host(t, `-- etc/group --
root:x:0:
video:x:44:alice,bob
# a comment
render:x:109:alice
ubuntu:x:1000:
alice:x:1001:
+nisgroup
broken:x:notanumber:
short:x
-- etc/passwd --
root:x:0:0:root:/root:/bin/bash
ubuntu:x:1000:1000:Ubuntu:/home/ubuntu:/bin/bash
alice:x:1001:1001::/home/alice:/bin/bash
kiosk:x:1002:44::/home/kiosk:/bin/sh
bad:x:1003
`)
	got, warns := Observe(h)
	want := []facts.Group{
		{Name: "root", GID: 0, Members: []string{}, PrimaryOf: []string{"root"}},
		{Name: "video", GID: 44, Members: []string{"alice", "bob"}, PrimaryOf: []string{"kiosk"}},
		{Name: "render", GID: 109, Members: []string{"alice"}},
		{Name: "ubuntu", GID: 1000, Members: []string{}, PrimaryOf: []string{"ubuntu"}},
		{Name: "alice", GID: 1001, Members: []string{}, PrimaryOf: []string{"alice"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Observe (-want +got):\n%s", diff)
	}
	wantWarn := []facts.Warning{
		{Path: GroupPath, Message: `line 8: group broken has GID "notanumber"`},
		{Path: GroupPath, Message: "line 9: 2 fields where group(5) has 4"},
		{Path: PasswdPath, Message: "line 5: 3 fields where passwd(5) has 7"},
	}
	if diff := cmp.Diff(wantWarn, warns); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
}

func TestMissingFiles(t *testing.T) {
	h := hosttest.Host(t, "-- etc/group --\nvideo:x:44:\n")
	got, warns := Observe(h)
	if len(got) != 1 || len(warns) != 1 || warns[0].Path != PasswdPath {
		t.Errorf("without passwd: %v %v", got, warns)
	}
	if err := os.Remove(filepath.Join(h.Root(), "etc/group")); err != nil {
		t.Fatal(err)
	}
	got, warns = Observe(h)
	if got == nil || len(got) != 0 || len(warns) != 1 || warns[0].Path != GroupPath {
		t.Errorf("without group: %v %v", got, warns)
	}
}

func TestTruncated(t *testing.T) {
	groups, problems := ParseGroup([]byte("video:x:44:alice\nrender:x:1"))
	if len(groups) != 1 || len(problems) != 1 || !strings.Contains(problems[0], "line 2") {
		t.Errorf("got %v, %v", groups, problems)
	}
}
