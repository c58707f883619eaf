package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/gpuenv/gpuenv/planner/doctor"
	"github.com/gpuenv/gpuenv/providers/probe/verify"
)

// On a terminal doctor colours a problem's ✗ red and a warning's !
// yellow, as plan colours its actions; elsewhere (a file, a pipe,
// NO_COLOR) it writes the marks alone.
func TestDoctorMarksColoured(t *testing.T) {
	r := &doctor.Report{Checks: []doctor.Check{
		{Status: doctor.Problem, Summary: "no driver"},
		{Status: doctor.Warning, Summary: "not held"},
		{Status: doctor.OK, Summary: "fine"},
	}}
	var out bytes.Buffer
	if err := (&doctorHuman{w: &out, color: true}).Report(r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"  " + ansiRed + "✗" + ansiReset + " no driver\n", "  " + ansiYellow + "!" + ansiReset + " not held\n", "  ✓ fine\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("doctor on a terminal lacks %q:\n%q", want, out.String())
		}
	}
	out.Reset()
	g := &globalOptions{Stdout: &out, Env: []string{"NO_COLOR=1"}}
	if err := newDoctorView(g).Report(r); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "\x1b") || !strings.Contains(out.String(), "  ✗ no driver\n") {
		t.Errorf("doctor off a terminal writes escapes:\n%q", out.String())
	}
}

// verify's ✗ are red on a terminal, in its lines and in its table, whose
// columns stay aligned since the escapes are added as it is written.
func TestVerifyCrossColoured(t *testing.T) {
	var out bytes.Buffer
	v := &verifyHuman{out: printer{w: &crossColor{w: &out}}, color: true}
	rs := []verify.Result{{Workload: verify.Workload{Framework: "pytorch", Interpreter: "/opt/venv/bin/python"}, Config: verify.Config{Device: verify.GPU}}}
	if err := v.Result(rs); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), ansiRed+"✗"+ansiReset) {
		t.Errorf("verify's failure is not red:\n%q", out.String())
	}
}

// While a workload runs on a terminal, verify draws one line that says
// what runs on which GPUs, marks each GPU as it finishes, and erases the
// line before the result is printed.
func TestVerifyLiveLine(t *testing.T) {
	var out bytes.Buffer
	clock := time.Unix(0, 0)
	l := newVerifyLive(&out, func() int { return 200 })
	l.now = func() time.Time { return clock }
	v := &verifyHuman{out: printer{w: &out}, live: l}

	v.Running(nil, nil)
	if got := out.String(); got != "\r  … checking the CUDA driver (0s)\x1b[K" {
		t.Errorf("the check's line: %q", got)
	}
	out.Reset()
	w := verify.Workload{Framework: "pytorch", Version: "2.5.1", Interpreter: "/opt/ml/bin/python"}
	v.Running(&w, []*verify.Target{{Index: 0}, {Index: 1}})
	clock = clock.Add(7 * time.Second)
	v.Finished(1, verify.Result{Outcome: verify.OnGPU, Config: verify.Config{Device: verify.GPU}})
	want := "\r  … running pytorch 2.5.1 in /opt/ml/bin/python: GPU 0 running, GPU 1 ✓ (7s)\x1b[K"
	if !strings.HasSuffix(out.String(), want) {
		t.Errorf("the workload's line: %q, want it to end %q", out.String(), want)
	}
	out.Reset()
	if err := v.Result([]verify.Result{{Outcome: verify.OnGPU, Config: verify.Config{Device: verify.GPU}, Workload: w}}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "\r\x1b[K  ✓") {
		t.Errorf("the live line is not erased before the result: %q", out.String())
	}
	if l.stop != nil {
		t.Error("the line's clock still runs after the result")
	}
}
