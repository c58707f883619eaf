package doctor_test

import (
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner/doctor"
	"github.com/gpuenv/gpuenv/planner/facts"
)

// TestCuDNNHeaderLibrary: a header whose release no library beside it
// has is judged against the library of its major, else of another major;
// a header with its own libraries, or with no library anywhere, is not.
func TestCuDNNHeaderLibrary(t *testing.T) {
	header := facts.CuDNNInstall{Version: "7.4.1", Header: "/usr/local/cuda-10.0/include/cudnn.h"}
	for _, tc := range []struct {
		name    string
		ins     []facts.CuDNNInstall
		problem string // text the summary holds; "" for no check
	}{
		{"same major", []facts.CuDNNInstall{header, {Version: "7.1.2", Libraries: []string{"/usr/local/cuda-10.0/lib64/libcudnn.so.7.1.2"}}}, "is cuDNN 7.1.2"},
		{"another major", []facts.CuDNNInstall{{Version: "5.1.10", Header: "/usr/include/cudnn.h"}, {Version: "6.0.21", Libraries: []string{"/usr/lib/x86_64-linux-gnu/libcudnn.so.6.0.21"}}}, "is cuDNN 6.0.21"},
		{"matched", []facts.CuDNNInstall{{Version: "9.1.0", Header: "/usr/include/cudnn_version.h", Libraries: []string{"/usr/lib/x86_64-linux-gnu/libcudnn.so.9.1.0"}}}, ""},
		{"header alone", []facts.CuDNNInstall{header}, ""},
	} {
		r := doctor.Run(doctor.Input{Obs: &facts.Observation{CuDNN: facts.CuDNN{Installs: tc.ins}}})
		var got *doctor.Check
		for i, c := range r.Checks {
			if strings.HasPrefix(c.ID, "cudnn.header-library:") {
				got = &r.Checks[i]
			}
		}
		switch {
		case tc.problem == "" && got != nil:
			t.Errorf("%s: %+v", tc.name, *got)
		case tc.problem != "" && (got == nil || got.Status != doctor.Problem || !strings.Contains(got.Summary, tc.problem) || got.Fix == nil):
			t.Errorf("%s: %+v", tc.name, got)
		}
	}
}
