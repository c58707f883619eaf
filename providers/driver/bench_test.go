package driver_test

import (
	"context"
	"testing"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/driver"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
	"github.com/gpuenv/gpuenv/providers/system"
)

// BenchmarkObserveHardware is the share of an observation this package and
// the system package take on the working DGX fixture.
func BenchmarkObserveHardware(b *testing.B) {
	h := hosttest.Fixture(b, "ubuntu2204-working")
	ctx := context.Background()
	b.ReportAllocs()
	defer hosttest.ReportCPU(b)()
	for b.Loop() {
		o := h.ForObservation()
		obs := &facts.Observation{}
		system.Observe(ctx, o, obs)
		driver.Observe(ctx, o, nil, obs)
		o.Close()
	}
}
