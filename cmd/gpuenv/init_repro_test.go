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

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
	"github.com/gpuenv/gpuenv/providers/host/pkgindex"
	"github.com/gpuenv/gpuenv/spec"
)

// reproPlan is what these tests read of plan --json.
type reproPlan struct {
	Steps []struct {
		Address    string            `json:"address"`
		After      map[string]string `json:"after"`
		DependsOn  []string          `json:"depends_on"`
		Operations []struct {
			File *struct {
				Path    string `json:"path"`
				Content string `json:"content"`
				Remove  bool   `json:"remove"`
			} `json:"file"`
			Packages *struct {
				Install []struct {
					Name            string `json:"name"`
					Version         string `json:"version"`
					KnownAfterApply bool   `json:"known_after_apply"`
					Constraint      string `json:"constraint"`
				} `json:"install"`
			} `json:"packages"`
		} `json:"operations"`
	} `json:"steps"`
	Warnings []struct {
		Summary string `json:"summary"`
		Detail  string `json:"detail"`
	} `json:"warnings"`
	Diagnostics []struct {
		Severity string `json:"severity"`
		Summary  string `json:"summary"`
		Detail   string `json:"detail"`
	} `json:"diagnostics"`
}

// gpuenvRun runs the CLI in this process and returns its exit status and
// output.
func gpuenvRun(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(""), &out, &errOut, nil)
	return code, out.String(), errOut.String()
}

func planRepro(t *testing.T, root, specFile string) reproPlan {
	t.Helper()
	_, out, errOut := gpuenvRun(t, "--root", root, "plan", "--json", specFile)
	var p reproPlan
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("plan --json: %v\n%s%s", err, out, errOut)
	}
	for _, d := range p.Diagnostics {
		if d.Severity == "error" {
			t.Fatalf("plan on %s refused: %s: %s", root, d.Summary, d.Detail)
		}
	}
	return p
}

// installed is the first host's package database: name → version.
func installed(t *testing.T, root string) map[string]string {
	t.Helper()
	h := hosttest.New(t, root)
	obs := providers.Observe(context.Background(), h, providers.ObserveOptions{})
	out := map[string]string{}
	for _, p := range obs.Packages.Packages {
		if p.State == facts.StateInstalled {
			out[p.Name] = p.Version
		}
	}
	return out
}

// blockVersions are the versions the captured spec states, by block.
func blockVersions(t *testing.T, specFile string) map[string]string {
	t.Helper()
	s, diags := spec.Load(specFile, spec.LoadOptions{})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	out := map[string]string{}
	if s.Driver != nil {
		out["driver"] = s.Driver.Version.Value.String()
	}
	if s.CUDA != nil {
		out["cuda"] = s.CUDA.Version.Value.String()
	}
	if s.CuDNN != nil {
		out["cudnn"] = s.CuDNN.Version.Value.String()
	}
	return out
}

// initOn captures the host at root and checks that the spec plans no
// change there.
func initOn(t *testing.T, root string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "gpuenv.hcl")
	if code, _, errOut := gpuenvRun(t, "--root", root, "init", "--out", file); code != 0 {
		t.Fatalf("init: exit %d: %s", code, errOut)
	}
	if code, out, errOut := gpuenvRun(t, "--root", root, "plan", "--detailed-exitcode", file); code != 0 || !strings.Contains(out, "No changes. This host matches the spec.") {
		src, _ := os.ReadFile(file)
		t.Fatalf("plan of init's spec on the same host: exit %d\n%s%s\n%s", code, out, errOut, src)
	}
	return file
}

// checkSameVersions: every package the plan installs is at the version
// the first host has it at; a package the first host does not have (a
// meta package of the same release) is at the version of the block it
// serves. The running kernel's headers are the new host's own.
func checkSameVersions(t *testing.T, p reproPlan, first map[string]string, blocks map[string]string) (pinned int) {
	t.Helper()
	for _, s := range p.Steps {
		for _, op := range s.Operations {
			if op.Packages == nil {
				continue
			}
			for _, pin := range op.Packages.Install {
				pinned++
				switch have, ok := first[pin.Name]; {
				case s.Address == "kernel.headers":
				case pin.KnownAfterApply:
					t.Errorf("%s: %s is known only after apply (constraint %q)", s.Address, pin.Name, pin.Constraint)
				case ok && pin.Version != have:
					t.Errorf("%s: installs %s=%s; the first host has %s", s.Address, pin.Name, pin.Version, have)
				case !ok && !strings.HasPrefix(pin.Version, blocks[s.Address]+"-"):
					t.Errorf("%s: installs %s=%s, which the first host does not have, at another version than the spec's %s", s.Address, pin.Name, pin.Version, blocks[s.Address])
				}
			}
		}
	}
	return pinned
}

// TestInitReproducesUbuntu: init on an Ubuntu 22.04 host that installed
// its stack from NVIDIA's repository, then plan on a fresh Ubuntu 22.04
// (Ubuntu's archive only, nothing of NVIDIA's): the repository comes
// first, with the first host's key; once it is in place (its files as
// the plan writes them, the key the warning asks for, the lists apt-get
// update fetches) every package is planned at the first host's version.
// A keyring holding another key is refused.
func TestInitReproducesUbuntu(t *testing.T) {
	first := hosttest.Build(t, "ubuntu2204-cuda-lists")
	specFile := initOn(t, first)
	src, _ := os.ReadFile(specFile)
	const repo = "repository.cuda-ubuntu2204-x86_64"
	const keyring = "/usr/share/keyrings/cuda-archive-keyring.gpg"
	if !bytes.Contains(src, []byte(`key_fingerprint = "7D5AB3C8EA6E6296C742F6104948E0156F695994"`)) {
		t.Fatalf("the spec does not state the repository's key:\n%s", src)
	}

	fresh := hosttest.Build(t, "ubuntu2204-h100-fresh-lists")
	p := planRepro(t, fresh, specFile)
	if len(p.Steps) == 0 || p.Steps[0].Address != repo {
		t.Fatalf("the first step is not the repository: %+v", p.Steps)
	}
	var packageSteps int
	for _, s := range p.Steps {
		for _, op := range s.Operations {
			if op.Packages != nil && s.Address != "kernel.headers" {
				packageSteps++
				if !slices.Contains(s.DependsOn, repo) {
					t.Errorf("%s installs packages before the repository is configured (depends on %v)", s.Address, s.DependsOn)
				}
			}
		}
	}
	if packageSteps != 3 {
		t.Errorf("%d package steps; want the driver, CUDA and cuDNN", packageSteps)
	}
	if !slices.ContainsFunc(p.Warnings, func(w struct {
		Summary string `json:"summary"`
		Detail  string `json:"detail"`
	}) bool {
		return strings.Contains(w.Detail, "7D5AB3C8EA6E6296C742F6104948E0156F695994")
	}) {
		t.Errorf("no warning names the key the fresh host needs: %+v", p.Warnings)
	}

	// What applying the repository step leaves: its files, the key the
	// warning asks for, and the lists apt-get update fetches from it.
	for _, op := range p.Steps[0].Operations {
		if op.File != nil && !op.File.Remove {
			hosttest.WriteFile(t, fresh, op.File.Path, op.File.Content)
		}
	}
	key, err := os.ReadFile(filepath.Join(first, keyring))
	if err != nil {
		t.Fatal(err)
	}
	lists, _ := filepath.Glob(filepath.Join(first, pkgindex.ListsDir, "developer.download.nvidia.com_*"))
	if len(lists) < 2 {
		t.Fatalf("the first host's lists of the repository: %v", lists)
	}
	for _, l := range lists {
		data, err := os.ReadFile(l)
		if err != nil {
			t.Fatal(err)
		}
		hosttest.WriteFile(t, fresh, filepath.Join(pkgindex.ListsDir, filepath.Base(l)), string(data))
	}

	// Another key at the keyring's path is refused before apt reads the
	// repository.
	other, err := os.ReadFile(filepath.Join(hosttest.TestdataDir(t), "keys", "fixture-other.asc"))
	if err != nil {
		t.Fatal(err)
	}
	hosttest.WriteFile(t, fresh, keyring, string(other))
	code, out, errOut := gpuenvRun(t, "--root", fresh, "plan", specFile)
	if code != 1 || !strings.Contains(errOut, `The keyring of repository "cuda-ubuntu2204-x86_64" holds another key`) {
		t.Errorf("another key: exit %d\n%s%s", code, out, errOut)
	}

	hosttest.WriteFile(t, fresh, keyring, string(key))
	p = planRepro(t, fresh, specFile)
	for _, s := range p.Steps {
		if strings.HasPrefix(s.Address, "repository.") {
			t.Errorf("the repository is planned again once in place: %+v", s)
		}
	}
	if n := checkSameVersions(t, p, installed(t, first), blockVersions(t, specFile)); n < 4 {
		t.Errorf("%d packages planned; want the driver's, the toolkit's and cuDNN's", n)
	}
}

// TestInitReproducesDebian: init on a Debian 12 host whose stack is
// Debian's own (driver, CUDA toolkit, python3-torch), then plan on a
// fresh Debian 12 with the archive's lists: every package at the first
// host's version, python3-torch included, although the fresh archive
// offers a newer driver in bookworm-security.
func TestInitReproducesDebian(t *testing.T) {
	first := hosttest.Build(t, "debian12-distro")
	hosttest.WriteFile(t, first, "/etc/apt/sources.list", "deb http://deb.debian.org/debian bookworm main contrib non-free non-free-firmware\n")
	specFile := initOn(t, first)
	fresh := hosttest.Build(t, "debian12-lists")
	p := planRepro(t, fresh, specFile)
	blocks := blockVersions(t, specFile)
	blocks["framework.pytorch"] = ""
	var addrs []string
	for _, s := range p.Steps {
		addrs = append(addrs, s.Address)
	}
	for _, want := range []string{"driver", "cuda", "framework.pytorch"} {
		if !slices.Contains(addrs, want) {
			t.Errorf("no %s step: %v", want, addrs)
		}
	}
	if n := checkSameVersions(t, p, installed(t, first), blocks); n < 5 {
		t.Errorf("%d packages planned; want the driver's, the toolkit and python3-torch", n)
	}
}
