package pkgdb

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

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
	cpu := cpuTime(b)
	for b.Loop() {
		parseStatus(data, nil, false)
	}
	cpu.report(b)
}

// BenchmarkReadDpkg is reading dpkg's files and parsing them.
func BenchmarkReadDpkg(b *testing.B) {
	h, err := host.New(hosttest.Build(b, "ubuntu2204-working"))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	cpu := cpuTime(b)
	for b.Loop() {
		ReadDpkg(h)
	}
	cpu.report(b)
}

// cpuClock measures the process's CPU time over a benchmark loop, which
// on a shared, loaded machine says more than the wall clock ns/op.
type cpuClock struct{ start time.Duration }

func cpuTime(b *testing.B) cpuClock { return cpuClock{rusage(b)} }

func (c cpuClock) report(b *testing.B) {
	b.ReportMetric(float64((rusage(b)-c.start).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

func rusage(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkReadDpkgAll is apply's read of the whole database: every
// paragraph parsed, none skipped.
func BenchmarkReadDpkgAll(b *testing.B) {
	h, err := host.New(hosttest.Build(b, "ubuntu2204-working"))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(ReadDpkgAll(h).Packages)), "packages")
	b.ReportAllocs()
	cpu := cpuTime(b)
	for b.Loop() {
		ReadDpkgAll(h)
	}
	cpu.report(b)
}
