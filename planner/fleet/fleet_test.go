package fleet_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/fleet"
	"github.com/gpuenv/gpuenv/planner/plantest"
	"github.com/gpuenv/gpuenv/spec"
)

// stream is the JSON lines of docs, one per line.
func stream(docs ...[]byte) *bytes.Reader {
	return bytes.NewReader(append(bytes.Join(docs, []byte("\n")), '\n'))
}

// TestFleetOutcomes plans the fleet spec against one host of each kind of
// the test fleet: each comes out as planning it alone on the host would,
// named by its hostname, in input order.
func TestFleetOutcomes(t *testing.T) {
	docs := corpus(t)
	want := []struct {
		member  string
		outcome fleet.Outcome
		steps   []string
		reason  string
	}{
		{"converged", fleet.Unchanged, nil, ""},
		{"older-driver", fleet.Reboot, []string{"driver.purge delete", "driver update"}, ""},
		{"other-branch", fleet.Reboot, []string{"driver.purge delete", "driver replace"}, ""},
		{"no-cuda", fleet.Change, []string{"cuda create"}, ""},
		// gpuenv's tables do not know the GPU; what is installed still
		// satisfies the spec.
		{"unknown-gpu", fleet.Unchanged, nil, ""},
		{"working", fleet.Unchanged, nil, ""},
		{"mismatch", fleet.Unchanged, nil, ""},
		// plan adds NVIDIA's repository, from gpuenv's table, for the
		// fresh Ubuntu host.
		{"fresh-h100", fleet.Reboot, []string{"repository.nvidia-cuda create", "driver create", "cuda create", "cudnn create"}, ""},
		{"debian-lists", fleet.Refused, nil, `No package source offers CUDA "12.4"`},
		{"no-lists", fleet.Refused, nil, `No package source offers CUDA "12.4"`},
	}
	var lines [][]byte
	for i, w := range want {
		lines = append(lines, document(t, docs[w.member], fmt.Sprintf("host-%d-%s", i, w.member)))
	}
	rows, sum := planStream(t, fleetSpec, stream(lines...), true)
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d", len(rows), len(want))
	}
	counts := map[fleet.Outcome]int{}
	for i, w := range want {
		r := rows[i]
		counts[w.outcome]++
		name := fmt.Sprintf("host-%d-%s", i, w.member)
		if r.Name != name || r.Hostname != name || r.File != fmt.Sprintf("-:%d", i+1) {
			t.Errorf("row %d: name %q, hostname %q, file %q; want %q from line %d", i, r.Name, r.Hostname, r.File, name, i+1)
		}
		var steps []string
		for _, s := range r.Steps {
			steps = append(steps, s.Address+" "+s.Action.String())
		}
		if r.Outcome != w.outcome || !slices.Equal(steps, w.steps) || r.Reason != w.reason {
			t.Errorf("%s: %s %q %q (%s); want %s %q %q", w.member, r.Outcome, steps, r.Reason, r.Error, w.outcome, w.steps, w.reason)
		}
		if (r.Outcome == fleet.Refused) != (r.Error != "") {
			t.Errorf("%s: outcome %s with error %q", w.member, r.Outcome, r.Error)
		}
		if len(r.Lacks) != 0 {
			t.Errorf("%s: a document of this gpuenv lacks %q", w.member, r.Lacks)
		}
	}
	if sum.Hosts != len(want) || sum.Unchanged != counts[fleet.Unchanged] || sum.Change != counts[fleet.Change] || sum.Reboot != counts[fleet.Reboot] || sum.Refused != counts[fleet.Refused] {
		t.Errorf("summary %+v, want %v", sum, counts)
	}
	wantReboots := []fleet.Group{
		{Key: "driver", Hosts: 3, First: []string{"host-1-older-driver", "host-2-other-branch", "host-7-fresh-h100"}},
		{Key: "driver.purge", Hosts: 2, First: []string{"host-1-older-driver", "host-2-other-branch"}},
	}
	if diff := cmp.Diff(wantReboots, sum.Reboots); diff != "" {
		t.Errorf("reboots (-want +got):\n%s", diff)
	}
	if len(sum.Refusals) != 1 || sum.Refusals[0].Hosts != 2 || !strings.Contains(sum.Refusals[0].Error, "NVIDIA's repository is not configured") {
		t.Errorf("refusals %+v", sum.Refusals)
	}
}

// TestDecode: a document of this gpuenv is read as it is; an older one
// of the same major is read, with the facts it lacks; one of another
// major, or no observation at all, is refused saying so.
func TestDecode(t *testing.T) {
	current := document(t, corpus(t)["converged"], "gpu-1")
	var m map[string]any
	if err := json.Unmarshal(current, &m); err != nil {
		t.Fatal(err)
	}
	without := func(keys ...string) []byte {
		c := map[string]any{}
		for k, v := range m {
			if !slices.Contains(keys, k) {
				c[k] = v
			}
		}
		data, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	with := func(k string, v any) []byte {
		c := map[string]any{}
		for k, v := range m {
			c[k] = v
		}
		c[k] = v
		data, _ := json.Marshal(c)
		return data
	}
	for _, tc := range []struct {
		name  string
		doc   []byte
		lacks []string
		err   string
	}{
		{"current", current, nil, ""},
		{"before minors, as of the loader", without("schema_minor", "hostname"), []string{"hostname"}, ""},
		{"before the package indexes", without("schema_minor", "hostname", "package_indexes", "context", "loader", "containers"),
			[]string{"package_indexes", "context", "loader", "containers", "hostname"}, ""},
		// A newer minor's facts are ignored.
		{"a later minor", with("schema_minor", facts.SchemaMinor+1), nil, ""},
		{"a later major", with("schema_version", 2), nil, "the document's schema_version is 2, and this gpuenv reads schema_version 1 only"},
		{"a later major that no longer decodes", docBytes(with("os", "changed")).replaceVersion(2), nil, "schema_version is 2"},
		{"no version", without("schema_version"), nil, "not an observation document: it has no schema_version"},
		{"cut short", current[:100], nil, "not a valid observation document: at byte 100: unexpected end of JSON input"},
		{"a wrong type", with("hostname", 7), nil, "hostname holds a JSON number, where an observation has string"},
		// What the document holds is described, never quoted: it may be
		// a file only root can read.
		{"not JSON", []byte("root:$y$j9T$secret:19000:0:99999:7:::\n"), nil, "not a valid observation document: at byte 1: a character JSON does not allow, looking for beginning of value"},
		{"a quote", []byte("{'x': 1}"), nil, "not a valid observation document: at byte 2: a character JSON does not allow, looking for beginning of object key string"},
		{"a wrong number", with("schema_minor", 1.2345), nil, "schema_minor holds a JSON number, where an observation has int"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs, lacks, err := fleet.Decode(tc.doc)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, a := range lacks {
				keys = append(keys, a.Key)
			}
			if !slices.Equal(keys, tc.lacks) || obs.OS.ID != "ubuntu" {
				t.Errorf("lacks %q, OS %q; want %q", keys, obs.OS.ID, tc.lacks)
			}
		})
	}
}

// replaceVersion sets the schema_version of a document.
func (d docBytes) replaceVersion(v int) []byte {
	var m map[string]any
	json.Unmarshal(d, &m)
	m["schema_version"] = v
	data, _ := json.Marshal(m)
	return data
}

type docBytes []byte

// TestLackingFacts: a host whose older document lacks facts the planner
// decides from is refused naming them, not planned as if they were empty;
// one that lacks only facts the plan does not use is planned.
func TestLackingFacts(t *testing.T) {
	docs := corpus(t)
	var m map[string]json.RawMessage
	if err := json.Unmarshal(document(t, docs["no-cuda"], ""), &m); err != nil {
		t.Fatal(err)
	}
	drop := func(keys ...string) []byte {
		c := map[string]json.RawMessage{}
		for k, v := range m {
			if !slices.Contains(keys, k) {
				c[k] = v
			}
		}
		data, _ := json.Marshal(c)
		return data
	}
	rows, sum := planStream(t, fleetSpec, stream(
		drop("schema_minor", "hostname", "loader", "context"),
		drop("schema_minor", "hostname", "units", "package_indexes"),
	), true)
	if r := rows[0]; r.Outcome != fleet.Change || r.Name != "-:1" || !slices.Equal(r.Lacks, []string{"context", "loader", "hostname"}) {
		t.Errorf("without the loader: %+v", r)
	}
	r := rows[1]
	if r.Outcome != fleet.Refused || r.Reason != fleet.ReasonLacking ||
		!strings.Contains(r.Error, `-:2 was written before gpuenv recorded the systemd units gpuenv manages ("units"), the package indexes on disk ("package_indexes"); observe the host again`) {
		t.Errorf("without the indexes: %+v", r)
	}
	wantLacking := []fleet.Group{
		{Key: "hostname", Hosts: 2, First: []string{"-:1", "-:2"}},
		{Key: "context", Hosts: 1, First: []string{"-:1"}},
		{Key: "loader", Hosts: 1, First: []string{"-:1"}},
		{Key: "package_indexes", Hosts: 1, First: []string{"-:2"}},
		{Key: "units", Hosts: 1, First: []string{"-:2"}},
	}
	if diff := cmp.Diff(wantLacking, sum.Lacking); diff != "" {
		t.Errorf("lacking (-want +got):\n%s", diff)
	}
}

// TestVersionsOnlyFromTheDocument: where the document's indexes cannot
// say which versions the host could install, the host is refused saying
// so; this machine's package manager is never asked (the planner's
// Candidates would have no host to ask, and the refusing runner of the
// corpus fails the test on any process).
func TestVersionsOnlyFromTheDocument(t *testing.T) {
	o := *corpus(t)["no-cuda"]
	o.PackageIndexes = facts.PackageIndexes{Indexes: []facts.PackageIndex{}, Packages: []facts.IndexedPackage{}}
	// NVIDIA's repository configured, its index not in the document.
	o.Repositories = []facts.Repository{{File: "/etc/apt/sources.list.d/cuda.list", URIs: []string{"https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/"}}}
	rows, _ := planStream(t, "cuda {\n  version = \"12.4\"\n  source = \"nvidia\"\n}\n", stream(document(t, &o, "gpu-9")), true)
	r := rows[0]
	if r.Outcome != fleet.Refused || !strings.Contains(r.Error, "the versions of cuda-toolkit-12-4 that apt can install are not in the observation: it holds no package index") {
		t.Errorf("%+v", r)
	}
}

// TestUnobservedPython: a framework in an environment the document says
// nothing of is not planned as into an empty one: the host is refused,
// naming the interpreter to observe.
func TestUnobservedPython(t *testing.T) {
	src := "framework \"pytorch\" {\n  version = \"2.5.*\"\n  venv    = \"/opt/ml\"\n}\n"
	o := *corpus(t)["working"]
	rows, _ := planStream(t, src, stream(document(t, &o, "gpu-1")), true)
	if r := rows[0]; r.Outcome != fleet.Refused || r.Reason != fleet.ReasonLacking || !strings.Contains(r.Error, "holds no Python environment of /opt/ml/bin/python, which the spec's framework blocks name; observe the host with --python /opt/ml/bin/python") {
		t.Errorf("%+v", r)
	}
	// Observed as missing, it is a fact: the plan creates it.
	o.Warnings = append(slices.Clone(o.Warnings), facts.Warning{Path: "/opt/ml/bin/python", Message: "interpreter not found"})
	rows, _ = planStream(t, src, stream(document(t, &o, "gpu-1")), true)
	if r := rows[0]; r.Outcome == fleet.Refused && r.Reason == fleet.ReasonLacking {
		t.Errorf("an interpreter observed missing: %+v", r)
	}
}

// TestInputs: a directory is its *.json files by name; every argument
// must name documents; stdin is read once.
func TestInputs(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"b.json", "a.json", "notes.txt"} {
		os.WriteFile(filepath.Join(dir, n), []byte("{}"), 0o644)
	}
	os.Mkdir(filepath.Join(dir, "sub.json"), 0o755)
	one := filepath.Join(t.TempDir(), "one.json")
	os.WriteFile(one, []byte("{}"), 0o644)
	in, err := fleet.Inputs([]string{dir, one, "-"}, strings.NewReader(""))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, i := range in {
		got = append(got, i.File+i.Name)
	}
	if want := []string{filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json"), one, "-"}; !slices.Equal(got, want) {
		t.Errorf("inputs %q, want %q", got, want)
	}
	empty := t.TempDir()
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{filepath.Join(dir, "nope.json")}, "--facts " + filepath.Join(dir, "nope.json") + ": stat"},
		{[]string{empty}, "--facts " + empty + ": the directory holds no observation document (*.json)"},
		{[]string{"-", "-"}, "standard input is named twice"},
		{nil, "no observation document named"},
	} {
		if _, err := fleet.Inputs(tc.args, strings.NewReader("")); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("Inputs(%q): %v, want %q", tc.args, err, tc.err)
		}
	}
}

// TestFilesAndOrder: documents from files are planned by many workers and
// still reported in input order, an unreadable file among them refused
// with its reason.
func TestFilesAndOrder(t *testing.T) {
	docs := corpus(t)
	dir := t.TempDir()
	var inputs []fleet.Input
	for i := range 40 {
		m := members[i%len(members)]
		p := filepath.Join(dir, fmt.Sprintf("%02d-%s.json", i, m.name))
		data := document(t, docs[m.name], "")
		if i == 7 {
			data = data[:len(data)/2]
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, fleet.Input{File: p})
	}
	var names []string
	sum, err := fleet.Plan(context.Background(), fleet.Options{Spec: plantest.LoadSpec(t, fleetSpec), Planner: newPlanner, Workers: 4}, inputs,
		func(h *fleet.Host) error {
			names = append(names, h.Name)
			if h.Name == "07-older-driver" && (h.Reason != fleet.ReasonUnreadable || !strings.HasPrefix(h.Error, inputs[7].File+": not a valid observation document: at byte")) {
				t.Errorf("cut document: %+v", h)
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, in := range inputs {
		want = append(want, strings.TrimSuffix(filepath.Base(in.File), ".json"))
	}
	if !slices.Equal(names, want) || sum.Hosts != 40 {
		t.Errorf("rows %q, want %q", names, want)
	}
}

// TestEmitError: a row that cannot be written stops the run with that
// error.
func TestEmitError(t *testing.T) {
	broken := errors.New("broken pipe")
	n := 0
	_, err := fleet.Plan(context.Background(), fleet.Options{Spec: plantest.LoadSpec(t, fleetSpec), Planner: newPlanner},
		[]fleet.Input{{Stream: newFleetStream(t, 200), Name: "-"}}, func(*fleet.Host) error {
			n++
			return broken
		})
	if !errors.Is(err, broken) || n != 1 {
		t.Errorf("error %v after %d rows", err, n)
	}
}

// TestMemoryBounded: planning ten times the hosts keeps as much live
// heap as planning a tenth of them: no observation, plan or row is kept,
// only the summary, whose size does not depend on the number of hosts.
func TestMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("plans 6,000 hosts")
	}
	// settled is the live heap near the end of planning n hosts: the
	// least of the last samples, each taken after a collection, so that
	// what the workers hold for the hosts in flight at one moment does
	// not count, and what is kept from every host does.
	settled := func(n int) uint64 {
		const every, last = 100, 5
		var samples []uint64
		var ms runtime.MemStats
		i := 0
		_, err := fleet.Plan(context.Background(), fleet.Options{Spec: plantest.LoadSpec(t, fleetSpec), Planner: newPlanner},
			[]fleet.Input{{Stream: newFleetStream(t, n), Name: "-"}}, func(*fleet.Host) error {
				if i++; i%every == 0 && i > n-every*last {
					runtime.GC()
					runtime.ReadMemStats(&ms)
					samples = append(samples, ms.HeapAlloc)
				}
				return nil
			})
		if err != nil {
			t.Fatal(err)
		}
		return slices.Min(samples)
	}
	// The first hosts fill what is filled once per process: the
	// compatibility tables, the cache of constraints.
	settled(500)
	small, large := settled(500), settled(5000)
	t.Logf("live heap: %d KiB planning 500 hosts, %d KiB planning 5,000", small>>10, large>>10)
	// Each host's document decodes to a hundred kilobytes or so, and a
	// row with its steps is a few hundred bytes: keeping either for 4,500
	// more hosts would add megabytes.
	if large > small+256<<10 {
		t.Errorf("live heap grew from %d KiB to %d KiB with ten times the hosts", small>>10, large>>10)
	}
}

// TestPanicRefusesOneHost: a planner that trips over one document refuses
// that host as gpuenv's bug, and the others are still planned.
func TestPanicRefusesOneHost(t *testing.T) {
	docs := corpus(t)
	tripping := func() *planner.Planner {
		pl := newPlanner()
		resolve := pl.Resolve
		pl.Resolve = func(s *spec.Spec, obs *facts.Observation) (*planner.Desired, hcl.Diagnostics) {
			if obs.Hostname == "odd" {
				panic("an odd document")
			}
			return resolve(s, obs)
		}
		return pl
	}
	var rows []fleet.Host
	_, err := fleet.Plan(context.Background(), fleet.Options{Spec: plantest.LoadSpec(t, fleetSpec), Planner: tripping},
		[]fleet.Input{{Stream: stream(document(t, docs["converged"], "odd"), document(t, docs["converged"], "even")), Name: "-"}},
		func(h *fleet.Host) error { rows = append(rows, *h); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Outcome != fleet.Refused || rows[0].Name != "odd" || !strings.HasPrefix(rows[0].Error, "-:1: planning failed: an odd document. This is a bug in gpuenv.") || rows[1].Outcome != fleet.Unchanged {
		t.Errorf("rows %+v", rows)
	}
}

// FuzzDecode: whatever a collector hands over, Decode returns an
// observation or an error, and an observation only of schema version 1,
// which written out again decodes to itself; an error is one line that
// quotes nothing of the document.
func FuzzDecode(f *testing.F) {
	for _, m := range []string{"converged", "no-lists"} {
		f.Add(document(f, corpus(f)[m], "gpu"))
	}
	for _, s := range []string{`{"schema_version":1}`, `{"schema_version":2,"os":7}`, `{"schema_version":"1"}`, `[]`, `{"schema_version":1,"schema_minor":-3,"loader":null}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		obs, _, err := fleet.Decode(data)
		if (obs == nil) == (err == nil) || obs != nil && obs.SchemaVersion != facts.SchemaVersion {
			t.Fatalf("Decode(%q) = %v, %v", data, obs, err)
		}
		if err != nil {
			msg := err.Error()
			if strings.ContainsAny(msg, "\n\r\x1b") || strings.Contains(msg, "invalid character") {
				t.Fatalf("Decode(%q): the error %q is more than one line or quotes the document", data, msg)
			}
			return
		}
		again, err := json.Marshal(obs)
		if err != nil {
			t.Fatal(err)
		}
		obs2, _, err := fleet.Decode(again)
		if err != nil {
			t.Fatalf("an observation written out again does not decode: %v\n%s", err, again)
		}
		if diff := cmp.Diff(obs, obs2); diff != "" {
			t.Fatalf("an observation written out again decodes to another (-first +second):\n%s", diff)
		}
	})
}

// failingReader gives its data, then an error.
type failingReader struct {
	data []byte
	err  error
}

func (r *failingReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, r.err
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

// TestStreamError: a stream that cannot be read to its end is an error
// naming where it stopped, not a fleet silently cut short.
func TestStreamError(t *testing.T) {
	docs := corpus(t)
	data := append(append(document(t, docs["converged"], "a"), '\n'), document(t, docs["converged"], "b")...)
	data = append(data, '\n')
	_, err := fleet.Plan(context.Background(), fleet.Options{Spec: plantest.LoadSpec(t, fleetSpec), Planner: newPlanner},
		[]fleet.Input{{Stream: &failingReader{data: data, err: errors.New("connection reset")}, Name: "-"}}, nil)
	if err == nil || err.Error() != "reading - at line 3: connection reset" {
		t.Errorf("error %v", err)
	}
}

// TestLongLine: a document longer than the stream's buffer is read whole.
func TestLongLine(t *testing.T) {
	o := *corpus(t)["converged"]
	o.Warnings = append(slices.Clone(o.Warnings), facts.Warning{Message: strings.Repeat("x", 600<<10)})
	rows, _ := planStream(t, fleetSpec, stream(document(t, &o, "big"), document(t, &o, "big2")), true)
	if len(rows) != 2 || rows[0].Name != "big" || rows[0].Outcome != fleet.Unchanged || rows[1].Name != "big2" {
		t.Errorf("rows %+v", rows)
	}
}
