package devaccess

import (
	"testing"

	"github.com/gpuenv/gpuenv/planner/facts"
)

// TestCgroupDriver: the driver an engine's file chooses, and the default
// when it chooses none (Docker's depends on the cgroup version).
func TestCgroupDriver(t *testing.T) {
	for _, tc := range []struct {
		e       facts.EngineConfig
		version string
		want    string
		def     bool
	}{
		{facts.EngineConfig{Engine: "docker", Content: `{"exec-opts": ["native.cgroupdriver=systemd"]}`}, "v1", "systemd", false},
		{facts.EngineConfig{Engine: "docker", Content: `{"exec-opts": [" native.cgroupdriver=cgroupfs"]}`}, "v2", "cgroupfs", false},
		{facts.EngineConfig{Engine: "docker", Content: `{}`}, "v2", "systemd", true},
		{facts.EngineConfig{Engine: "docker", Content: `{}`}, "v1", "cgroupfs", true},
		{facts.EngineConfig{Engine: "containerd", Content: "[plugins]\n  SystemdCgroup = true\n"}, "v2", "systemd", false},
		{facts.EngineConfig{Engine: "containerd", Content: "[plugins]\n  SystemdCgroup = false\n"}, "v2", "cgroupfs", false},
		{facts.EngineConfig{Engine: "containerd", Content: "version = 2\n"}, "v1", "cgroupfs", true},
	} {
		d, ok := cgroupDriver(tc.e, tc.version)
		if !ok || d.Driver != tc.want || d.Default != tc.def {
			t.Errorf("%s %q under %s: got %+v, want %s (default %v)", tc.e.Engine, tc.e.Content, tc.version, d, tc.want, tc.def)
		}
	}
	if _, ok := cgroupDriver(facts.EngineConfig{Engine: "crio"}, "v2"); ok {
		t.Error("CRI-O's driver is not judged")
	}
}
