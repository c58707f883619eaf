package finding

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// An observation's problems keep the layer and one-line message that
// documents have always had, and read back as the findings they were.
func TestProblemsJSON(t *testing.T) {
	ps := Problems{{ID: "driver.versions", Status: Problem, Stage: Observe, Layer: "driver",
		Summary: "driver/library version mismatch", Evidence: []string{"e"}, Fix: &Fix{Text: "reboot"}}}
	b, err := json.Marshal(ps)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"layer":"driver","message":"driver/library version mismatch — reboot","id":"driver.versions","evidence":["e"],"fix":{"text":"reboot"}}]`
	if string(b) != want {
		t.Errorf("problems are written as\n%s\nwant\n%s", b, want)
	}
	var back Problems
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ps, back); diff != "" {
		t.Errorf("problems after a round trip (-want +got):\n%s", diff)
	}
	// A fix with a spec or commands is no part of the message.
	ps = Problems{{ID: "driver.versions", Status: Problem, Stage: Observe, Layer: "driver", Summary: "mismatch",
		Fix: &Fix{Text: "Reboot:", Spec: "driver {\n  hold = true\n}", Commands: []string{"modprobe nvidia"}}}}
	if b, err = json.Marshal(ps); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ps, back); diff != "" || ps[0].Message() != "mismatch" {
		t.Errorf("a problem whose fix has a spec, after a round trip (-want +got):\n%s\nmessage %q", diff, ps[0].Message())
	}
	// A rule that rates the case a warning says so; it reads back as one.
	ps = Problems{{ID: "kernel.nouveau", Status: Warning, Stage: Observe, Layer: "kernel", Summary: "nothing blacklists nouveau"}}
	if b, err = json.Marshal(ps); err != nil {
		t.Fatal(err)
	}
	if want := `[{"layer":"kernel","message":"nothing blacklists nouveau","id":"kernel.nouveau","status":"warning"}]`; string(b) != want {
		t.Errorf("a warning is written as\n%s\nwant\n%s", b, want)
	}
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ps, back); diff != "" {
		t.Errorf("a warning after a round trip (-want +got):\n%s", diff)
	}
	// A document written before problems were findings has only the two.
	if err := json.Unmarshal([]byte(`[{"layer":"pci","message":"no driver is bound"}]`), &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Problems{{Status: Problem, Stage: Observe, Layer: "pci", Summary: "no driver is bound"}}, back); diff != "" {
		t.Errorf("an older problem reads as (-want +got):\n%s", diff)
	}
}

// A plan's warnings keep "check", "summary", "detail" and "evidence"; a
// warning says no status, a problem does.
func TestWarningsJSON(t *testing.T) {
	ws := Warnings{
		{ID: "secure-boot-dkms", Status: Warning, Stage: Plan, Summary: "s", Detail: "d", Evidence: []string{"e"}},
		{ID: "env.cuda-visible-devices", Status: Problem, Stage: Plan, Summary: "hides", Fix: &Fix{Text: "t", Spec: "environment {}"}},
	}
	b, err := json.Marshal(ws)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"check":"secure-boot-dkms","summary":"s","detail":"d","evidence":["e"]},` +
		`{"check":"env.cuda-visible-devices","status":"problem","summary":"hides","fix":{"text":"t","spec":"environment {}"}}]`
	if string(b) != want {
		t.Errorf("warnings are written as\n%s\nwant\n%s", b, want)
	}
	var back Warnings
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ws, back); diff != "" {
		t.Errorf("warnings after a round trip (-want +got):\n%s", diff)
	}
}

// Doctor's report writes a finding as it always wrote a check: the stage
// and layer are not in it, nor a detail no check has.
func TestFindingJSONIsDoctorsCheck(t *testing.T) {
	f := Finding{ID: "kernel.nouveau", Group: Group{Number: 2, Name: "Kernel module"}, Status: OK, Summary: "s", Evidence: []string{}, Stage: Observe, Layer: "kernel"}
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"kernel.nouveau","group":{"number":2,"name":"Kernel module"},"status":"ok","summary":"s","evidence":[]}`
	if string(b) != want {
		t.Errorf("a finding is written as\n%s\nwant\n%s", b, want)
	}
}
