package providers_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plantest"
	"github.com/gpuenv/gpuenv/providers"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

// staleEnvironmentRoot holds gpuenv's environment files, the profile
// script with another value than the spec's.
const staleEnvironmentRoot = `-- etc/os-release --
ID=ubuntu
VERSION_ID="22.04"
VERSION_CODENAME=jammy
-- etc/ld.so.conf --
include /etc/ld.so.conf.d/*.conf
-- etc/ld.so.conf.d/gpuenv.conf --
# Written by gpuenv from the spec.
/usr/local/cuda-12.4/lib64
-- etc/profile.d/gpuenv.sh --
# Written by gpuenv from the spec; gpuenv rewrites it on every apply.
export CUDA_VISIBLE_DEVICES='1'
-- etc/systemd/system.conf.d/gpuenv.conf --
# Written by gpuenv from the spec: services see the same variables as login shells.
[Manager]
DefaultEnvironment="CUDA_VISIBLE_DEVICES=1"
`

const staleRepositoryRoot = `-- etc/os-release --
ID=ubuntu
VERSION_ID="22.04"
VERSION_CODENAME=jammy
-- usr/share/keyrings/cuda-archive-keyring.gpg --
key
`

const staleRepositorySpec = `repository "cuda" {
  url      = "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/"
  keyring  = "/usr/share/keyrings/cuda-archive-keyring.gpg"
  priority = 600
}
`

// TestSavedPlanStaleAfterFileEdit: every file a provider's step is decided
// from is in the observation, so that a plan saved before someone edits
// it is stale, naming the section, even where the edit changes nothing
// but bytes (a comment).
func TestSavedPlanStaleAfterFileEdit(t *testing.T) {
	write := func(rel, content string) func(t *testing.T, root string) {
		return func(t *testing.T, root string) { hosttest.WriteFile(t, root, rel, content) }
	}
	appendTo := func(rel, content string) func(t *testing.T, root string) {
		return func(t *testing.T, root string) {
			f, err := os.OpenFile(filepath.Join(root, rel), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteString(content); err != nil {
				t.Fatal(err)
			}
		}
	}
	link := func(rel, target string) func(t *testing.T, root string) {
		return func(t *testing.T, root string) {
			p := filepath.Join(root, rel)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
		}
	}
	const wants = "etc/systemd/system/multi-user.target.wants/"
	type root struct {
		archive, fixture string
		nvml             bool            // go-nvml's DGX H100 mock
		pkgs             []facts.Package // replace the observed packages
	}
	envRoot := root{archive: staleEnvironmentRoot}
	repoRoot := root{archive: staleRepositoryRoot}
	// A loaded module: NVML is asked only then.
	dgx := root{archive: "-- etc/os-release --\nID=ubuntu\nVERSION_ID=\"22.04\"\n" +
		"-- proc/driver/nvidia/version --\nNVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build  (dvs-builder@U16-I3-B03-4-3)  Tue Feb 13 01:10:03 UTC 2024\n", nvml: true}
	working := root{fixture: "ubuntu2204-working", pkgs: []facts.Package{{Name: "nvidia-driver-550", Version: "550.54.15-0ubuntu1", State: "installed", Want: "install"}}}
	lists := root{fixture: "debian12-lists"}
	const debianDriverSpec = "driver {\n  version = \"535.*\"\n  source = \"distro\"\n  kernel_modules = \"proprietary\"\n}\n"
	const envSpec = "environment {\n  cuda_visible_devices = [\"0\"]\n}\n"
	const deviceSpec = "device \"all\" {\n  compute_mode = \"exclusive_process\"\n}\n"
	const persistenceSpec = "driver {\n  version = \"550.*\"\n  persistence_mode = true\n}\n"
	tests := []struct {
		name    string
		root    root
		spec    string
		step    string // a step the plan must have
		edit    func(t *testing.T, root string)
		section string
	}{
		{"the profile script", envRoot, envSpec, "environment", appendTo("etc/profile.d/gpuenv.sh", "# edited by hand\n"), planner.FactsEnvironment},
		{"the loader's configuration", envRoot, envSpec, "environment", appendTo("etc/ld.so.conf.d/gpuenv.conf", "# edited by hand\n"), planner.FactsEnvironment},
		{"the systemd drop-in", envRoot, envSpec, "environment", appendTo("etc/systemd/system.conf.d/gpuenv.conf", "# edited by hand\n"), planner.FactsEnvironment},
		{"a repository's sources file", repoRoot, staleRepositorySpec, "repository.cuda", write("etc/apt/sources.list.d/gpuenv-cuda.sources", "# written by hand\n"), planner.FactsRepoFiles},
		{"a repository's preferences file", repoRoot, staleRepositorySpec, "repository.cuda", write("etc/apt/preferences.d/gpuenv-cuda.pref", "Package: *\nPin: origin \"developer.download.nvidia.com\"\nPin-Priority: 600\n"), planner.FactsRepoFiles},
		{"a repository's keyring", repoRoot, staleRepositorySpec, "repository.cuda", write("usr/share/keyrings/cuda-archive-keyring.gpg", "another key\n"), planner.FactsRepoFiles},
		{"the compute modes' boot unit", dgx, deviceSpec, "device.boot", write("etc/systemd/system/gpuenv-compute-mode.service", "[Service]\nExecStart=/bin/true\n"), planner.FactsUnits},
		{"the boot unit's enablement", dgx, deviceSpec, "device.boot", link(wants+"gpuenv-compute-mode.service", "/etc/systemd/system/gpuenv-compute-mode.service"), planner.FactsUnits},
		{"a package list apt fetched again", lists, debianDriverSpec, "driver", appendTo("var/lib/apt/lists/deb.debian.org_debian_dists_bookworm-updates_main_binary-amd64_Packages", "Package: nvidia-driver\nVersion: 535.309.02-1\nArchitecture: amd64\n\n"), planner.FactsIndexes},
		{"nvidia-persistenced's enablement", working, persistenceSpec, "driver.persistence", link(wants+"nvidia-persistenced.service", "/usr/lib/systemd/system/nvidia-persistenced.service"), planner.FactsUnits},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h *host.Host
			if tt.root.fixture != "" {
				var err error
				if h, err = host.New(hosttest.Build(t, tt.root.fixture)); err != nil {
					t.Fatal(err)
				}
			} else {
				h = hosttest.Host(t, tt.root.archive)
			}
			observe := func() *facts.Observation {
				var opts providers.ObserveOptions
				if tt.root.nvml {
					opts.NVML = host.NewNVML(hosttest.NVMLServer("dgxh100"))
				}
				obs := providers.Observe(context.Background(), h, opts)
				if tt.root.pkgs != nil {
					obs.Packages.Manager = "dpkg"
					obs.Packages.Packages = tt.root.pkgs
				}
				return obs
			}
			obs := observe()
			plan, diags := planner.New(providers.Planners()...).Plan(context.Background(), plantest.LoadSpec(t, tt.spec), obs)
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			if plan.Step(tt.step) == nil {
				t.Fatalf("no %s step in %+v", tt.step, plan.Steps)
			}
			var buf bytes.Buffer
			if err := planner.WriteSavedPlan(&buf, plan, obs, nil, providers.Kinds()); err != nil {
				t.Fatal(err)
			}
			saved, err := planner.ReadSavedPlan(&buf)
			if err != nil {
				t.Fatal(err)
			}
			if err := saved.CheckFresh(observe()); err != nil {
				t.Fatalf("before the edit: %v", err)
			}
			tt.edit(t, h.Root())
			err = saved.CheckFresh(observe())
			var stale *planner.StaleError
			if !errors.As(err, &stale) {
				t.Fatalf("after the edit: %v, want a stale plan", err)
			}
			if !slices.Equal(stale.Changed, []string{tt.section}) {
				t.Errorf("stale sections %v, want [%s]", stale.Changed, tt.section)
			}
		})
	}
}
