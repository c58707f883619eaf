package packages

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

// BenchmarkObserveDpkg is the whole Debian-family observation: reading
// the files and parsing them.
func BenchmarkObserveDpkg(b *testing.B) {
	h, err := host.New(hosttest.Build(b, "ubuntu2204-working"))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	cpu := cpuTime(b)
	for b.Loop() {
		Observe(context.Background(), h, "deb")
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
