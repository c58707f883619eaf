package pkgdb

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

// BenchmarkParseStatus parses the working fixture's real-size database
// (the shared base of real packages plus the fixture's NVIDIA ones),
// already in memory.
func BenchmarkParseStatus(b *testing.B) {
	root := hosttest.Build(b, "ubuntu2204-working")
	data, err := os.ReadFile(filepath.Join(root, StatusPath))
	if err != nil {
		b.Fatal(err)
	}
	db := parseStatus(data, nil, false)
	b.ReportMetric(float64(db.total), "packages")
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	cpu := hosttest.CPUTime(b)
	for b.Loop() {
		parseStatus(data, nil, false)
	}
	cpu.Report(b)
}

// BenchmarkReadDpkg is reading dpkg's files and parsing them.
func BenchmarkReadDpkg(b *testing.B) {
	hosttest.Benchmark(b, hosttest.Fixture(b, "ubuntu2204-working"), func(h *host.Host) { ReadDpkg(h) })
}

// BenchmarkReadDpkgAll is apply's read of the whole database: every
// paragraph parsed, none skipped.
func BenchmarkReadDpkgAll(b *testing.B) {
	h := hosttest.Fixture(b, "ubuntu2204-working")
	b.ReportMetric(float64(len(ReadDpkgAll(h).Packages)), "packages")
	hosttest.Benchmark(b, h, func(h *host.Host) { ReadDpkgAll(h) })
}
