package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpuenv/gpuenv/planner/doctor"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/probe/cudacheck"
	"github.com/gpuenv/gpuenv/providers/probe/verify"
)

// closedStream fails every write, as a stdout whose reader has gone.
type closedStream struct{}

func (closedStream) Write([]byte) (int, error) { return 0, errors.New("write |1: broken pipe") }

func wantBrokenPipe(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), "broken pipe") {
		t.Errorf("%s: err = %v, want the write error", what, err)
	}
}

// TestObserveDoctorVerifyViewChoice checks that --json, and only it, picks each
// command's JSON view.
func TestObserveDoctorVerifyViewChoice(t *testing.T) {
	for _, json := range []bool{false, true} {
		g := &globalOptions{Root: "/", JSON: json, Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}}
		var got []bool
		_, ok := newObserveView(g).(*observeJSON)
		got = append(got, ok)
		_, ok = newDoctorView(g).(*doctorJSON)
		got = append(got, ok)
		_, ok = newVerifyView(g).(*verifyJSON)
		got = append(got, ok)
		for i, ok := range got {
			if ok != json {
				t.Errorf("json=%v: view %d is JSON = %v", json, i, ok)
			}
		}
	}
}

// TestObserveDoctorVerifyHumanWriteErrors checks that every human view returns
// the error of a failed write instead of dropping it.
func TestObserveDoctorVerifyHumanWriteErrors(t *testing.T) {
	g := &globalOptions{Root: "/", Stdout: closedStream{}, Stderr: closedStream{}}
	wantBrokenPipe(t, "observe", newObserveView(g).Observation(&facts.Observation{}))
	wantBrokenPipe(t, "doctor", newDoctorView(g).Report(&doctor.Report{}))

	v := newVerifyView(g)
	wantBrokenPipe(t, "verify nothing", v.NothingToVerify(&verifyReport{}, nil))
	wantBrokenPipe(t, "verify start", v.Start(verifyStart{Workloads: []verify.Workload{{}}, Timeout: time.Second}))
	wantBrokenPipe(t, "verify checked", v.Checked(&cudacheck.Report{}))
	wantBrokenPipe(t, "verify result", v.Result([]verify.Result{{}}))
	wantBrokenPipe(t, "verify nodes", v.Report(&verifyReport{Report: &verify.Report{}, CreatedDeviceNodes: []string{"/dev/nvidia0"}}))
	wantBrokenPipe(t, "verify report", v.Report(&verifyReport{Report: &verify.Report{}}))
}

// TestObserveDoctorVerifyJSONWriteErrors checks the same of the JSON views.
func TestObserveDoctorVerifyJSONWriteErrors(t *testing.T) {
	g := &globalOptions{Root: "/", JSON: true, Stdout: closedStream{}, Stderr: closedStream{}}
	wantBrokenPipe(t, "observe", newObserveView(g).Observation(&facts.Observation{}))
	wantBrokenPipe(t, "doctor", newDoctorView(g).Report(&doctor.Report{}))
	wantBrokenPipe(t, "verify nothing", newVerifyView(g).NothingToVerify(&verifyReport{}, nil))
	wantBrokenPipe(t, "verify report", newVerifyView(g).Report(&verifyReport{}))
}

// TestVerifyJSONPrintsOnlyTheReport checks that the JSON view keeps
// stdout for the one document.
func TestVerifyJSONPrintsOnlyTheReport(t *testing.T) {
	var out, errOut bytes.Buffer
	v := newVerifyView(&globalOptions{Root: "/", JSON: true, Stdout: &out, Stderr: &errOut})
	for _, err := range []error{
		v.Start(verifyStart{Workloads: []verify.Workload{{}, {}}, Timeout: time.Second}),
		v.Checked(&cudacheck.Report{}),
		v.Result([]verify.Result{{}}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if out.Len() != 0 || errOut.Len() != 0 {
		t.Fatalf("before the report: stdout %q, stderr %q", out.String(), errOut.String())
	}
	if err := v.Report(&verifyReport{FormatVersion: "1.0"}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "{") || !strings.Contains(out.String(), `"format_version": "1.0"`) {
		t.Errorf("report: %q", out.String())
	}
}
