package main

import (
	"os/exec"
	"strings"
	"testing"
)

// nfpm (and what it pulls in: go-git, PGP) is linked into this command
// alone; the gpuenv binary that runs as root on every host carries none
// of it, nor Kubernetes.
func TestGpuenvDoesNotLinkPackaging(t *testing.T) {
	deps := func(pkg string) []string {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		return strings.Fields(string(out))
	}
	// The check can see nfpm where it is linked.
	if !contains(deps("github.com/gpuenv/gpuenv/deploy/package"), "github.com/goreleaser/nfpm/v2") {
		t.Fatal("go list -deps of deploy/package does not list nfpm")
	}
	for _, p := range deps("github.com/gpuenv/gpuenv/cmd/gpuenv") {
		for _, banned := range []string{"github.com/goreleaser/", "k8s.io/", "sigs.k8s.io/", "github.com/go-git/", "github.com/ProtonMail/"} {
			if strings.HasPrefix(p, banned) {
				t.Errorf("gpuenv links %s", p)
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
