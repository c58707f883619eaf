package doctor_test

import (
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner/doctor"
	"github.com/gpuenv/gpuenv/planner/facts"
	findings "github.com/gpuenv/gpuenv/planner/finding"
)

func teamSetting(group, value string) facts.Assignment {
	return facts.Assignment{Name: "CUDA_VISIBLE_DEVICES", Value: value, File: "/etc/gpuenv/teams/" + group + ".env", Line: 2, Group: group}
}

// Each team's CUDA_VISIBLE_DEVICES is judged as the host-wide one is, as
// a check of its own: a GPU index the host lacks, a MIG UUID that names
// no MIG device of the host; the evidence names the team's file and
// line, the fix is the team block. A team in order leaves the others'
// checks alone.
func TestTeamVisibleDevices(t *testing.T) {
	obs := migObservation()
	obs.Environment.Teams = []facts.Assignment{
		teamSetting("ghost", "MIG-bbbbbbbb-0000-0000-0000-000000000009"),
		teamSetting("infer", "MIG-aaaaaaaa-0000-0000-0000-000000000002"),
		teamSetting("vision", "1,9"),
	}
	r := doctor.Run(doctor.Input{Obs: obs})

	v := check(t, r, "env.cuda-visible-devices:vision")
	if v.Status != doctor.Problem || v.Summary != "The team vision's CUDA_VISIBLE_DEVICES hides GPUs: /etc/gpuenv/teams/vision.env:2 names GPU 9, but the host has 3 GPUs (0 to 2)" {
		t.Errorf("vision: %s %q", v.Status, v.Summary)
	}
	if len(v.Evidence) != 1 || v.Evidence[0] != "/etc/gpuenv/teams/vision.env:2: CUDA_VISIBLE_DEVICES=1,9" {
		t.Errorf("vision's evidence %q", v.Evidence)
	}
	if v.Fix == nil || v.Fix.Spec != "team \"vision\" {\n  cuda_visible_devices = [\"1\"]\n}" || !strings.Contains(v.Fix.Text, "/etc/gpuenv/teams/vision.env:2") {
		t.Errorf("vision's fix %+v", v.Fix)
	}
	if v.Stage != findings.Plan {
		t.Errorf("vision's check is of stage %v, want plan", v.Stage)
	}

	g := check(t, r, "env.cuda-visible-devices:ghost")
	if g.Status != doctor.Problem || !strings.Contains(g.Summary, "/etc/gpuenv/teams/ghost.env:2 names MIG-bbbbbbbb-0000-0000-0000-000000000009, which no MIG device of this host has") {
		t.Errorf("ghost: %s %q", g.Status, g.Summary)
	}

	in := check(t, r, "env.cuda-visible-devices:infer")
	if in.Status != doctor.OK || !strings.Contains(strings.Join(in.Evidence, "\n"), "MIG-aaaaaaaa-0000-0000-0000-000000000002 is GPU 0 instance 3g.20gb@4 (NVML)") {
		t.Errorf("infer: %s %q %q", in.Status, in.Summary, in.Evidence)
	}

	all := check(t, r, "env.cuda-visible-devices")
	if all.Status != doctor.OK || all.Summary != "CUDA_VISIBLE_DEVICES is not set for everyone: programs of users in no team see every GPU" {
		t.Errorf("host-wide: %s %q", all.Status, all.Summary)
	}

	// Judged at plan on the host as the plan leaves it, as the
	// host-wide setting is.
	var planned []string
	for _, c := range doctor.Judge(doctor.Input{Obs: obs}, findings.Plan) {
		if strings.HasPrefix(c.ID, "env.cuda-visible-devices:") && c.Status == doctor.Problem {
			planned = append(planned, c.ID)
		}
	}
	if strings.Join(planned, " ") != "env.cuda-visible-devices:ghost env.cuda-visible-devices:vision" {
		t.Errorf("plan stage problems %q", planned)
	}
}

// A team's GPU UUIDs are judged against PyTorch 1.13, which reads them
// as ordinals, as the host-wide setting's are; a team's indices make
// CUDA_DEVICE_ORDER matter as the host-wide ones do.
func TestTeamVisibleDevicesRules(t *testing.T) {
	obs := migObservation()
	obs.Environment.Teams = []facts.Assignment{teamSetting("infer", "GPU-00000000-0000-0000-0000-000000000001")}
	obs.Python = []facts.PythonEnv{{Interpreter: "/opt/torch/bin/python", Prefix: "/opt/torch", Frameworks: []facts.Framework{{Name: "pytorch", Version: "1.13.1", Location: "/opt/torch/lib/python3.10/site-packages/torch-1.13.1.dist-info"}}}}
	r := doctor.Run(doctor.Input{Obs: obs})
	c := check(t, r, "env.visible-devices-uuid:/opt/torch/bin/python:pytorch")
	if c.Status != doctor.Problem || len(c.Evidence) == 0 || c.Evidence[0] != "/etc/gpuenv/teams/infer.env:2: CUDA_VISIBLE_DEVICES=GPU-00000000-0000-0000-0000-000000000001" {
		t.Errorf("uuid: %s %q %q", c.Status, c.Summary, c.Evidence)
	}

	obs = migObservation()
	obs.Environment.Teams = []facts.Assignment{teamSetting("vision", "1,2")}
	o := check(t, doctor.Run(doctor.Input{Obs: obs}), "env.cuda-device-order")
	if o.Status != doctor.Warning || len(o.Evidence) == 0 || o.Evidence[0] != "/etc/gpuenv/teams/vision.env:2: CUDA_VISIBLE_DEVICES=1,2" {
		t.Errorf("order: %s %q %q", o.Status, o.Summary, o.Evidence)
	}
}
