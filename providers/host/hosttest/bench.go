package hosttest

import (
	"testing"

	"github.com/gpuenv/gpuenv/providers/host"
)

// Benchmark runs op on h in b's loop, reporting allocations and CPU time
// per operation.
func Benchmark(b *testing.B, h *host.Host, op func(h *host.Host)) {
	b.ReportAllocs()
	cpu := CPUTime(b)
	for b.Loop() {
		op(h)
	}
	cpu.Report(b)
}
