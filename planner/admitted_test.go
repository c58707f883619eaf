package planner

import (
	"reflect"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner/compat"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/spec/version"
)

// The rows a constraint admits are kept and shared by every plan of the
// process (a fleet's hosts ask the same ones): a plan that narrows them
// to what its host's archive offers must leave them as the tables have
// them, or the next host would be planned against the first one's
// archive.
func TestAdmittedRowsOutliveANarrowingPlan(t *testing.T) {
	const text = "12.*"
	c := version.MustParseConstraint(text)
	var want []compat.CUDARelease
	for _, rel := range compat.CUDAReleases() {
		if c.Check(rel.Version) {
			want = append(want, rel)
		}
	}
	if len(want) < 2 || mm(want[len(want)-1].Version).String() == "12.4" {
		t.Fatalf("the tables' CUDA 12 releases no longer reach past 12.4: %d rows", len(want))
	}

	// NVIDIA's repository offers 12.4 alone: the plan narrows the
	// table's CUDA 12 releases to that line.
	obs := ubuntuArchive()
	obs.PackageIndexes.Packages = append(obs.PackageIndexes.Packages, facts.IndexedPackage{Name: "cuda-toolkit-12-4", Versions: []facts.IndexedVersion{
		{Version: "12.4.1-1", Priority: 600, PriorityFrom: "pin", Pin: 3, Origins: []string{ixNVIDIA}},
	}})
	for range 2 {
		d, diags := Resolve(loadSpec(t, "cuda {\n  version = \""+text+"\"\n  source  = \"nvidia\"\n}\n"), obs)
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		if got := d.CUDA.Minor.String(); got != "12.4" {
			t.Fatalf("CUDA line %s, want 12.4, the one line the archive offers", got)
		}
		if got := admittedCUDA(c); !reflect.DeepEqual(got, want) {
			t.Fatalf("the kept rows of %q changed: %s, want %s", text, releases(got), releases(want))
		}
	}
}

func releases(rows []compat.CUDARelease) string {
	var vs []string
	for _, r := range rows {
		vs = append(vs, r.Version.String())
	}
	return strings.Join(vs, " ")
}

// A query's answer is kept by its key: a field of compat.PackageQuery
// that the key leaves out would give two questions one answer.
func TestQueryKeyHoldsEveryField(t *testing.T) {
	q := compat.PackageQuery{
		OS: "ubuntu", OSVersion: "22.04", Repo: compat.RepoNVIDIA, Component: "driver", Flavor: compat.FlavorOpen,
		Server: true, Branch: 550, CUDA: version.MustParse("12.4.1"), CuDNN: version.MustParse("9.1.0.70"),
	}
	qv := reflect.ValueOf(q)
	for i := range qv.NumField() {
		if qv.Field(i).IsZero() {
			t.Fatalf("the query of this test leaves %s out: give it a value", qv.Type().Field(i).Name)
		}
		other := q
		reflect.ValueOf(&other).Elem().Field(i).SetZero()
		if queryKeyOf(other) == queryKeyOf(q) {
			t.Errorf("queries that differ in %s have one key", qv.Type().Field(i).Name)
		}
	}
}
