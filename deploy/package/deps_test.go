package main

import (
	"os/exec"
	"strings"
	"testing"
)

// nfpm (and what it pulls in: go-git, PGP) is linked into this command
// alone; the gpuenv binary that runs as root on every host carries none
// of it, nor Kubernetes, nor NVIDIA's container toolkit, whose nvcdi only
// the tests use as the reference for gpuenv's CDI spec (linking it slows
// every command's start).
func TestGpuenvDoesNotLinkPackaging(t *testing.T) {
	deps := func(pkg ...string) []string {
		out, err := exec.Command("go", append([]string{"list", "-deps"}, pkg...)...).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		return strings.Fields(string(out))
	}
	// The check can see nfpm where it is linked.
	if !contains(deps("github.com/gpuenv/gpuenv/deploy/package"), "github.com/goreleaser/nfpm/v2") {
		t.Fatal("go list -deps of deploy/package does not list nfpm")
	}
	if !contains(deps("-test", "github.com/gpuenv/gpuenv/providers/containers"), "github.com/NVIDIA/nvidia-container-toolkit/pkg/nvcdi") {
		t.Fatal("go list -deps -test of providers/containers does not list nvcdi, the reference of its tests")
	}
	for _, p := range deps("github.com/gpuenv/gpuenv/cmd/gpuenv") {
		for _, banned := range []string{"github.com/goreleaser/", "k8s.io/", "sigs.k8s.io/", "github.com/go-git/", "github.com/ProtonMail/", "github.com/NVIDIA/nvidia-container-toolkit"} {
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
