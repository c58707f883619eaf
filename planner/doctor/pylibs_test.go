package doctor_test

import (
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner/doctor"
	"github.com/gpuenv/gpuenv/planner/facts"
)

// TestRequirementConflict: two frameworks pinning one cuDNN wheel to
// different releases cannot both be satisfied, and the fix says so
// rather than offering two installs that undo each other; a lone unmet
// requirement gets the install that meets it.
func TestRequirementConflict(t *testing.T) {
	env := facts.PythonEnv{Interpreter: "/opt/venv/bin/python", Prefix: "/opt/venv", Unmet: []facts.UnmetRequirement{
		{Distribution: "torch", Version: "2.5.1", Requirement: "nvidia-cudnn-cu12==9.1.0.70", Target: "nvidia-cudnn-cu12", Installed: "9.7.1.26", File: "/t/METADATA"},
		{Distribution: "jax-cuda12-plugin", Version: "0.6.0", Requirement: "nvidia-cudnn-cu12<10.0,>=9.8", Target: "nvidia-cudnn-cu12", Installed: "9.7.1.26", File: "/j/METADATA"},
	}}
	fix := requirementsFix(t, env)
	if !strings.Contains(fix, "No one release satisfies them all") || !strings.Contains(fix, "torch and jax-cuda12-plugin") {
		t.Errorf("a conflict's fix: %s", fix)
	}
	env.Unmet = env.Unmet[1:]
	env.Unmet[0].InstalledFor = []string{"torch 2.7.0"}
	fix = requirementsFix(t, env)
	if !strings.Contains(fix, "nvidia-cudnn-cu12 9.7.1.26 (for torch 2.7.0)") {
		t.Errorf("the installed release's owner: %s", fix)
	}
	env.Unmet[0].InstalledFor = nil
	fix = requirementsFix(t, env)
	if strings.Contains(fix, "No one release") || !strings.Contains(fix, "/opt/venv/bin/python -m pip install 'nvidia-cudnn-cu12<10.0,>=9.8'") {
		t.Errorf("a lone requirement's fix: %s", fix)
	}
}

func requirementsFix(t *testing.T, env facts.PythonEnv) string {
	t.Helper()
	r := doctor.Run(doctor.Input{Obs: &facts.Observation{Python: []facts.PythonEnv{env}}})
	for _, c := range r.Checks {
		if c.ID == "framework.requirements:/opt/venv/bin/python" {
			if c.Status != doctor.Problem || c.Fix == nil {
				t.Fatalf("%+v", c)
			}
			return c.Fix.Text + "\n" + strings.Join(c.Fix.Commands, "\n")
		}
	}
	t.Fatal("no framework.requirements check")
	return ""
}
