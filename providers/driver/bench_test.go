package driver_test

import (
	"context"
	"testing"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/driver"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
	"github.com/gpuenv/gpuenv/providers/system"
)

// BenchmarkObserveHardware is the share of an observation this package and
// the system package take on the working DGX fixture.
func BenchmarkObserveHardware(b *testing.B) {
	hosttest.Benchmark(b, hosttest.Fixture(b, "ubuntu2204-working"), func(h *host.Host) {
		o := h.ForObservation()
		obs := &facts.Observation{}
		system.Observe(context.Background(), o, obs)
		driver.Observe(context.Background(), o, nil, obs)
		o.Close()
	})
}
