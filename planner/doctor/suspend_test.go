package doctor_test

import (
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner/doctor"
)

// A machine that can suspend, with the driver's suspend support off, is
// warned; one that has already resumed since boot is broken now.
func TestSuspendWeight(t *testing.T) {
	for _, tc := range []struct {
		resumes string
		status  doctor.Status
		summary string
	}{
		{"", doctor.Warning, "after a resume, CUDA programs fail"},
		{"0\n", doctor.Warning, "after a resume, CUDA programs fail"},
		{"2\n", doctor.Problem, "resumed from suspend 2 times since boot"},
	} {
		m := machine{fixture: "tensorflow-no-cudnn", change: func(t *testing.T, root string) {
			writeFile("sys/power/state", "freeze mem disk\n")(t, root)
			writeFile("proc/driver/nvidia/params", "ResmanDebugLevel: 4294967295\nPreserveVideoMemoryAllocations: 0\n")(t, root)
			if tc.resumes != "" {
				writeFile("sys/power/suspend_stats/success", tc.resumes)(t, root)
			}
		}}
		var got *doctor.Check
		r := m.report(t)
		for i := range r.Checks {
			if r.Checks[i].ID == "context.suspend" {
				got = &r.Checks[i]
			}
		}
		if got == nil || got.Status != tc.status || !strings.Contains(got.Summary, tc.summary) || got.Fix == nil {
			t.Errorf("resumes %q: %+v; want %s, %q", tc.resumes, got, tc.status, tc.summary)
		}
	}
}
