package apply_test

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/gpuenv/gpuenv/apply"
	"github.com/gpuenv/gpuenv/apply/applytest"
	"github.com/gpuenv/gpuenv/providers/host"
)

// BenchmarkApplyStandardPlan applies applytest's standard plan (thirteen
// operations: an apt transaction of four packages, files, groups, a
// service, two pip transactions) on a fresh fake host, the fakes run
// in-process: the engine, its journal and its commands, without the
// time real package managers take. "text" is the run the text view
// follows, which wants neither output nor progress; "events" wants both,
// as the JSON view does, which makes the engine follow each operation's
// progress and hand on every line the package managers print. Besides the
// time, it reports the CPU time of the process (all its threads) per
// apply, which other work on the machine disturbs less.
func BenchmarkApplyStandardPlan(b *testing.B) {
	for _, tc := range []struct {
		name string
		want apply.Wants
	}{{"text", apply.Wants{}}, {"events", apply.Wants{Output: true, Progress: true}}} {
		b.Run(tc.name, func(b *testing.B) {
			var cpu time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				dir := applytest.TempDir(b)
				f, err := applytest.BuildHost(dir)
				if err != nil {
					b.Fatal(err)
				}
				h, err := host.New(f.Root, host.WithRunner(&applytest.Runner{Env: f.Env}))
				if err != nil {
					b.Fatal(err)
				}
				p := applytest.StandardPlan(f.Index)
				before := cpuTime(b)
				b.StartTimer()
				res, err := apply.Apply(context.Background(), h, p, apply.Options{StateDir: stateDir, Hook: &eventLog{want: tc.want}})
				b.StopTimer()
				cpu += cpuTime(b) - before
				if err != nil || res.Status != apply.StatusApplied {
					b.Fatalf("apply: %v %+v", err, res)
				}
				os.RemoveAll(dir)
			}
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime is the CPU time this process has used, user and system.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
