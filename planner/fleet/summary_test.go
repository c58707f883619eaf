package fleet

import (
	"fmt"
	"testing"

	planpkg "github.com/gpuenv/gpuenv/planner/plan"
)

// TestSummaryBounded: a host counts once per group however many of its
// steps fall in it; reasons past maxGroups count together under Other,
// so that a run whose every host fails differently keeps a summary of
// bounded size.
func TestSummaryBounded(t *testing.T) {
	s := newSummary(0)
	for i := range maxGroups + 50 {
		s.add(&Host{Name: fmt.Sprintf("h%d", i), Outcome: Refused, Reason: fmt.Sprintf("reason %d", i), Error: fmt.Sprintf("error %d", i)})
	}
	s.add(&Host{Name: "twice", Outcome: Reboot, Steps: []StepRow{
		{Address: "driver", Action: planpkg.Update, NeedsReboot: true},
		{Address: "driver.purge", Action: planpkg.Delete, NeedsReboot: true},
	}})
	s.finish()
	if len(s.Refusals) != maxGroups+1 || s.Refused != maxGroups+50 {
		t.Fatalf("%d refusal groups for %d refused hosts", len(s.Refusals), s.Refused)
	}
	other := s.Refusals[0]
	if other.Key != Other || other.Hosts != 50 || other.First[0] != fmt.Sprintf("h%d", maxGroups) || len(other.First) != maxFirst || other.Error != fmt.Sprintf("error %d", maxGroups) {
		t.Errorf("other %+v", other)
	}
	if len(s.Reboots) != 2 || s.Reboots[0].Hosts != 1 || len(s.Changes) != 2 || s.Reboot != 1 || s.Hosts != maxGroups+51 {
		t.Errorf("reboots %+v, changes %+v", s.Reboots, s.Changes)
	}
}
