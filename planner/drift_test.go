package planner

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner/facts"
)

// Drift names each value that changed, appeared or went, by section and
// by the item's name rather than its position, and leaves out what moves
// by the minute (memory in use, GPU processes).
func TestDrift(t *testing.T) {
	obs := func(smi string, used uint64, procs int, extra ...facts.Package) *facts.Observation {
		o := &facts.Observation{}
		o.Packages.Packages = append([]facts.Package{
			{Name: "libnvidia-ml1", Version: "535.261.03-1", State: facts.StateInstalled, Want: "install"},
			{Name: "nvidia-smi", Version: smi, State: facts.StateInstalled, Want: "install"},
		}, extra...)
		d := facts.GPUDevice{UUID: "GPU-1", Name: "NVIDIA H100", MemoryUsed: used}
		for i := 0; i < procs; i++ {
			d.Processes = append(d.Processes, facts.GPUProcess{PID: uint32(100 + i)})
		}
		o.NVML.Devices = []facts.GPUDevice{d}
		return o
	}
	before := obs("535.261.03-1", 1<<30, 1)
	if d := Drift(before, obs("535.261.03-1", 5<<30, 3)); len(d) != 0 {
		t.Errorf("memory and processes drift: %+v", d)
	}
	now := obs("535.309.01-1", 1<<30, 1, facts.Package{Name: "nvidia-persistenced", Version: "535.309.01-1", State: facts.StateInstalled, Want: "install"})
	d := Drift(before, now)
	if len(d) != 1 || d[0].Section != FactsPackages {
		t.Fatalf("drift %+v, want the packages section only", d)
	}
	var lines []string
	for _, c := range d[0].Changes {
		lines = append(lines, c.String())
	}
	got := strings.Join(lines, "\n")
	for _, want := range []string{
		"~ packages.packages[nvidia-smi].version: 535.261.03-1 → 535.309.01-1",
		"+ packages.packages[nvidia-persistenced].version = 535.309.01-1",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("drift lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "libnvidia-ml1") {
		t.Errorf("an unchanged package drifts:\n%s", got)
	}
	var went []string
	for _, sd := range Drift(now, before) {
		for _, c := range sd.Changes {
			went = append(went, c.String())
		}
	}
	if !strings.Contains(strings.Join(went, "\n"), "- packages.packages[nvidia-persistenced].version = 535.309.01-1") {
		t.Errorf("a package that went is not said:\n%s", strings.Join(went, "\n"))
	}
	if s := DriftSummary(d); !strings.Contains(s, "in 1 section (packages)") {
		t.Errorf("summary %q", s)
	}
}

// A section with more changes than MaxDriftChanges lists that many and
// counts the rest.
func TestDriftBounded(t *testing.T) {
	before, now := &facts.Observation{}, &facts.Observation{}
	for i := 0; i < MaxDriftChanges+20; i++ {
		now.Packages.Packages = append(now.Packages.Packages, facts.Package{Name: "p" + strings.Repeat("x", i), Version: "1"})
	}
	d := Drift(before, now)
	if len(d) != 1 || len(d[0].Changes) != MaxDriftChanges || d[0].More == 0 {
		t.Fatalf("drift of %d changes, %d more; want %d listed and the rest counted", len(d[0].Changes), d[0].More, MaxDriftChanges)
	}
}

// BenchmarkDrift compares the observation of the DGX H100 fixture (eight
// GPUs, its whole package database) with itself after one package moved,
// as plan -refresh-only does once per run.
func BenchmarkDrift(b *testing.B) {
	data, err := os.ReadFile("../providers/testdata/golden/ubuntu2204-working+dgxh100.json")
	if err != nil {
		b.Fatal(err)
	}
	var before, now facts.Observation
	if err := json.Unmarshal(data, &before); err != nil {
		b.Fatal(err)
	}
	if err := json.Unmarshal(data, &now); err != nil {
		b.Fatal(err)
	}
	now.Packages.Packages[0].Version += "+drift"
	b.ReportAllocs()
	for b.Loop() {
		if d := Drift(&before, &now); len(d) != 1 {
			b.Fatalf("drift %+v", d)
		}
	}
}
