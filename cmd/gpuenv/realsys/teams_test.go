//go:build realsystem

package realsys

import (
	"strings"
	"testing"
)

// Teams at login in a real Debian root: users made by useradd, groups
// made by apply, and the root's own login shells (dash for useradd's
// default shell, bash -l), id and getent. Each member gets the first
// team (by group name) whose group they are in, over the host-wide
// value; a user in no team gets the host-wide value; a team file edited
// by hand is read, not run. Rollback takes it all back.
func TestTeamsAtLogin(t *testing.T) {
	r := h.NewRoot(t, Base, Mounts{Proc: true})
	r.MustSh("useradd -m alice && useradd -m bob && useradd -m carol && useradd -m -s /bin/bash dave")
	r.WriteFile("/root/spec/gpuenv.hcl", `environment {
  cuda_visible_devices = ["7"]
  cuda_device_order    = "PCI_BUS_ID"
}

group "vision" {
  members = ["alice", "dave"]
}

group "infer" {
  members = ["bob", "alice"]
}

team "vision" {
  cuda_visible_devices = ["4", "5"]
}

team "infer" {
  cuda_visible_devices = ["MIG-0c4b2a1e-3f3e-5a6d-8b9c-0d1e2f3a4b5c"]
}
`)
	if res := r.Gpuenv("apply", "--auto-approve", "/root/spec"); res.Code != 0 {
		t.Fatalf("apply: %s", res)
	}
	login := func(user string) string {
		t.Helper()
		// su - starts the user's login shell, which reads /etc/profile
		// and so /etc/profile.d; the value is printed by a child, so
		// only an exported one shows.
		res := r.Sh("su - " + user + " -c 'sh -c \"echo \\${CUDA_VISIBLE_DEVICES-unset} \\${CUDA_DEVICE_ORDER-unset}\"'")
		if res.Code != 0 || res.Stderr != "" {
			t.Fatalf("login of %s: %s", user, res)
		}
		return strings.TrimSpace(res.Stdout)
	}
	for user, want := range map[string]string{
		"alice": "MIG-0c4b2a1e-3f3e-5a6d-8b9c-0d1e2f3a4b5c PCI_BUS_ID", // in both: infer sorts first
		"bob":   "MIG-0c4b2a1e-3f3e-5a6d-8b9c-0d1e2f3a4b5c PCI_BUS_ID",
		"dave":  "4,5 PCI_BUS_ID", // bash
		"carol": "7 PCI_BUS_ID",   // in no team
	} {
		if got := login(user); got != want {
			t.Errorf("%s logs in with %q, want %q", user, got, want)
		}
	}

	// A line that would run a command is exported as it stands.
	r.MustSh(`printf 'CUDA_VISIBLE_DEVICES=$(touch /tmp/ran)\n' > /etc/gpuenv/teams/vision.env`)
	if got := login("dave"); got != "$(touch /tmp/ran) PCI_BUS_ID" {
		t.Errorf("dave logs in with %q after the hand edit", got)
	}
	if res := r.Sh("test -e /tmp/ran"); res.Code == 0 {
		t.Error("a team file's line was run at login")
	}
	obs := r.Observe()
	if len(obs.Environment.Teams) != 2 || obs.Environment.Teams[1].Group != "vision" || obs.Environment.Teams[1].Value != "$(touch /tmp/ran)" {
		t.Errorf("observed teams %+v", obs.Environment.Teams)
	}

	if res := r.Gpuenv("rollback", "--auto-approve"); res.Code != 0 {
		t.Fatalf("rollback: %s", res)
	}
	if got := login("carol"); got != "unset unset" {
		t.Errorf("carol logs in with %q after rollback", got)
	}
	if res := r.Sh("ls /etc/gpuenv/teams/*.env"); res.Code == 0 {
		t.Errorf("team files after rollback: %s", res.Stdout)
	}
}
