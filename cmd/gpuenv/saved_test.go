package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

// A plan saved before the apt sources changed is stale: the versions its
// package steps pin came from the sources enabled when it was made. The
// plan (a distribution driver on a fresh machine) has no repository step
// of its own, so only its package steps tie it to the sources.
func TestSavedPlanStaleAfterSourcesChange(t *testing.T) {
	root := hosttest.Build(t, "ubuntu2204-h100-fresh")
	withPlanHost(t, loadCandidates(t, "ubuntu2204-h100-fresh"), noRunner{t})
	saved := filepath.Join(t.TempDir(), "tonight.plan")
	args := []string{"--root", root, "plan", "--out", saved, "--detailed-exitcode", filepath.Join("..", "..", "examples", "shared-multiuser")}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), args, nil, &stdout, &stderr, nil); code != exitChanges {
		t.Fatalf("plan: exit %d, want %d:\n%s%s", code, exitChanges, stdout.String(), stderr.String())
	}
	if data, _ := os.ReadFile(saved); bytes.Contains(data, []byte(`"address": "repository.`)) {
		t.Fatal("the plan has a repository step; it would be stale for that alone")
	}
	f, err := os.OpenFile(filepath.Join(root, "etc", "apt", "sources.list"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("deb http://archive.ubuntu.com/ubuntu jammy-proposed main restricted\n")
	f.Close()

	stdout.Reset()
	stderr.Reset()
	args = []string{"--root", root, "apply", "--auto-approve", saved}
	if code := run(context.Background(), args, nil, &stdout, &stderr, nil); code != exitError {
		t.Fatalf("apply: exit %d, want %d:\n%s%s", code, exitError, stdout.String(), stderr.String())
	}
	if got := stderr.String(); !strings.Contains(got, "Saved plan is stale") || !strings.Contains(got, "The host's repositories changed") {
		t.Errorf("apply of the stale plan says:\n%s", got)
	}
}
