package driver_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/driver"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
	"github.com/gpuenv/gpuenv/providers/observer/system"
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

// BenchmarkObserveHardwareBusy is the same observation on a machine with
// 400 processes of 16 open files each, 8 of them on the GPU: what the
// scan of /proc/PID/fd for the modules' holders costs.
func BenchmarkObserveHardwareBusy(b *testing.B) {
	h := hosttest.Fixture(b, "ubuntu2204-working")
	for pid := 1000; pid < 1400; pid++ {
		dir := filepath.Join(h.Root(), "proc", strconv.Itoa(pid))
		if err := os.MkdirAll(filepath.Join(dir, "fd"), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "comm"), []byte("worker\n"), 0o644); err != nil {
			b.Fatal(err)
		}
		for fd := range 16 {
			target := "/dev/null"
			if pid%50 == 0 && fd == 3 {
				target = "/dev/nvidia0"
			}
			if err := os.Symlink(target, filepath.Join(dir, "fd", strconv.Itoa(fd))); err != nil {
				b.Fatal(err)
			}
		}
	}
	var holders int
	hosttest.Benchmark(b, h, func(h *host.Host) {
		o := h.ForObservation()
		obs := &facts.Observation{}
		system.Observe(context.Background(), o, obs)
		driver.Observe(context.Background(), o, nil, obs)
		o.Close()
		holders = len(obs.Kernel.Holders)
	})
	// The 8 workers on the GPU, and the fixture's Fabric Manager daemon,
	// a GPU service a reload stops and starts.
	if holders != 9 {
		b.Fatalf("%d holders, want 9", holders)
	}
}
