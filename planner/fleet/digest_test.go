package fleet_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/fleet"
	"github.com/gpuenv/gpuenv/planner/plantest"
)

// digestSpecs are specs that reach every kind of step the test fleet's
// hosts can take: what a digest leaves out must not change any of them.
var digestSpecs = []string{
	fleetSpec,
	"group \"video\" {\n  members = [\"alice\"]\n}\n",
	"environment {\n  cuda_device_order = \"PCI_BUS_ID\"\n  variables = { HF_HOME = \"/data/hf\" }\n}\n",
	"driver {\n  version = \"535.*\"\n  source = \"distro\"\n}\n",
}

// TestDigestLeavesOutOnlyWhatPlanningIgnores: the values the digest
// leaves out (the hostname, the package database's size, the note of
// the last apply) change no plan of any spec on any kind of host, and
// leave the digest as it is, as does the document's layout; the facts a
// saved plan's fingerprint leaves out but planning reads (the root,
// module reference counts, processes holding the modules) change it.
func TestDigestLeavesOutOnlyWhatPlanningIgnores(t *testing.T) {
	for _, m := range members {
		o := corpus(t)[m.name]
		base := document(t, o, "gpu-1")
		ok, want, hostname := fleet.ScanDigest(base)
		if !ok || hostname != "gpu-1" {
			t.Fatalf("%s: scan ok %v, hostname %q", m.name, ok, hostname)
		}
		ignored := *o
		ignored.Hostname = "another"
		ignored.Packages.Total = o.Packages.Total + 1234
		for _, src := range digestSpecs {
			s := plantest.LoadSpec(t, src)
			p1, d1 := newPlanner().Plan(context.Background(), s, clone(t, o))
			p2, d2 := newPlanner().Plan(context.Background(), s, clone(t, &ignored))
			if diff := cmp.Diff(p1, p2); diff != "" || d1.Error() != d2.Error() {
				t.Errorf("%s: planning read what the digest leaves out (-as observed +hostname and total changed):\n%s%s\n%s", m.name, diff, d1, d2)
			}
		}
		var indented bytes.Buffer
		if err := json.Indent(&indented, base, "", "  "); err != nil {
			t.Fatal(err)
		}
		withApply := bytes.Replace(document(t, &ignored, "gpu-2"), []byte(`{`), []byte(`{"last_apply":{"kind":"apply","status":"applied"},`), 1)
		for what, doc := range map[string][]byte{"another hostname and total, a last apply": withApply, "indented": indented.Bytes()} {
			if ok, d, _ := fleet.ScanDigest(doc); !ok || d != want {
				t.Errorf("%s, %s: ok %v, digest changed %v", m.name, what, ok, d != want)
			}
		}
		for what, vary := range map[string]func(*facts.Observation){
			"root": func(o *facts.Observation) { o.Root = "/srv/other" },
			"refcount": func(o *facts.Observation) {
				o.Kernel.Loaded = append(o.Kernel.Loaded, facts.LoadedModule{Name: "nvidia", RefCount: 7})
			},
			"holder": func(o *facts.Observation) {
				o.Kernel.Holders = append(o.Kernel.Holders, facts.Holder{PID: 42, Command: "python3"})
			},
		} {
			c := clone(t, o)
			vary(c)
			if ok, d, _ := fleet.ScanDigest(document(t, c, "gpu-1")); !ok || d == want {
				t.Errorf("%s: a different %s, a fact planning reads, digests the same", m.name, what)
			}
		}
	}
}

// clone is a deep copy of o.
func clone(t *testing.T, o *facts.Observation) *facts.Observation {
	t.Helper()
	data, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	var c facts.Observation
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	return &c
}

// TestScanGivesUp: a document the scan cannot read plainly is decoded and
// planned on its own, never given another's verdict.
func TestScanGivesUp(t *testing.T) {
	for _, doc := range []string{
		`{"schema_version":1,"Hostname":"a"}`,
		`{"schema_version":1,"host\u006eame":"a"}`,
		`{"schema_version":1,"hostname":"a","hostname":"b"}`,
		`{"schema_version":1,"hostname":7}`,
		`{"schema_version":1,"packages":{"total":1.5}}`,
		`{"schema_version":1,"packages":{"Total":3}}`,
		`{"schema_version":1,"last_apply":{"status":}}`,
		`{"schema_version":1,"os":[1 2]}`,
		`{"schema_version":1} {}`,
		`[]`,
	} {
		if ok, _, _ := fleet.ScanDigest([]byte(doc)); ok {
			t.Errorf("%s: scanned as plain", doc)
		}
	}
	if ok, _, name := fleet.ScanDigest([]byte(`{"schema_version":1,"hostname":"gpu-\u00e9"}`)); !ok || name != "gpu-é" {
		t.Errorf("an escaped hostname: ok %v, %q", ok, name)
	}
}

// TestPlanOncePerDigest: a fleet of 300 hosts of a few dozen
// configurations is planned once per configuration, and each host's row is the one planning its document
// alone gives.
func TestPlanOncePerDigest(t *testing.T) {
	var plans atomic.Int32
	counting := func() *planner.Planner { plans.Add(1); return newPlanner() }
	s := plantest.LoadSpec(t, fleetSpec)
	var rows []fleet.Host
	sum, err := fleet.Plan(context.Background(), fleet.Options{Spec: s, Planner: counting, Workers: 4},
		[]fleet.Input{{Stream: newFleetStream(t, 300), Name: "-"}}, func(h *fleet.Host) error { rows = append(rows, *h); return nil })
	if err != nil {
		t.Fatal(err)
	}
	configs := configurations(t)
	distinct := map[string]bool{}
	for _, c := range configs {
		distinct[string(c)] = true
	}
	if n := int(plans.Load()); n != len(distinct) || sum.Hosts != 300 {
		t.Errorf("%d plans for %d hosts of %d configurations", n, sum.Hosts, len(distinct))
	}
	for i, cfg := range configs {
		doc := bytes.Replace(bytes.Replace(cfg, []byte("ROOT-PLACEHOLDER"), []byte("/"), 1), []byte("HOSTNAME-PLACEHOLDER"), []byte("alone"), 1)
		var want fleet.Host
		if _, err := fleet.Plan(context.Background(), fleet.Options{Spec: s, Planner: newPlanner}, []fleet.Input{{Stream: stream(doc), Name: "-"}},
			func(h *fleet.Host) error { want = *h; return nil }); err != nil {
			t.Fatal(err)
		}
		for j := i; j < len(rows); j += len(configs) {
			got := rows[j]
			if got.Name != fmt.Sprintf("gpu-%05d", j) {
				t.Errorf("row %d named %q", j, got.Name)
			}
			got.Name, got.Hostname, got.File, got.Group = want.Name, want.Hostname, want.File, want.Group
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(fleet.Host{})); diff != "" {
				t.Errorf("configuration %d, host %d: not as planned alone (-alone +in the fleet):\n%s", i, j, diff)
				break
			}
		}
	}
}

// TestCanaries: every group names at least one host to try first and at
// most N, those whose last apply succeeded before the others, then in
// input order.
func TestCanaries(t *testing.T) {
	docs := corpus(t)
	note := func(doc []byte, status string) []byte {
		return bytes.Replace(doc, []byte("{"), []byte(`{"last_apply":{"kind":"apply","status":"`+status+`"},`), 1)
	}
	var lines [][]byte
	for i, st := range []string{"", "reverted", "applied", "", "applied", "applied"} {
		doc := document(t, docs["converged"], fmt.Sprintf("conv-%d", i))
		if st != "" {
			doc = note(doc, st)
		}
		lines = append(lines, doc)
	}
	lines = append(lines, note(document(t, docs["no-cuda"], "nocuda-0"), "reverted"), document(t, docs["no-cuda"], "nocuda-1"))
	var sum *fleet.Summary
	var err error
	sum, err = fleet.Plan(context.Background(), fleet.Options{Spec: plantest.LoadSpec(t, fleetSpec), Planner: newPlanner, Canaries: 2},
		[]fleet.Input{{Stream: stream(lines...), Name: "-"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, g := range sum.Plans {
		got = append(got, fmt.Sprintf("%d %s %q", g.Hosts, g.Outcome, g.Canaries))
	}
	if want := []string{`6 unchanged ["conv-2" "conv-4"]`, `2 change ["nocuda-1" "nocuda-0"]`}; !slices.Equal(got, want) {
		t.Errorf("groups %q, want %q", got, want)
	}
}

// TestInputsAtScale: documents in a tree, gzip-compressed or not, the
// same as a tar archive on standard input (compressed too), or an
// archive file; a document that cannot be read, and an archive that
// breaks off, are rows of their own, and the run goes on.
func TestInputsAtScale(t *testing.T) {
	docs := corpus(t)
	dir := t.TempDir()
	gz := func(data []byte) []byte {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		zw.Write(data)
		zw.Close()
		return b.Bytes()
	}
	files := map[string][]byte{
		"rack1/a.json":      document(t, docs["converged"], ""),
		"rack1/b.json.gz":   gz(document(t, docs["no-cuda"], "")),
		"rack2/deep/c.json": document(t, docs["converged"], "named-c"),
		"rack2/notes.txt":   []byte("not a document"),
		"rack2/d.json.gz":   []byte("\x1f\x8bbroken"),
	}
	var tarBuf bytes.Buffer
	tw := tar.NewWriter(&tarBuf)
	for _, name := range []string{"rack1/a.json", "rack1/b.json.gz", "rack2/d.json.gz", "rack2/deep/c.json", "rack2/notes.txt"} {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, files[name], 0o644); err != nil {
			t.Fatal(err)
		}
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(files[name])), Typeflag: tar.TypeReg})
		tw.Write(files[name])
	}
	tw.WriteHeader(&tar.Header{Name: "rack3/link.json", Linkname: "/etc/shadow", Typeflag: tar.TypeSymlink})
	tw.Close()
	archive := filepath.Join(t.TempDir(), "fleet.tar.gz")
	if err := os.WriteFile(archive, gz(tarBuf.Bytes()), 0o644); err != nil {
		t.Fatal(err)
	}
	outcomes := func(inputs []fleet.Input) string {
		var out []string
		_, err := fleet.Plan(context.Background(), fleet.Options{Spec: plantest.LoadSpec(t, fleetSpec), Planner: newPlanner}, inputs,
			func(h *fleet.Host) error {
				out = append(out, h.Name+"="+h.Outcome.String())
				if h.Outcome == fleet.Refused && !strings.HasPrefix(h.Error, h.File+": ") {
					t.Errorf("%s: error %q does not name it", h.File, h.Error)
				}
				return nil
			})
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(out, " ")
	}
	inputs, err := fleet.Inputs([]string{dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := outcomes(inputs), "a=unchanged b=change d=refused named-c=unchanged"; got != want {
		t.Errorf("tree: %s, want %s", got, want)
	}
	// Documents unreadable in any way are one group, however each broke.
	broken := filepath.Join(dir, "rack2", "e.json")
	if err := os.WriteFile(broken, []byte(`{"schema_version":1,`), 0o644); err != nil {
		t.Fatal(err)
	}
	sum, err := fleet.Plan(context.Background(), fleet.Options{Spec: plantest.LoadSpec(t, fleetSpec), Planner: newPlanner},
		[]fleet.Input{{File: filepath.Join(dir, "rack2/d.json.gz")}, {File: broken}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Plans) != 1 || sum.Plans[0].Hosts != 2 || sum.Plans[0].Reason != fleet.ReasonUnreadable {
		t.Errorf("unreadable documents: %+v", sum.Plans)
	}
	os.Remove(broken)
	want := "a=unchanged b=change d=refused named-c=unchanged link=refused"
	for what, data := range map[string][]byte{"tar": tarBuf.Bytes(), "tar.gz": gz(tarBuf.Bytes())} {
		if got := outcomes([]fleet.Input{{Stream: bytes.NewReader(data), Name: "-"}}); got != want {
			t.Errorf("%s on stdin: %s, want %s", what, got, want)
		}
	}
	if got := outcomes([]fleet.Input{{File: archive}}); got != want {
		t.Errorf("archive file: %s, want %s", got, want)
	}
	// An archive cut short: what it held up to there, a row where it
	// broke, and the next input.
	cut := tarBuf.Bytes()[:len(files["rack1/a.json"])+1024+700]
	got := outcomes([]fleet.Input{{Stream: bytes.NewReader(cut), Name: "-"}, {File: filepath.Join(dir, "rack1/a.json")}})
	if want := "a=unchanged b=refused a=unchanged"; got != want {
		t.Errorf("cut archive: %s, want %s", got, want)
	}
}

// BenchmarkScan digests the test fleet's configurations as plan --facts
// does each document before deciding whether to decode it.
func BenchmarkScan(b *testing.B) {
	configs := configurations(b)
	n := 0
	for _, c := range configs {
		n += len(c)
	}
	b.SetBytes(int64(n / len(configs)))
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if ok, _, _ := fleet.ScanDigest(configs[i%len(configs)]); !ok {
			b.Fatal("a configuration does not scan")
		}
	}
}
