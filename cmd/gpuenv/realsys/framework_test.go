//go:build realsystem

package realsys

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuenv/gpuenv/planner/facts"
)

// Debian 12's python3-torch: the package version and what its
// torch/version.py says.
const (
	debianTorchPackage = "1.13.1+dfsg-4"
	debianTorchVersion = "1.13.0a0"
)

// Scenario 4: Debian's CPU-only python3-torch, installed by apt. observe
// must report it from the files alone as Debian's package and a CPU-only
// build, and a spec that wants PyTorch on the GPU must be told that this
// build cannot be it.
func TestDebianCPUOnlyTorch(t *testing.T) {
	r := h.NewRoot(t, Torch, Mounts{Proc: true})

	pkg, ok := r.Dpkg()["python3-torch"]
	if !ok || pkg.Version != debianTorchPackage || pkg.Status != "installed" {
		t.Fatalf("dpkg: python3-torch %+v, want %s installed", pkg, debianTorchPackage)
	}
	versionPy, err := os.ReadFile(r.Path("/usr/lib/python3/dist-packages/torch/version.py"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(versionPy), "cuda = None") {
		t.Fatalf("Debian's torch/version.py no longer says cuda = None:\n%s", versionPy)
	}

	obs := r.Observe()
	if p := findPackage(obs, "python3-torch"); p == nil || p.Version != debianTorchPackage || p.State != "installed" {
		t.Errorf("observed package python3-torch %+v, want %s installed", p, debianTorchPackage)
	}
	fw := systemFramework(obs, "pytorch")
	if fw == nil {
		t.Fatalf("no pytorch in the system Python; environments: %+v", obs.Python)
	}
	if fw.Version != debianTorchVersion || !fw.CPUOnly || fw.CUDA != "" {
		t.Errorf("pytorch %s (cpu_only %v, cuda %q), want %s CPU-only", fw.Version, fw.CPUOnly, fw.CUDA, debianTorchVersion)
	}
	if fw.Installer != "debian" || fw.Package != "python3-torch" {
		t.Errorf("pytorch installed by %q from package %q, want debian, python3-torch", fw.Installer, fw.Package)
	}
	if !strings.HasPrefix(fw.Location, "/usr/lib/python3/dist-packages") {
		t.Errorf("pytorch location %q", fw.Location)
	}

	// The distribution's build, as it is: nothing to change, and a
	// warning that it will not use the GPU.
	r.WriteFile("/root/distro/gpuenv.hcl", `framework "pytorch" {
  source = "distro"
}
`)
	res := r.Gpuenv("plan", "--detailed-exitcode", "/root/distro")
	if res.Code != 0 || !strings.Contains(res.Stdout, "No changes") || !strings.Contains(res.Stdout+res.Stderr, "CPU-only build") {
		t.Errorf("plan of the distro framework: want no changes and the CPU-only warning; %s", res)
	}

	// PyTorch for CUDA 12.4 in the same Python: the plan replaces the
	// build and says why.
	r.WriteFile("/root/cuda/gpuenv.hcl", `framework "pytorch" {
  python = "/usr/bin/python3"
  cuda   = "12.4"
}
`)
	res = r.Gpuenv("plan", "--json", "/root/cuda")
	if res.Code != 0 {
		t.Fatalf("plan: %s", res)
	}
	var plan struct {
		Steps []struct {
			Address string         `json:"address"`
			Action  string         `json:"action"`
			Reason  string         `json:"reason"`
			Before  map[string]any `json:"before"`
		} `json:"steps"`
	}
	if err := json.Unmarshal([]byte(res.Stdout), &plan); err != nil {
		t.Fatalf("plan --json: %v\n%s", err, res.Stdout)
	}
	if len(plan.Steps) != 1 {
		t.Fatalf("plan has %d steps, want the framework's only: %s", len(plan.Steps), res.Stdout)
	}
	st := plan.Steps[0]
	if st.Address != "framework.pytorch" || st.Action == "" || st.Before["version"] != debianTorchVersion {
		t.Errorf("step %s %s from %v, want framework.pytorch changing %s", st.Address, st.Action, st.Before, debianTorchVersion)
	}
	if want := debianTorchVersion + " is a CPU-only build and the spec needs the CUDA 12.4 build"; !strings.Contains(st.Reason, want) {
		t.Errorf("reason %q does not say %q", st.Reason, want)
	}
}

// systemFramework is the named framework in the distribution's own Python.
func systemFramework(obs *facts.Observation, name string) *facts.Framework {
	for _, env := range obs.Python {
		if !env.System {
			continue
		}
		for i, f := range env.Frameworks {
			if f.Name == name {
				return &env.Frameworks[i]
			}
		}
	}
	return nil
}

// Scenario 9: verify runs its workload with Debian's CPU-only torch on a
// machine without a GPU. It must fail (exit 2) well before its timeout,
// say that torch ran but not on a GPU, and give doctor's reason.
func TestVerifyCPUOnlyTorch(t *testing.T) {
	r := h.NewRoot(t, Torch, Mounts{Proc: true, Sys: true})

	res := r.Gpuenv("verify", "--json")
	if res.Code != 2 {
		t.Fatalf("verify: want exit 2; %s", res)
	}
	// Importing torch takes a couple of seconds; the workload's own
	// timeout is a minute.
	if res.Took > 30*time.Second {
		t.Errorf("verify took %s; it should fail as soon as torch reports no GPU", res.Took)
	}
	var out struct {
		Verified bool `json:"verified"`
		Results  []struct {
			Interpreter string `json:"interpreter"`
			Framework   string `json:"framework"`
			Version     string `json:"observed_version"`
			Outcome     string `json:"outcome"`
			Error       string `json:"error"`
		} `json:"results"`
		Explanation []doctorCheck `json:"explanation"`
	}
	if err := json.Unmarshal([]byte(res.Stdout), &out); err != nil {
		t.Fatalf("verify --json: %v\n%s", err, res.Stdout)
	}
	if out.Verified || len(out.Results) != 1 {
		t.Fatalf("verify: verified %v with %d results, want one failed workload:\n%s", out.Verified, len(out.Results), res.Stdout)
	}
	w := out.Results[0]
	if w.Interpreter != "/usr/bin/python3" || w.Framework != "pytorch" || w.Version != debianTorchVersion ||
		w.Outcome != "not_on_gpu" || !strings.Contains(w.Error, "CPU-only") {
		t.Errorf("workload %+v, want pytorch %s in /usr/bin/python3 not on a GPU, CPU-only", w, debianTorchVersion)
	}
	if !slices.Contains(out.Explanation, doctorCheck{ID: "pci.gpus", Status: "problem"}) {
		t.Errorf("doctor's explanation does not name the missing GPU: %+v", out.Explanation)
	}

	res = r.Gpuenv("verify")
	if res.Code != 2 || !strings.Contains(res.Stdout, "not on a GPU") || !strings.Contains(res.Stdout, "according to gpuenv doctor") {
		t.Errorf("verify, for a person: want the failure and doctor's reason; %s", res)
	}
}

// doctorCheck is the part of one of doctor's checks the tests look at.
type doctorCheck struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}
