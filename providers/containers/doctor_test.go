package containers_test

import (
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner/doctor"
)

func containerChecks(r *doctor.Report) map[string]doctor.Check {
	out := map[string]doctor.Check{}
	for _, c := range r.Checks {
		if c.Group == doctor.GroupContainers {
			out[c.ID] = c
		}
	}
	return out
}

func TestDoctor(t *testing.T) {
	// A host without anything of containers gets no such checks.
	if got := containerChecks(doctor.Run(doctor.Input{Obs: observe(t, root(t, false))})); len(got) != 0 {
		t.Errorf("checks on a host without containers: %+v", got)
	}

	obs := observe(t, root(t, true, "docker-configured", "stale-cdi"))
	got := containerChecks(doctor.Run(doctor.Input{Obs: obs}))
	want := map[string]doctor.Status{
		"containers.toolkit":           doctor.OK,
		"containers.engine:docker":     doctor.OK,
		"containers.engine:containerd": doctor.Warning,
		"containers.cdi":               doctor.Problem,
	}
	if len(got) != len(want) {
		t.Errorf("checks %+v", got)
	}
	for id, st := range want {
		if got[id].Status != st {
			t.Errorf("%s: %s (%s), want %s", id, got[id].Status, got[id].Summary, st)
		}
	}
	if s := got["containers.cdi"].Summary; !strings.Contains(s, "names driver 535.261.03, and the installed driver is 550.54.15") || !strings.Contains(s, "libcuda.so.535.261.03") {
		t.Errorf("stale spec: %s", s)
	}
	if f := got["containers.engine:containerd"].Fix; f == nil || !strings.Contains(f.Spec, `engines = ["containerd"]`) {
		t.Errorf("containerd fix %+v", f)
	}

	// Toolkit 1.17.8 with a driver of branch 565 or later is fine; one
	// older than 1.17.5 is not.
	obs.Containers.DriverVersion = "570.124.06"
	obs.Containers.Toolkit.Version = "1.17.4"
	c := containerChecks(doctor.Run(doctor.Input{Obs: obs}))["containers.toolkit"]
	if c.Status != doctor.Warning || !strings.Contains(c.Summary, "1.17.5 or newer") || c.Fix == nil {
		t.Errorf("old toolkit: %+v", c)
	}

	// A missing spec, with the toolkit there, is a warning.
	obs = observe(t, root(t, true))
	if c := containerChecks(doctor.Run(doctor.Input{Obs: obs}))["containers.cdi"]; c.Status != doctor.Warning {
		t.Errorf("missing spec: %+v", c)
	}
}
