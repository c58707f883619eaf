package driver_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/driver"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
	"github.com/gpuenv/gpuenv/providers/system"
)

// BenchmarkObserveHardware is the share of an observation this package and
// the system package take on the working DGX fixture.
func BenchmarkObserveHardware(b *testing.B) {
	root := hosttest.Build(b, "ubuntu2204-working")
	h, err := host.New(root)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	start := cpuTime()
	for b.Loop() {
		o := h.ForObservation()
		obs := &facts.Observation{}
		system.Observe(ctx, o, obs)
		driver.Observe(ctx, o, nil, obs)
		o.Close()
	}
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the user and system time this process has used: a machine
// shared with other work inflates wall time, not this.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
