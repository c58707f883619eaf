package hosttest

import (
	"syscall"
	"testing"
	"time"

	"github.com/gpuenv/gpuenv/providers/host"
)

// Benchmark runs op on h in b's loop, reporting allocations and CPU time
// per operation.
func Benchmark(b *testing.B, h *host.Host, op func(h *host.Host)) {
	b.ReportAllocs()
	defer ReportCPU(b)()
	for b.Loop() {
		op(h)
	}
}

// ReportCPU starts measuring the process's CPU time and returns what adds
// it to b's output per operation (cpu-ns/op), for a benchmark to defer: on
// a shared machine wall time also counts waiting for a CPU, CPU time does
// not.
func ReportCPU(b *testing.B) func() {
	b.Helper()
	start := cpuTime(b)
	return func() {
		b.ReportMetric(float64((cpuTime(b)-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

// cpuTime is the user and system time this process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
