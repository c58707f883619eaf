package cuda_test

import (
	"context"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	planpkg "github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/planner/plantest"
	"github.com/gpuenv/gpuenv/providers/cuda"
)

func TestPlan(t *testing.T) {
	ubuntu := facts.OS{ID: "ubuntu", VersionID: "22.04", Family: "deb"}
	debian := facts.OS{ID: "debian", VersionID: "12", Codename: "bookworm", Family: "deb"}
	tests := []struct {
		name     string
		os       facts.OS
		toolkits []facts.Toolkit
		src      string
		action   planpkg.Action
		pins     string
		reason   string
		// installed is the toolkit apply leaves, for the idempotence check.
		installed facts.Toolkit
	}{
		{
			name:      "NVIDIA's toolkit on a host without one",
			os:        ubuntu,
			src:       "cuda {\n  version = \"12.4\"\n  source = \"nvidia\"\n}\n",
			action:    planpkg.Create,
			pins:      "cuda-toolkit-12-4=12.4.1-1",
			reason:    "No CUDA 12.4 toolkit from the nvidia source is installed; installs cuda-toolkit-12-4 12.4.1-1 into /usr/local/cuda-12.4.",
			installed: facts.Toolkit{Path: "/usr/local/cuda-12.4", Version: "12.4.1", Layout: cuda.LayoutNVIDIA, Package: "cuda-toolkit-12-4"},
		},
		{
			name:      "an older toolkit is replaced by the spec's line",
			os:        ubuntu,
			toolkits:  []facts.Toolkit{{Path: "/usr/local/cuda-12.1", Version: "12.1.1", Layout: cuda.LayoutNVIDIA, Package: "cuda-toolkit-12-1"}},
			src:       "cuda {\n  version = \"12.4\"\n  source = \"nvidia\"\n}\n",
			action:    planpkg.Update,
			pins:      "cuda-toolkit-12-4=12.4.1-1",
			reason:    "The installed toolkit at /usr/local/cuda-12.1 is CUDA 12.1.1 and the spec asks for \"12.4\"",
			installed: facts.Toolkit{Path: "/usr/local/cuda-12.4", Version: "12.4.1", Layout: cuda.LayoutNVIDIA, Package: "cuda-toolkit-12-4"},
		},
		{
			name:      "Debian's toolkit",
			os:        debian,
			src:       "cuda {\n  version = \"11.8\"\n  source = \"distro\"\n}\n",
			action:    planpkg.Create,
			pins:      "nvidia-cuda-toolkit=11.8.89~11.8.0-5~deb12u1",
			reason:    "installs nvidia-cuda-toolkit 11.8.89~11.8.0-5~deb12u1 into /usr",
			installed: facts.Toolkit{Path: cuda.DistroDir, Version: "11.8.89", Layout: cuda.LayoutDistro, Package: cuda.DistroPackage},
		},
		{
			name:     "absent removes the toolkit's package",
			os:       ubuntu,
			toolkits: []facts.Toolkit{{Path: "/usr/local/cuda-12.4", Version: "12.4.1", Layout: cuda.LayoutNVIDIA, Package: "cuda-toolkit-12-4"}},
			src:      "cuda {\n  absent = true\n}\n",
			action:   planpkg.Delete,
			pins:     "-cuda-toolkit-12-4",
			reason:   "absent = true removes the CUDA toolkit: cuda-toolkit-12-4.",
		},
	}
	cands := plantest.Candidates{
		"cuda-toolkit-12-4":   {"12.4.1-1", "12.4.0-1"},
		"nvidia-cuda-toolkit": {"11.8.89~11.8.0-5~deb12u1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obs := &facts.Observation{OS: tt.os, CUDA: facts.CUDA{Toolkits: tt.toolkits}}
			if tt.os.ID == "ubuntu" {
				// The candidates list NVIDIA's packages: the host has its repository.
				obs.Repositories = []facts.Repository{{File: "/etc/apt/sources.list.d/cuda-ubuntu2204-x86_64.list", URIs: []string{"https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/"}}}
			}
			s := plantest.LoadSpec(t, tt.src)
			pl := planner.New(cuda.Kind.Provider())
			pl.Candidates = cands
			plan := plantest.Plan(t, pl, s, obs)
			if len(plan.Steps) != 1 {
				t.Fatalf("steps %+v", plan.Steps)
			}
			st := plan.Steps[0]
			var pins []string
			p := st.Operations[0].Packages
			for _, i := range p.Install {
				pins = append(pins, i.Name+"="+i.Version)
			}
			for _, r := range p.Remove {
				pins = append(pins, "-"+r)
			}
			if st.Address != "cuda" || st.Action != tt.action || strings.Join(pins, " ") != tt.pins || !strings.Contains(st.Reason, tt.reason) {
				t.Errorf("step %s %s %v %q", st.Address, st.Action, pins, st.Reason)
			}
			// The planner drops dependencies on steps it does not have;
			// the provider's own answer names the driver.
			d, _ := planner.Resolve(s, obs)
			resp := cuda.Provider{}.Plan(context.Background(), &planner.Request{Spec: s, Facts: obs, Desired: d, Candidates: cands})
			if deps := resp.Steps[0].DependsOn; tt.action != planpkg.Delete && (len(deps) == 0 || deps[len(deps)-1] != "driver") {
				t.Errorf("the toolkit must wait for the driver: %v", deps)
			}
			obs.CUDA.Toolkits = nil
			if tt.installed.Path != "" {
				obs.CUDA.Toolkits = []facts.Toolkit{tt.installed}
			}
			plantest.Converged(t, pl, s, obs, "applying")
		})
	}
}
