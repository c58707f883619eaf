package cudnn

import (
	"context"
	"testing"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
	"github.com/gpuenv/gpuenv/providers/observer/packages"
)

func TestFixtures(t *testing.T) {
	var libs []string
	for _, l := range []string{"libcudnn", "libcudnn_adv", "libcudnn_cnn", "libcudnn_engines_precompiled", "libcudnn_engines_runtime_compiled", "libcudnn_graph", "libcudnn_heuristic", "libcudnn_ops"} {
		libs = append(libs, "/usr/lib/x86_64-linux-gnu/"+l+".so.9.1.0")
	}
	cudnn9 := facts.CuDNN{Installs: []facts.CuDNNInstall{{
		Version: "9.1.0", Header: "/usr/include/x86_64-linux-gnu/cudnn_version_v9.h", Libraries: libs,
		CUDAMajor: "12", Package: "libcudnn9-cuda-12", PackageVersion: "9.1.0.70-1",
	}}}
	none := facts.CuDNN{Installs: []facts.CuDNNInstall{}}
	hosttest.ObserveFixtures(t, map[string]facts.CuDNN{
		"ubuntu2204-working":    cudnn9,
		"ubuntu2204-mismatch":   cudnn9,
		"tensorflow-no-cudnn":   none,
		"debian12-distro":       none,
		"ubuntu2204-h100-fresh": none,
		"nouveau":               none,
	}, func(_ string, h *host.Host) (facts.CuDNN, []facts.Warning) {
		pkgs, _ := packages.Observe(context.Background(), h, "deb")
		return Observe(h, pkgs)
	})
}
