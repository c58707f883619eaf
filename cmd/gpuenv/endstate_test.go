package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/doctor"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/finding"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

// TestPlanWarnsWhereDoctorWould runs, for every fixture root and spec the
// golden plans cover, all of doctor's checks over the plan's predicted end
// state, and holds the plan to each finding that doctor makes there, of
// stage observe or plan: the plan warns of it (with its rule's ID), or
// refuses naming it. Every flagged rule must be declared, of a stage or doctor's
// alone with a reason. The prediction is held to the host too: once the files the
// plan writes are on disk, observe sees what was predicted.
func TestPlanWarnsWhereDoctorWould(t *testing.T) {
	judged, written, teams := 0, 0, 0
	for _, c := range planCases {
		t.Run(c.name(), func(t *testing.T) {
			root := hosttest.Build(t, c.root)
			if c.indexes {
				withPlanHost(t, nil, noRunner{t})
				newCandidates = func(h *host.Host) planner.Candidates { return providers.Candidates(h) }
			} else {
				withPlanHost(t, loadCandidates(t, c.root), runnerFor(t, c.root))
			}
			obs := observeDocument(t, root)
			code, stdout, stderr := runPlanCase(root, c, true)
			var p plan.Plan
			if code != exitOK && code != exitChanges {
				// A refused plan names the rule of each problem. One
				// refused for another reason has no end state to judge:
				// its golden plan says why.
				_, _, stderr = runPlanCase(root, c, false)
				if !strings.Contains(stderr, "gpuenv doctor reports") {
					return
				}
			} else if err := json.Unmarshal([]byte(stdout), &p); err != nil {
				t.Fatal(err)
			}
			end := providers.EndState(obs, p.Steps)
			// Doctor judges for the user plan judges for: the one running
			// the test, as the root's /etc/passwd knows them.
			h, err := host.New(root)
			if err != nil {
				t.Fatal(err)
			}
			user, err := invokingUser(&globalOptions{}, h)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range doctor.Run(doctor.Input{Obs: end, User: user}).Checks {
				if !f.Status.Flagged() {
					continue
				}
				if _, declared := doctor.StageOf(f.ID); !declared {
					t.Errorf("doctor would report %s (%s) after apply, a rule declared of no stage", f.ID, f.Summary)
					continue
				}
				judged++
				warned := slices.ContainsFunc(p.Warnings, func(w finding.Finding) bool {
					return w.ID == f.ID && w.Summary == f.Summary && w.Status == f.Status
				})
				refused := strings.Contains(stderr, "("+f.ID+"):") && strings.Contains(stderr, "Error: "+f.Summary)
				if !warned && !refused {
					t.Errorf("doctor would report %s (%s) after apply, and the plan says nothing of it:\n%s", f.ID, f.Summary, strings.Join(f.Evidence, "\n"))
				}
			}
			if len(p.Steps) == 0 {
				return
			}
			written += writePlannedFiles(t, root, p.Steps)
			after := observeDocument(t, root)
			teams += len(after.Environment.Teams)
			if diff := cmp.Diff(end.Environment.Variables, after.Environment.Variables); diff != "" {
				t.Errorf("the predicted variables differ from those observed once the plan's files are written (-predicted +observed):\n%s", diff)
			}
			if diff := cmp.Diff(end.Environment.Teams, after.Environment.Teams); diff != "" {
				t.Errorf("the predicted teams differ from those observed once the plan's files are written (-predicted +observed):\n%s", diff)
			}
			// The engines' files are read as observe reads them; their
			// owner and mode are the plan's, which this test does not set.
			engines := func(o *facts.Observation) []facts.EngineConfig {
				out := slices.Clone(o.Containers.Engines)
				for i := range out {
					out[i].Mode, out[i].UID, out[i].GID = 0, 0, 0
				}
				return out
			}
			if diff := cmp.Diff(engines(end), engines(after)); diff != "" {
				t.Errorf("the predicted engines differ from those observed once the plan's files are written (-predicted +observed):\n%s", diff)
			}
		})
	}
	if judged == 0 {
		t.Error("no fixture's end state has a finding of stage plan: the test judges nothing")
	}
	if written == 0 {
		t.Error("no plan writes a file: no prediction was held to the host")
	}
	if teams == 0 {
		t.Error("no plan writes a team's file: no team's prediction was held to the host")
	}
}

// observeDocument is gpuenv observe --json of root, read back.
func observeDocument(t *testing.T, root string) *facts.Observation {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"--root", root, "observe", "--json"}, nil, &out, &errb, nil); code != exitOK {
		t.Fatalf("observe exit %d:\n%s", code, errb.String())
	}
	obs := new(facts.Observation)
	if err := json.Unmarshal(out.Bytes(), obs); err != nil {
		t.Fatal(err)
	}
	return obs
}

// writePlannedFiles does what the plan's file operations do to the root,
// and nothing else, and returns how many files it wrote or removed.
func writePlannedFiles(t *testing.T, root string, steps []plan.Step) int {
	t.Helper()
	n := 0
	for _, s := range steps {
		for _, op := range s.Operations {
			f := op.File
			if f == nil || f.Generate != "" {
				continue
			}
			n++
			p := filepath.Join(root, f.Path)
			if f.Remove {
				if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
					t.Fatal(err)
				}
				continue
			}
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(f.Content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return n
}
