package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gpuenv/gpuenv/apply"
)

// newTestRunHuman is the text view writing to out, off a terminal.
func newTestRunHuman(out *bytes.Buffer) *runHuman {
	return &runHuman{kind: apply.KindApply, out: out, errw: out, stillRunning: defaultStillRunning}
}

// The text of an apply and its revert, as a person reads it in a file:
// each operation on one line that its end completes, an executor's note
// inside that line, the messages between, the skipped operation's
// reason under it, a failure after the operation ran with its time, the
// inverses indented, and the package check that failed after them.
func TestRunHumanText(t *testing.T) {
	var out bytes.Buffer
	v := newTestRunHuman(&out)
	op := func(i int, step, what string) *apply.EventOperation {
		return &apply.EventOperation{Index: i, Total: 3, Step: step, Kind: "packages", What: what}
	}
	undo := &apply.EventOperation{Index: 1, Undoes: 4, Step: "driver", Kind: "packages", What: "apt: installing nvidia-smi 535"}
	one, two, three := op(1, "driver", "apt: installing nvidia-smi 550"), op(2, "kernel.nouveau", "rebuilding the initramfs"), op(3, "group.video", "adding bob to video")
	for _, e := range []apply.RunEvent{
		{Type: apply.RunMessage, Line: "Applying generation 4: 3 operations. Package managers' output: /var/lib/gpuenv/generations/4/log"},
		{Type: apply.RunOperationStart, Operation: one},
		{Type: apply.RunNote, Line: "waiting up to 1m0s for dpkg's lock /var/lib/dpkg/lock-frontend, held by unattended-upgr (1234)"},
		{Type: apply.RunOperationRun, Operation: one},
		{Type: apply.RunOutput, Operation: one, Line: "Setting up nvidia-smi"},
		{Type: apply.RunOperationEnd, Operation: one, Outcome: "done"},
		{Type: apply.RunOperationStart, Operation: two},
		{Type: apply.RunOperationEnd, Operation: two, Outcome: "skipped", Error: "not the running system"},
		{Type: apply.RunOperationStart, Operation: three},
		{Type: apply.RunOperationRun, Operation: three},
		{Type: apply.RunOperationEnd, Operation: three, Outcome: "failed", Error: "gpasswd: exit status 1"},
		{Type: apply.RunMessage, Line: "Reverting 1 operations, newest first:"},
		{Type: apply.RunRevertStart, Count: 1},
		{Type: apply.RunOperationStart, Operation: undo},
		{Type: apply.RunOperationEnd, Operation: undo, Outcome: "done"},
		{Type: apply.RunRevertCheckFailed, Error: "nvidia-smi is at 550, not 535"},
		{Type: apply.RunRevertEnd, Outcome: "failed", Count: 1, Error: "checking the package database: nvidia-smi is at 550, not 535"},
	} {
		v.Event(e)
	}
	got := regexp.MustCompile(`\(\d+(\.\d+)?m?s\)|after \d+(\.\d+)?m?s`).ReplaceAllStringFunc(out.String(), func(s string) string {
		if strings.HasPrefix(s, "after") {
			return "after T"
		}
		return "(T)"
	})
	want := `Applying generation 4: 3 operations. Package managers' output: /var/lib/gpuenv/generations/4/log
[1/3] driver: apt: installing nvidia-smi 550 …
      waiting up to 1m0s for dpkg's lock /var/lib/dpkg/lock-frontend, held by unattended-upgr (1234)
 done (T)
[2/3] kernel.nouveau: rebuilding the initramfs … skipped
      not the running system
[3/3] group.video: adding bob to video … failed after T
Reverting 1 operations, newest first:
  undo 4.1 driver: apt: installing nvidia-smi 535 … done
  the package database is not as it was: nvidia-smi is at 550, not 535
`
	if got != want {
		t.Errorf("the text:\n%s\nwant:\n%s", got, want)
	}

	// An operation that fails while it is prepared has not run: no time.
	out.Reset()
	v.Event(apply.RunEvent{Type: apply.RunOperationStart, Operation: one})
	v.Event(apply.RunEvent{Type: apply.RunOperationEnd, Operation: one, Outcome: "failed", Error: "preparing: no such package"})
	if want := "[1/3] driver: apt: installing nvidia-smi 550 … failed\n"; out.String() != want {
		t.Errorf("a failure while preparing: %q, want %q", out.String(), want)
	}
}

// An operation that runs long says every stillRunning, in a file, that it
// still runs, and how long it has; it says nothing of the kind while it
// is prepared, nor on a terminal, whose live line shows its progress
// instead (and wants the progress events the file's text does not).
func TestRunHumanStillRunning(t *testing.T) {
	op := &apply.EventOperation{Index: 1, Total: 1, Step: "driver", Kind: "packages", What: "apt: installing nvidia-smi 550"}
	for _, tc := range []struct {
		name  string
		live  bool
		runs  bool
		still bool
	}{{"running", false, true, true}, {"preparing", false, false, false}, {"live", true, true, false}} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			v := newTestRunHuman(&out)
			v.stillRunning = 40 * time.Millisecond
			if tc.live {
				v.live = newLiveLine(&out, func() int { return 80 })
			}
			if v.Wants().Progress != tc.live || v.Wants().Output {
				t.Errorf("the view wants %+v", v.Wants())
			}
			v.Event(apply.RunEvent{Type: apply.RunOperationStart, Operation: op})
			if tc.runs {
				v.Event(apply.RunEvent{Type: apply.RunOperationRun, Operation: op})
			}
			time.Sleep(150 * time.Millisecond)
			v.Event(apply.RunEvent{Type: apply.RunOperationEnd, Operation: op, Outcome: "done"})
			text := out.String()
			if n := strings.Count(text, "\n      … still running ("); (n >= 2) != tc.still || (n > 0) != tc.still {
				t.Errorf("%d lines say the operation is still running:\n%s", n, text)
			}
			time.Sleep(100 * time.Millisecond)
			if out.String() != text || !strings.HasSuffix(text, ")\n") {
				t.Errorf("the text goes on after the operation's end:\n%s", out.String())
			}
		})
	}
}

// A run that stops inside an operation, its journal not written, ends
// the operation's "still running" lines with it.
func TestRunHumanStillRunningEndsWithTheRun(t *testing.T) {
	var out bytes.Buffer
	v := newTestRunHuman(&out)
	v.stillRunning = 20 * time.Millisecond
	op := &apply.EventOperation{Index: 1, Total: 1, Step: "driver", Kind: "packages", What: "apt: installing nvidia-smi 550"}
	v.Event(apply.RunEvent{Type: apply.RunOperationStart, Operation: op})
	v.Event(apply.RunEvent{Type: apply.RunOperationRun, Operation: op})
	time.Sleep(50 * time.Millisecond)
	v.Attention(&apply.Result{Kind: apply.KindApply, Status: apply.StatusRunning}, errors.New("the journal could not be written"))
	text := out.String()
	time.Sleep(80 * time.Millisecond)
	if !strings.Contains(text, "still running") || out.String() != text {
		t.Errorf("the text before the end:\n%s\nand after it:\n%s", text, out.String())
	}
}

// The JSON view prints the events of the stream's format 1.1 as they
// are, an executor's note as a message, and nothing of the events only
// the text shows; it wants every line of output and all progress.
func TestRunJSONKeepsTheStreamFormat(t *testing.T) {
	var out bytes.Buffer
	v := &runJSON{kind: apply.KindApply, st: newEventStream(&out)}
	if w := v.Wants(); !w.Output || !w.Progress {
		t.Errorf("the JSON view wants %+v", w)
	}
	at := time.Date(2026, 12, 1, 19, 36, 45, 0, time.UTC)
	op := &apply.EventOperation{Index: 1, Total: 1, Step: "group.video", Kind: "group", What: "adding bob to video"}
	for _, e := range []apply.RunEvent{
		{Type: apply.RunMessage, Line: "Applying generation 3"},
		{Type: apply.RunOperationStart, Operation: op},
		{Type: apply.RunNote, Line: "waiting for the lock"},
		{Type: apply.RunOperationRun, Operation: op},
		{Type: apply.RunOutput, Operation: op, Line: "$ gpasswd -a bob video"},
		{Type: apply.RunProgress, Operation: op, Progress: &apply.Progress{Command: 1, Phase: apply.PhaseRunning}},
		{Type: apply.RunOperationEnd, Operation: op, Outcome: "done", Seconds: 0.008},
		{Type: apply.RunRevertStart, Count: 1},
		{Type: apply.RunRevertCheckFailed, Error: "nvidia-smi is at 550"},
		{Type: apply.RunRevertEnd, Outcome: "failed", Count: 1, Error: "checking the package database: nvidia-smi is at 550"},
	} {
		e.Timestamp, e.Generation = at, 3
		v.Event(e)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")[1:]
	want := []string{
		`{"type":"message","@timestamp":"2026-12-01T19:36:45Z","generation":3,"line":"Applying generation 3"}`,
		`{"type":"operation_start","@timestamp":"2026-12-01T19:36:45Z","generation":3,"operation":{"index":1,"total":1,"step":"group.video","kind":"group","what":"adding bob to video"}}`,
		`{"type":"message","@timestamp":"2026-12-01T19:36:45Z","generation":3,"line":"waiting for the lock"}`,
		`{"type":"package_manager_output","@timestamp":"2026-12-01T19:36:45Z","generation":3,"operation":{"index":1,"total":1,"step":"group.video","kind":"group","what":"adding bob to video"},"line":"$ gpasswd -a bob video"}`,
		`{"type":"progress","@timestamp":"2026-12-01T19:36:45Z","generation":3,"operation":{"index":1,"total":1,"step":"group.video","kind":"group","what":"adding bob to video"},"progress":{"command":1,"phase":"running","seconds":0}}`,
		`{"type":"operation_end","@timestamp":"2026-12-01T19:36:45Z","generation":3,"operation":{"index":1,"total":1,"step":"group.video","kind":"group","what":"adding bob to video"},"outcome":"done","seconds":0.008}`,
		`{"type":"revert_start","@timestamp":"2026-12-01T19:36:45Z","generation":3,"count":1}`,
		`{"type":"revert_end","@timestamp":"2026-12-01T19:36:45Z","generation":3,"outcome":"failed","error":"checking the package database: nvidia-smi is at 550","count":1}`,
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("the stream:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	for _, l := range lines {
		if !json.Valid([]byte(l)) {
			t.Errorf("not JSON: %s", l)
		}
	}
}
