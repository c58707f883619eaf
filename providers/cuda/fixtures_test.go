package cuda

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
	"github.com/gpuenv/gpuenv/providers/packages"
)

func TestFixtures(t *testing.T) {
	nvidia := func(mm, version, runtime, pkg string) facts.Toolkit {
		return facts.Toolkit{Path: "/usr/local/cuda-" + mm, Version: version, Runtime: runtime, VersionFrom: "version.json",
			Nvcc: "/usr/local/cuda-" + mm + "/bin/nvcc", Layout: "nvidia", Package: pkg}
	}
	cases := []struct {
		fixture, family string
		want            facts.CUDA
	}{
		{"ubuntu2204-h100-fresh", "deb", facts.CUDA{Toolkits: []facts.Toolkit{}}},
		{"nouveau", "deb", facts.CUDA{Toolkits: []facts.Toolkit{}}},
		{"ubuntu2204-working", "deb", facts.CUDA{Default: "/usr/local/cuda-12.4", Toolkits: []facts.Toolkit{nvidia("12.4", "12.4.1", "12.4.127", "cuda-toolkit-12-4")}}},
		{"ubuntu2204-mismatch", "deb", facts.CUDA{Default: "/usr/local/cuda-12.4", Toolkits: []facts.Toolkit{nvidia("12.4", "12.4.1", "12.4.127", "cuda-toolkit-12-4")}}},
		{"tensorflow-no-cudnn", "deb", facts.CUDA{Default: "/usr/local/cuda-12.3", Toolkits: []facts.Toolkit{nvidia("12.3", "12.3.2", "12.3.101", "cuda-toolkit-12-3")}}},
		// The RPM database is not read here (it needs rpm): the files tell.
		{"rhel9", "", facts.CUDA{Default: "/usr/local/cuda-12.4", Toolkits: []facts.Toolkit{nvidia("12.4", "12.4.1", "12.4.127", "")}}},
		{"debian12-distro", "deb", facts.CUDA{Toolkits: []facts.Toolkit{{
			Path: "/usr/lib/nvidia-cuda-toolkit", Version: "11.8.0", Runtime: "11.8.89", VersionFrom: "package:nvidia-cuda-toolkit",
			Nvcc: "/usr/bin/nvcc", Layout: "distro", Package: "nvidia-cuda-toolkit",
		}}}},
	}
	for _, c := range cases {
		t.Run(c.fixture, func(t *testing.T) {
			h, err := host.New(hosttest.Build(t, c.fixture))
			if err != nil {
				t.Fatal(err)
			}
			pkgs, _ := packages.Observe(context.Background(), h, c.family)
			got, warns := Observe(h, pkgs)
			if len(warns) != 0 {
				t.Errorf("warnings: %v", warns)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("Observe (-want +got):\n%s", diff)
			}
		})
	}
}
