package framework

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
	ubuntuSystem := facts.PythonEnv{Interpreter: "/usr/bin/python3", Prefix: "/usr", Version: "3.10", System: true,
		SitePackages: []string{"/usr/lib/python3/dist-packages"}, Frameworks: []facts.Framework{}}
	torchVenv := facts.PythonEnv{
		Interpreter: "/opt/venv/bin/python", Prefix: "/opt/venv", Version: "3.10", Virtual: true,
		SitePackages: []string{"/opt/venv/lib/python3.10/site-packages"},
		Frameworks: []facts.Framework{{Name: "pytorch", Version: "2.5.1+cu124", Variant: "cu124", CUDA: "12.4", CuDNN: "9.1.0.70",
			Installer: "pip", Location: "/opt/venv/lib/python3.10/site-packages/torch"}},
	}
	cases := []struct {
		fixture      string
		interpreters []string
		want         []facts.PythonEnv
	}{
		{"ubuntu2204-h100-fresh", nil, []facts.PythonEnv{ubuntuSystem}},
		{"ubuntu2204-working", []string{"/opt/venv/bin/python"}, []facts.PythonEnv{torchVenv, ubuntuSystem}},
		{"tensorflow-no-cudnn", []string{"/opt/tf/bin/python3"}, []facts.PythonEnv{{
			Interpreter: "/opt/tf/bin/python3", Prefix: "/opt/tf", Version: "3.10", Virtual: true,
			SitePackages: []string{"/opt/tf/lib/python3.10/site-packages"},
			Frameworks: []facts.Framework{{Name: "tensorflow", Version: "2.17.0", CUDA: "12.3", CuDNN: "8",
				CUDAArchs: []string{"sm_50", "sm_60", "sm_70", "sm_80", "compute_90"},
				Installer: "pip", Location: "/opt/tf/lib/python3.10/site-packages/tensorflow"}},
		}, ubuntuSystem}},
		{"debian12-distro", []string{"/usr/bin/python3"}, []facts.PythonEnv{{
			Interpreter: "/usr/bin/python3", Prefix: "/usr", Version: "3.11", System: true,
			SitePackages: []string{"/usr/lib/python3/dist-packages"},
			Frameworks: []facts.Framework{{Name: "pytorch", Version: "1.13.0a0", CPUOnly: true, Installer: "debian",
				Package: "python3-torch", Location: "/usr/lib/python3/dist-packages/torch"}},
		}}},
		{"rhel9", nil, []facts.PythonEnv{{
			Interpreter: "/usr/bin/python3", Prefix: "/usr", Version: "3.9", System: true,
			SitePackages: []string{"/usr/lib64/python3.9/site-packages", "/usr/lib/python3.9/site-packages"},
			Frameworks:   []facts.Framework{},
		}}},
	}
	for _, c := range cases {
		t.Run(c.fixture, func(t *testing.T) {
			h, err := host.New(hosttest.Build(t, c.fixture))
			if err != nil {
				t.Fatal(err)
			}
			pkgs, _ := packages.Observe(context.Background(), h, "")
			got, warns := Observe(h, pkgs, c.interpreters)
			if len(warns) != 0 {
				t.Errorf("warnings: %v", warns)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("Observe (-want +got):\n%s", diff)
			}
		})
	}
}
