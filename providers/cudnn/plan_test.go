package cudnn_test

import (
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner/plantest"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/cudnn"
)

func TestPlan(t *testing.T) {
	ubuntu := facts.OS{ID: "ubuntu", VersionID: "22.04", Family: "deb"}
	toolkit := func(v string) []facts.Toolkit {
		return []facts.Toolkit{{Path: "/usr/local/cuda-" + v, Version: v, Layout: "nvidia"}}
	}
	cands := plantest.Candidates{
		"libcudnn9-cuda-12":     {"9.10.2.21-1", "9.8.0.87-1", "9.1.0.70-1"},
		"libcudnn9-dev-cuda-12": {"9.10.2.21-1", "9.8.0.87-1", "9.1.0.70-1"},
		"libcudnn8":             {"8.9.7.29-1+cuda12.2", "8.9.7.29-1+cuda11.8"},
		"libcudnn8-dev":         {"8.9.7.29-1+cuda12.2", "8.9.7.29-1+cuda11.8"},
	}
	tests := []struct {
		name     string
		src      string
		installs []facts.CuDNNInstall
		pins     string
		reason   string
		after    facts.CuDNNInstall
	}{
		{
			name:   "cuDNN 9 for the system's CUDA 12",
			src:    "cudnn {\n  version = \"9.*\"\n  source = \"nvidia\"\n}\n",
			pins:   "libcudnn9-cuda-12=9.10.2.21-1 libcudnn9-dev-cuda-12=9.10.2.21-1",
			reason: "No cuDNN matching \"9.*\" for CUDA 12 is installed",
			after:  facts.CuDNNInstall{Version: "9.10.2", CUDAMajor: "12", Package: "libcudnn9-cuda-12", PackageVersion: "9.10.2.21-1"},
		},
		{
			name:     "an exact release replaces another",
			src:      "cudnn {\n  version = \"9.1.0.70\"\n  source = \"nvidia\"\n}\n",
			installs: []facts.CuDNNInstall{{Version: "9.8.0", CUDAMajor: "12", Package: "libcudnn9-cuda-12", PackageVersion: "9.8.0.87-1"}},
			pins:     "libcudnn9-cuda-12=9.1.0.70-1 libcudnn9-dev-cuda-12=9.1.0.70-1",
			reason:   "The installed cuDNN 9.8.0 does not satisfy \"9.1.0.70\" for CUDA 12",
			after:    facts.CuDNNInstall{Version: "9.1.0", CUDAMajor: "12", Package: "libcudnn9-cuda-12", PackageVersion: "9.1.0.70-1"},
		},
		{
			name:   "cuDNN 8's build for the toolkit's CUDA line",
			src:    "cudnn {\n  version = \"8.9.7.29\"\n  source = \"nvidia\"\n}\n",
			pins:   "libcudnn8=8.9.7.29-1+cuda12.2 libcudnn8-dev=8.9.7.29-1+cuda12.2",
			reason: "installs libcudnn8, libcudnn8-dev 8.9.7.29-1+cuda12.2",
			after:  facts.CuDNNInstall{Version: "8.9.7", CUDAMajor: "12", Package: "libcudnn8", PackageVersion: "8.9.7.29-1+cuda12.2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tk := toolkit("12.4.1")
			if strings.Contains(tt.src, "8.9") {
				tk = toolkit("12.2.2")
			}
			// The candidates list NVIDIA's packages: the host has its repository.
			obs := &facts.Observation{OS: ubuntu, CUDA: facts.CUDA{Toolkits: tk, Default: tk[0].Path}, CuDNN: facts.CuDNN{Installs: tt.installs},
				Repositories: []facts.Repository{{File: "/etc/apt/sources.list.d/cuda-ubuntu2204-x86_64.list", URIs: []string{"https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/"}}}}
			s := plantest.LoadSpec(t, tt.src)
			pl := planner.New(cudnn.Kind.Provider())
			pl.Candidates = cands
			plan := plantest.Plan(t, pl, s, obs)
			if len(plan.Steps) != 1 {
				t.Fatalf("steps %+v", plan.Steps)
			}
			st := plan.Steps[0]
			var pins []string
			for _, i := range st.Operations[0].Packages.Install {
				pins = append(pins, i.Name+"="+i.Version)
			}
			if st.Address != "cudnn" || strings.Join(pins, " ") != tt.pins || !strings.Contains(st.Reason, tt.reason) {
				t.Errorf("step %s %v %q", st.Address, pins, st.Reason)
			}
			obs.CuDNN.Installs = []facts.CuDNNInstall{tt.after}
			plantest.Converged(t, pl, s, obs, "applying")
		})
	}
}
