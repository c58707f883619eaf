package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner/compat/nvidiarepo"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

// jsonPlan is what these tests read of plan --json.
type jsonPlan struct {
	Errored bool        `json:"errored"`
	Steps   []plan.Step `json:"steps"`
}

// planFresh plans spec (text) on fixture root as planCases plans it, and
// returns the exit status, the JSON plan and the human output.
func planFresh(t *testing.T, root, spec string, layout func(dir string)) (int, jsonPlan, string) {
	t.Helper()
	dir := hosttest.Build(t, root)
	if layout != nil {
		layout(dir)
	}
	withPlanHost(t, loadCandidates(t, root), runnerFor(t, root))
	specDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(specDir, "gpuenv.hcl"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"--root", dir, "plan", "--json", specDir}, nil, &out, &errb, nil)
	var p jsonPlan
	if err := json.Unmarshal(out.Bytes(), &p); err != nil {
		t.Fatalf("plan --json: %v\n%s%s", err, out.String(), errb.String())
	}
	var human bytes.Buffer
	run(context.Background(), []string{"--root", dir, "plan", specDir}, nil, &human, &human, nil)
	return code, p, human.String()
}

// A fresh host as its installer leaves it, and a whole stack written
// with versions only: the plan's first step adds NVIDIA's repository for
// that host from gpuenv's table, fetching the key and checking its pinned
// fingerprint before the file that makes the package manager read it,
// and every step installing NVIDIA's packages comes after it.
func TestFreshHostsPlanNVIDIARepositoryFirst(t *testing.T) {
	spec, err := os.ReadFile("testdata/plan/fresh/gpuenv.hcl")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		root, dir string
		pin       bool
	}{
		{root: "ubuntu2204-h100-fresh", dir: "ubuntu2204", pin: true},
		{root: "fresh-ubuntu2404", dir: "ubuntu2404", pin: true},
		{root: "fresh-debian12", dir: "debian12"},
		{root: "fresh-rhel9", dir: "rhel9"},
	} {
		t.Run(tt.root, func(t *testing.T) {
			code, p, human := planFresh(t, tt.root, string(spec), nil)
			if code != exitOK || p.Errored || len(p.Steps) == 0 {
				t.Fatalf("exit %d, errored %v:\n%s", code, p.Errored, human)
			}
			first := p.Steps[0]
			if first.Address != nvidiarepo.Address {
				t.Fatalf("first step %s, want %s:\n%s", first.Address, nvidiarepo.Address, human)
			}
			repo := nvidiarepo.All()[slices.IndexFunc(nvidiarepo.All(), func(r nvidiarepo.Repository) bool { return r.Name == "cuda-"+tt.dir+"-x86_64" })]
			key := first.Operations[0].File
			if key == nil || key.Key == nil || key.Key.URL != repo.KeyURL() || key.Key.Fingerprint != repo.Key.Fingerprint || key.Content != "" {
				t.Fatalf("first operation %+v, want the key %s checked against %s", first.Operations[0], repo.KeyURL(), repo.Key.Fingerprint)
			}
			files := map[string]string{}
			for _, op := range first.Operations[1:] {
				files[op.File.Path] = op.File.Content
			}
			if repo.Family == "rpm" {
				if key.Path != nvidiarepo.DnfKey || !key.Key.Armored {
					t.Errorf("key written to %s (armored %v), want armored %s", key.Path, key.Key.Armored, nvidiarepo.DnfKey)
				}
				for _, line := range []string{"baseurl=" + repo.URL, "gpgcheck=1", "gpgkey=file://" + nvidiarepo.DnfKey} {
					if !strings.Contains(files[nvidiarepo.DnfRepoFile], line+"\n") {
						t.Errorf("%s lacks %q:\n%s", nvidiarepo.DnfRepoFile, line, files[nvidiarepo.DnfRepoFile])
					}
				}
			} else {
				if key.Path != nvidiarepo.AptKeyring || key.Key.Armored {
					t.Errorf("key written to %s (armored %v), want binary %s", key.Path, key.Key.Armored, nvidiarepo.AptKeyring)
				}
				for _, line := range []string{"URIs: " + repo.URL, "Suites: /", "Signed-By: " + nvidiarepo.AptKeyring} {
					if !strings.Contains(files[nvidiarepo.AptSourcesFile], line+"\n") {
						t.Errorf("%s lacks %q:\n%s", nvidiarepo.AptSourcesFile, line, files[nvidiarepo.AptSourcesFile])
					}
				}
				pref, written := files[nvidiarepo.AptPreferencesFile]
				if tt.pin != (written && strings.Contains(pref, "Package: *\nPin: release l=NVIDIA CUDA\nPin-Priority: 600\n")) {
					t.Errorf("pin file written %v, want %v:\n%s", written, tt.pin, pref)
				}
			}
			last := first.Operations[len(first.Operations)-1].File
			if !slices.Equal(last.After, plan.RefreshCommand(map[string]plan.Manager{"deb": plan.ManagerApt, "rpm": plan.ManagerDnf}[repo.Family])) {
				t.Errorf("the sources file is not followed by the refresh: %+v", last)
			}
			for _, s := range p.Steps[1:] {
				if s.After["source"] == "nvidia" && !slices.Contains(s.DependsOn, nvidiarepo.Address) {
					t.Errorf("%s installs NVIDIA's packages without waiting for %s (after %v)", s.Address, nvidiarepo.Address, s.DependsOn)
				}
			}
			for _, block := range []string{"cuda", "cudnn"} {
				if !slices.ContainsFunc(p.Steps, func(s plan.Step) bool { return s.Address == block }) {
					t.Errorf("no %s step:\n%s", block, human)
				}
			}
		})
	}
}

// A spec that names source = "nvidia" (as init writes it) on a fresh host
// gets the repository too; where gpuenv's table cannot give it, the plan
// is refused: it never installs from NVIDIA's repository without one.
func TestNVIDIASourceNeverPlannedWithoutRepository(t *testing.T) {
	spec := "cuda {\n  version = \"12.4\"\n  source  = \"nvidia\"\n}\n"
	code, p, human := planFresh(t, "ubuntu2204-h100-fresh", spec, nil)
	if code != exitOK || len(p.Steps) != 2 || p.Steps[0].Address != nvidiarepo.Address || p.Steps[1].Address != "cuda" {
		t.Errorf("exit %d:\n%s", code, human)
	}
	// The same host on a machine NVIDIA publishes no repository for.
	power := func(dir string) {
		if err := os.WriteFile(filepath.Join(dir, "proc/sys/kernel/arch"), []byte("ppc64le\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, p, human = planFresh(t, "ubuntu2204-h100-fresh", spec, power)
	if code != exitError || !p.Errored || !strings.Contains(human, "NVIDIA's repository cannot be added") ||
		!strings.Contains(human, "only, not on ppc64le") {
		t.Errorf("exit %d, want a refusal that says NVIDIA serves no ppc64le:\n%s", code, human)
	}
	// A repository block (a mirror) overrides the table: nothing is added.
	mirror := "repository \"cuda\" {\n  url     = \"https://mirror.example.com/cuda/ubuntu2204/x86_64/\"\n  keyring = \"/usr/share/keyrings/cuda-archive-keyring.gpg\"\n}\n" + spec
	code, p, human = planFresh(t, "ubuntu2204-h100-fresh", mirror, nil)
	if code != exitOK || slices.ContainsFunc(p.Steps, func(s plan.Step) bool { return s.Address == nvidiarepo.Address }) ||
		!slices.ContainsFunc(p.Steps, func(s plan.Step) bool { return s.Address == "repository.cuda" }) {
		t.Errorf("exit %d, want the spec's repository and not the table's:\n%s", code, human)
	}
}

// The container toolkit, which no distribution archive carries, comes
// from NVIDIA's libnvidia-container repository, which plan adds from the
// table as it does the CUDA repository: key first, checked against the
// pinned fingerprint; the .repo of an RPM host checks the signed metadata
// as NVIDIA's own file does.
func TestFreshHostsPlanToolkitRepository(t *testing.T) {
	spec := "container_toolkit {\n  version = \"1.17.*\"\n}\n"
	for _, root := range []string{"fresh-debian12", "fresh-rhel9"} {
		t.Run(root, func(t *testing.T) {
			code, p, human := planFresh(t, root, spec, nil)
			at := slices.IndexFunc(p.Steps, func(s plan.Step) bool { return s.Address == nvidiarepo.ToolkitFiles.Address })
			tk := slices.IndexFunc(p.Steps, func(s plan.Step) bool { return s.Address == "container_toolkit" })
			if code != exitOK || at < 0 || tk < at || !slices.Contains(p.Steps[tk].DependsOn, nvidiarepo.ToolkitFiles.Address) {
				t.Fatalf("exit %d, want %s before container_toolkit:\n%s", code, nvidiarepo.ToolkitFiles.Address, human)
			}
			ops := p.Steps[at].Operations
			key := ops[0].File.Key
			if key == nil || key.URL != "https://nvidia.github.io/libnvidia-container/gpgkey" || key.Fingerprint != "C95B321B61E88C1809C4F759DDCAE044F796ECB0" {
				t.Fatalf("first operation %+v, want the toolkit's key checked", ops[0].File)
			}
			last := ops[len(ops)-1].File
			if root == "fresh-rhel9" {
				for _, line := range []string{"baseurl=https://nvidia.github.io/libnvidia-container/stable/rpm/x86_64/", "repo_gpgcheck=1", "gpgcheck=0", "gpgkey=file://" + nvidiarepo.ToolkitFiles.DnfKey} {
					if last.Path != nvidiarepo.ToolkitFiles.DnfRepo || !strings.Contains(last.Content, line+"\n") {
						t.Errorf("%s lacks %q:\n%s", last.Path, line, last.Content)
					}
				}
			} else if last.Path != nvidiarepo.ToolkitFiles.AptSources || !strings.Contains(last.Content, "Signed-By: "+nvidiarepo.ToolkitFiles.AptKeyring+"\n") {
				t.Errorf("%s:\n%s", last.Path, last.Content)
			}
		})
	}
}
