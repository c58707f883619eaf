package framework

import (
	"context"
	"testing"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
	"github.com/gpuenv/gpuenv/providers/observer/packages"
)

func TestFixtures(t *testing.T) {
	ubuntuSystem := facts.PythonEnv{Interpreter: "/usr/bin/python3", Prefix: "/usr", Version: "3.10", System: true,
		SitePackages: []string{"/usr/lib/python3/dist-packages"}, Frameworks: []facts.Framework{}}
	torchVenv := facts.PythonEnv{
		Interpreter: "/opt/venv/bin/python", Prefix: "/opt/venv", Version: "3.10", Virtual: true,
		SitePackages: []string{"/opt/venv/lib/python3.10/site-packages"},
		Frameworks: []facts.Framework{{Name: "pytorch", Version: "2.5.1+cu124", Variant: "cu124", CUDA: "12.4", CuDNN: "9.1.0.70",
			Installer: "pip", Location: "/opt/venv/lib/python3.10/site-packages/torch"}},
	}
	interpreters := map[string][]string{
		"ubuntu2204-working":  {"/opt/venv/bin/python"},
		"tensorflow-no-cudnn": {"/opt/tf/bin/python3"},
		"debian12-distro":     {"/usr/bin/python3"},
	}
	hosttest.ObserveFixtures(t, map[string][]facts.PythonEnv{
		"ubuntu2204-h100-fresh": {ubuntuSystem},
		"ubuntu2204-working":    {torchVenv, ubuntuSystem},
		"tensorflow-no-cudnn": {{
			Interpreter: "/opt/tf/bin/python3", Prefix: "/opt/tf", Version: "3.10", Virtual: true,
			SitePackages: []string{"/opt/tf/lib/python3.10/site-packages"},
			Frameworks: []facts.Framework{{Name: "tensorflow", Version: "2.17.0", CUDA: "12.3", CuDNN: "8",
				CUDAArchs: []string{"sm_50", "sm_60", "sm_70", "sm_80", "compute_90"},
				Installer: "pip", Location: "/opt/tf/lib/python3.10/site-packages/tensorflow"}},
		}, ubuntuSystem},
		"debian12-distro": {{
			Interpreter: "/usr/bin/python3", Prefix: "/usr", Version: "3.11", System: true,
			SitePackages: []string{"/usr/lib/python3/dist-packages"},
			Frameworks: []facts.Framework{{Name: "pytorch", Version: "1.13.0a0", CPUOnly: true, Installer: "debian",
				Package: "python3-torch", Location: "/usr/lib/python3/dist-packages/torch"}},
		}},
		"rhel9": {{
			Interpreter: "/usr/bin/python3", Prefix: "/usr", Version: "3.9", System: true,
			SitePackages: []string{"/usr/lib64/python3.9/site-packages", "/usr/lib/python3.9/site-packages"},
			Frameworks:   []facts.Framework{},
		}},
	}, func(fixture string, h *host.Host) ([]facts.PythonEnv, []facts.Warning) {
		pkgs, _ := packages.Observe(context.Background(), h, "")
		return Observe(h, pkgs, interpreters[fixture])
	})
}
