package driver

import (
	"testing"

	"github.com/gpuenv/gpuenv/planner/facts"
)

// TestMismatchFollowsTheRule: observe's problem is the doctor's rule
// (doctor.DriverLibraryMismatch), on the cases the copies disagreed on.
func TestMismatchFollowsTheRule(t *testing.T) {
	lib := func(v string) facts.Library {
		return facts.Library{Path: "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so." + v, Version: v}
	}
	tests := []struct {
		name string
		libs []facts.Library
		want string // the problem, "" for none
	}{
		{"the module's version among others", []facts.Library{lib("535.183.01"), lib("550.54.15")}, ""},
		{"several versions, none the module's", []facts.Library{lib("535.183.01"), lib("550.127.05")},
			"driver/library version mismatch: module 550.54.15, library 535.183.01, 550.127.05 — reboot or reload the module"},
		{"two files of one other version", []facts.Library{lib("550.127.05"), {Path: "/usr/lib/i386-linux-gnu/libnvidia-ml.so.550.127.05", Version: "550.127.05"}},
			"driver/library version mismatch: module 550.54.15, library 550.127.05 — reboot or reload the module"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := &observer{obs: &facts.Observation{Driver: facts.Driver{ModuleVersion: "550.54.15", Libraries: tt.libs}}}
			found := o.mismatch()
			var got string
			if len(o.obs.Problems) == 1 {
				got = o.obs.Problems[0].Message
			}
			if found != (tt.want != "") || got != tt.want || len(o.obs.Problems) > 1 {
				t.Errorf("mismatch() = %v, problems %v; want %q", found, o.obs.Problems, tt.want)
			}
		})
	}
}
