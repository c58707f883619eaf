//go:build realsystem

package realsys

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner/facts"
)

const (
	venvDir    = "/opt/torch"
	venvPython = venvDir + "/bin/python"
)

func pipSpec(version, cuda string) string {
	return fmt.Sprintf(`framework "pytorch" {
  version   = %q
  venv      = %q
  cuda      = %q
  index_url = "file:///srv/pypi/simple"
}
`, version, venvDir, cuda)
}

// Scenario 8: pip for real. apply creates the venv with the root's own
// python3 -m venv and installs torch from a local index of wheels named
// like PyTorch's; an upgrade to another CUDA build and a rollback restore
// exactly the previous wheel. pip and observe agree at every step.
func TestPipTorchInVenv(t *testing.T) {
	r := h.NewRoot(t, Venv, Mounts{Proc: true})
	r.AddPackageIndex("/srv/pypi", []Wheel{torchWheel("2.4.1+cu121", "12.1"), torchWheel("2.5.1+cu124", "12.4")})

	r.WriteFile("/root/torch/gpuenv.hcl", pipSpec("2.4.1", "12.1"))
	res := r.Gpuenv("plan", "--detailed-exitcode", "/root/torch")
	if res.Code != 2 || !strings.Contains(res.Stdout, "2.4.1+cu121") {
		t.Fatalf("plan: want torch 2.4.1+cu121 installed; %s", res)
	}
	if res := r.Gpuenv("apply", "--auto-approve", "/root/torch"); res.Code != 0 {
		t.Fatalf("apply 2.4.1+cu121: %s", res)
	}
	r.checkTorch("2.4.1+cu121", "cu121", "12.1")
	first := r.readFile(r.torchVersionPy())
	if res := r.Gpuenv("plan", "--detailed-exitcode", "/root/torch"); res.Code != 0 || !strings.Contains(res.Stdout, "No changes") {
		t.Errorf("plan after apply: want no changes; %s", res)
	}

	r.WriteFile("/root/torch/gpuenv.hcl", pipSpec("2.5.1", "12.4"))
	if res := r.Gpuenv("apply", "--auto-approve", "/root/torch"); res.Code != 0 {
		t.Fatalf("apply 2.5.1+cu124: %s", res)
	}
	r.checkTorch("2.5.1+cu124", "cu124", "12.4")

	if res := r.Gpuenv("rollback", "--auto-approve"); res.Code != 0 {
		t.Fatalf("rollback: %s", res)
	}
	r.checkTorch("2.4.1+cu121", "cu121", "12.1")
	if got := r.readFile(r.torchVersionPy()); string(got) != string(first) {
		t.Errorf("torch/version.py after rollback:\n%s\nwant, as installed first:\n%s", got, first)
	}
}

// torchVersionPy is torch/version.py in the venv, wherever its Python
// version puts site-packages.
func (r *Root) torchVersionPy() string {
	r.t.Helper()
	return strings.TrimSpace(r.MustSh(venvPython + ` -c 'import sysconfig; print(sysconfig.get_paths()["purelib"] + "/torch/version.py")'`))
}

// checkTorch asserts that pip and observe both see exactly torch version
// in the venv, built for cuda.
func (r *Root) checkTorch(version, variant, cuda string) {
	r.t.Helper()
	var listed []struct{ Name, Version string }
	out := r.MustSh(venvPython + " -m pip list --format=json --disable-pip-version-check")
	if err := json.Unmarshal([]byte(out), &listed); err != nil {
		r.t.Fatalf("pip list: %v\n%s", err, out)
	}
	var torch []string
	for _, p := range listed {
		if strings.EqualFold(p.Name, "torch") {
			torch = append(torch, p.Version)
		}
	}
	if len(torch) != 1 || torch[0] != version {
		r.t.Errorf("pip list: torch %v, want exactly %s", torch, version)
	}
	obs := r.Observe("--python", venvPython)
	var fw *facts.Framework
	for i, env := range obs.Python {
		if env.Interpreter != venvPython {
			continue
		}
		if !env.Virtual {
			r.t.Errorf("observe: %s is not reported as a venv", venvPython)
		}
		for j, f := range env.Frameworks {
			if f.Name == "pytorch" {
				fw = &obs.Python[i].Frameworks[j]
			}
		}
	}
	if fw == nil {
		r.t.Fatalf("observe: no pytorch in %s; environments %+v", venvPython, obs.Python)
	}
	if fw.Version != version || fw.Variant != variant || fw.CUDA != cuda || fw.CPUOnly || fw.Installer != "pip" {
		r.t.Errorf("observe: pytorch %+v, want %s (%s, CUDA %s) installed by pip", *fw, version, variant, cuda)
	}
}
