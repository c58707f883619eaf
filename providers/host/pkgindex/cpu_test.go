package pkgindex

import (
	"syscall"
	"testing"
	"time"
)

// cpuClock measures the process's CPU time over a benchmark loop, which
// on a shared, loaded machine says more than the wall clock's ns/op.
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
