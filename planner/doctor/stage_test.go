package doctor_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/planner/doctor"
	"github.com/gpuenv/gpuenv/planner/facts"
	findings "github.com/gpuenv/gpuenv/planner/finding"
)

// Plan judges its end state with Judge: it must be exactly doctor's
// verdicts of stage plan, so that the plan warns where doctor would and
// in its words. A check of stage plan that Judge does not run, or one it
// runs that Run reports at another stage, fails here.
func TestJudgeIsRunFilteredByStage(t *testing.T) {
	obs := &facts.Observation{Environment: facts.Environment{Variables: []facts.Assignment{
		{Name: "CUDA_VISIBLE_DEVICES", Value: "0,9", File: "/etc/profile.d/gpuenv.sh", Line: 2},
		{Name: "LD_LIBRARY_PATH", Value: "/usr/local/cuda/lib64", File: "/etc/environment", Line: 1},
	}}}
	for i := range 2 {
		obs.PCI = append(obs.PCI, facts.PCIDevice{Address: "0000:1" + string(rune('0'+i)) + ":00.0", VendorID: 0x10de})
	}
	in := doctor.Input{Obs: obs}
	var want []doctor.Check
	for _, c := range doctor.Run(in).Checks {
		if c.Stage == findings.Plan {
			want = append(want, c)
		}
	}
	got := doctor.Judge(in, findings.Plan)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Judge(plan) differs from Run's checks of stage plan (-Run +Judge):\n%s", diff)
	}
	flagged := 0
	for _, c := range got {
		if c.Status.Flagged() {
			flagged++
		}
	}
	// CUDA_VISIBLE_DEVICES names GPU 9 of two, and GPUs by index without
	// the PCI bus order, and LD_LIBRARY_PATH is set system-wide.
	if flagged != 3 {
		t.Errorf("Judge(plan) flags %d, want 3: %+v", flagged, got)
	}
}
