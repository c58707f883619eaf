package cuda

import (
	"context"
	"testing"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
	"github.com/gpuenv/gpuenv/providers/observer/packages"
)

func TestFixtures(t *testing.T) {
	nvidia := func(mm, version, runtime, pkg string) facts.Toolkit {
		return facts.Toolkit{Path: "/usr/local/cuda-" + mm, Version: version, Runtime: runtime, VersionFrom: "version.json",
			Nvcc: "/usr/local/cuda-" + mm + "/bin/nvcc", Layout: "nvidia", Package: pkg}
	}
	hosttest.ObserveFixtures(t, map[string]facts.CUDA{
		"ubuntu2204-h100-fresh": {Toolkits: []facts.Toolkit{}},
		"nouveau":               {Toolkits: []facts.Toolkit{}},
		"ubuntu2204-working":    {Default: "/usr/local/cuda-12.4", Toolkits: []facts.Toolkit{nvidia("12.4", "12.4.1", "12.4.127", "cuda-toolkit-12-4")}},
		"ubuntu2204-mismatch":   {Default: "/usr/local/cuda-12.4", Toolkits: []facts.Toolkit{nvidia("12.4", "12.4.1", "12.4.127", "cuda-toolkit-12-4")}},
		"tensorflow-no-cudnn":   {Default: "/usr/local/cuda-12.3", Toolkits: []facts.Toolkit{nvidia("12.3", "12.3.2", "12.3.101", "cuda-toolkit-12-3")}},
		"rhel9":                 {Default: "/usr/local/cuda-12.4", Toolkits: []facts.Toolkit{nvidia("12.4", "12.4.1", "12.4.127", "")}},
		"debian12-distro": {Toolkits: []facts.Toolkit{{
			Path: "/usr/lib/nvidia-cuda-toolkit", Version: "11.8.0", Runtime: "11.8.89", VersionFrom: "package:nvidia-cuda-toolkit",
			Nvcc: "/usr/bin/nvcc", Layout: "distro", Package: "nvidia-cuda-toolkit",
		}}},
	}, func(fixture string, h *host.Host) (facts.CUDA, []facts.Warning) {
		family := "deb"
		if fixture == "rhel9" {
			// The RPM database is not read here (it needs rpm): the files
			// tell.
			family = ""
		}
		pkgs, _ := packages.Observe(context.Background(), h, family)
		return Observe(h, pkgs)
	})
}
