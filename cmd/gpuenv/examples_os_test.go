package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

// exampleTarget reads the system an example says it targets, from the
// "# Targets: …" line that opens its gpuenv.hcl.
var exampleTarget = regexp.MustCompile(`\A# Targets: (Ubuntu [0-9]+\.[0-9]+|Debian [0-9]+|RHEL [0-9]+|any)\b`)

// targetRoots are the fixture machines of each system an example may
// target; an example for any system is planned on Debian 12's.
var targetRoots = map[string]string{
	"Ubuntu 22.04": "ubuntu2204-h100-fresh",
	"Debian 12":    "debian12-distro",
	"RHEL 9":       "rhel9",
	"any":          "debian12-distro",
}

// exampleRoots are the fixture machines of examples written for one kind
// of board: the HGX example plans on the working DGX H100 (eight GPUs,
// four NVSwitches, Fabric Manager).
var exampleRoots = map[string]string{"hgx-8gpu": "ubuntu2204-working"}

// exampleNVML are the NVML mocks of examples whose blocks only NVML can
// plan: the HGX example's MIG layouts are checked against the DGX H100's
// GPUs (H100 80GB), as a plan on the board itself checks them.
var exampleNVML = map[string]string{"hgx-8gpu": "dgxh100"}

// Every example says which system it targets, in its spec and in the
// spec reference's table (docs/spec-reference.md), and plans on a fixture machine of that system. On
// Debian 12, one written for another system plans too, or fails only
// saying that it names another system's packages.
func TestExamplesPlanOnTheirSystem(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("..", "..", "examples", "*"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "docs", "spec-reference.md"))
	if err != nil {
		t.Fatal(err)
	}
	errLine := regexp.MustCompile(`(?m)^Error: (.*)$`)
	for _, dir := range dirs {
		name := filepath.Base(dir)
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(filepath.Join(dir, "gpuenv.hcl"))
			if err != nil {
				t.Fatal(err)
			}
			m := exampleTarget.FindSubmatch(src)
			if m == nil {
				t.Fatalf("%s/gpuenv.hcl does not open with \"# Targets: SYSTEM\"", dir)
			}
			target := string(m[1])
			row := regexp.MustCompile("(?m)^\\| `examples/" + regexp.QuoteMeta(name) + "` \\| ([^|]*) \\|")
			if rm := row.FindSubmatch(readme); rm == nil || !strings.Contains(string(rm[1]), target) {
				t.Errorf("docs/spec-reference.md's examples table does not say that %s targets %s", name, target)
			}
			args := []string(nil)
			if name == "variables" {
				args = []string{"--var", "cuda=12.4"}
			}
			plan := func(root string) (int, string, string) {
				withPlanHost(t, loadCandidates(t, root), runnerFor(t, root))
				if mock, ok := exampleNVML[name]; ok && root == exampleRoots[name] {
					hostOptions = append(hostOptions, host.WithNVML(host.NewNVML(hosttest.NVMLServer(mock))))
				}
				return runPlanCase(hosttest.Build(t, root), planCase{root: root, spec: "examples/" + name, args: args}, false)
			}
			root := targetRoots[target]
			if r, ok := exampleRoots[name]; ok {
				root = r
			}
			if root == "" {
				t.Fatalf("no fixture machine for %s", target)
			}
			code, stdout, stderr := plan(root)
			if code != exitOK {
				t.Errorf("plan on %s (%s): exit %d\n%s%s", root, target, code, stdout, stderr)
			}
			if _, ok := exampleNVML[name]; ok && (strings.Contains(stdout, "cannot be planned yet") || strings.Contains(stdout, "gpu0.mig")) {
				t.Errorf("plan on %s leaves a MIG layout unplanned or touches a GPU without one:\n%s", root, stdout)
			}
			if name == "hgx-8gpu" {
				// The board's eight GPUs get their /dev/char links, the
				// MIG capabilities included; the NVSwitches' nodes not.
				// GPUs 6 and 7 take the example's MIG layouts, planned
				// against the H100's profiles; the others stay whole.
				for _, want := range []string{"→ link /dev/char/195:0 to /dev/nvidia0\n", "→ link /dev/char/195:7 to /dev/nvidia7\n", "→ link /dev/char/511:2 to /dev/nvidia-caps/nvidia-cap2\n",
					"device.6.mig\n", "device.7.mig\n", "gpu6.mig_layout (none) → ", "gpu7.mig_mode   disabled → enabled\n",
					// The teams' files, and the script that reads them.
					"+ /etc/gpuenv/teams/training.env         CUDA_VISIBLE_DEVICES=0,1,2,3\n", "+ /etc/gpuenv/teams/vision.env           CUDA_VISIBLE_DEVICES=4,5\n",
					"team members: CUDA_VISIBLE_DEVICES from /etc/gpuenv/teams/<group>.env"} {
					if !strings.Contains(stdout, want) {
						t.Errorf("plan on %s lacks %q:\n%s", root, want, stdout)
					}
				}
			}
			if root == "debian12-distro" {
				return
			}
			code, stdout, stderr = plan("debian12-distro")
			if code == exitOK {
				return
			}
			errs := errLine.FindAllStringSubmatch(stderr, -1)
			if len(errs) == 0 {
				t.Fatalf("plan on Debian 12: exit %d without an error\n%s%s", code, stdout, stderr)
			}
			for _, e := range errs {
				if e[1] != "Packages for another operating system" {
					t.Errorf("plan on Debian 12 fails with %q, not only because the spec is for %s:\n%s", e[1], target, stderr)
				}
			}
			want := "This spec names " + target + " packages; the host is Debian 12"
			if !strings.Contains(strings.Join(strings.Fields(stderr), " "), want) {
				t.Errorf("plan on Debian 12 does not say %q:\n%s", want, stderr)
			}
		})
	}
}
