package doctor_test

import (
	"context"
	"testing"

	"github.com/gpuenv/gpuenv/planner/doctor"
	"github.com/gpuenv/gpuenv/providers"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

// BenchmarkObserveWorking and BenchmarkDoctorWorking are observe alone
// and observe followed by doctor's judgement, on the working DGX with its
// environment and NVML: doctor must stay within 1.5 times observe.
func BenchmarkObserveWorking(b *testing.B) { benchWorking(b, false) }

func BenchmarkDoctorWorking(b *testing.B) { benchWorking(b, true) }

func benchWorking(b *testing.B, judge bool) {
	root := hosttest.Build(b, "ubuntu2204-working")
	h := hosttest.New(b, root)
	srv := dgx(nil)()
	opts := providers.ObserveOptions{Pythons: []string{"/opt/venv/bin/python"}, NVML: host.NewNVML(srv)}
	b.ResetTimer()
	cpu := hosttest.CPUTime(b)
	for i := 0; i < b.N; i++ {
		obs := providers.Observe(context.Background(), h, opts)
		if judge {
			if r := doctor.Run(doctor.Input{Obs: obs, User: ml}); !r.Healthy {
				b.Fatal("the working DGX is not healthy")
			}
		}
	}
	cpu.Report(b)
}

// BenchmarkJudgeWorking is doctor's judgement alone, on one observation.
func BenchmarkJudgeWorking(b *testing.B) {
	root := hosttest.Build(b, "ubuntu2204-working")
	h := hosttest.New(b, root)
	opts := providers.ObserveOptions{Pythons: []string{"/opt/venv/bin/python"}, NVML: host.NewNVML(dgx(nil)())}
	obs := providers.Observe(context.Background(), h, opts)
	b.ResetTimer()
	cpu := hosttest.CPUTime(b)
	for i := 0; i < b.N; i++ {
		doctor.Run(doctor.Input{Obs: obs, User: ml})
	}
	cpu.Report(b)
}
