package apply_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuenv/gpuenv/apply"
	"github.com/gpuenv/gpuenv/apply/applytest"
	"github.com/gpuenv/gpuenv/planner/plan"
)

// dkmsDeb is a driver's kernel module as DKMS source: configuring it
// builds the module, which the fake apt-get prints line by line, and
// activates initramfs-tools' trigger.
var dkmsDeb = applytest.Deb{Name: "nvidia-kernel-dkms", Version: applytest.DriverNew, Files: map[string]string{
	"/usr/src/nvidia-current-535.309.01/dkms.conf": "PACKAGE_NAME=nvidia-current\n",
}}

// progress are the progress events, checked to be tagged with the
// operation between whose start and end they came.
func (ev *eventLog) progress(t *testing.T) []apply.RunEvent {
	t.Helper()
	var out []apply.RunEvent
	var running *apply.EventOperation
	for _, e := range ev.Events() {
		switch e.Type {
		case apply.RunOperationStart:
			running = e.Operation
		case apply.RunOperationEnd:
			running = nil
		case apply.RunProgress:
			if running == nil || e.Operation == nil || *e.Operation != *running || e.Progress == nil {
				t.Fatalf("progress %+v outside its operation (running %+v)", e, running)
			}
			out = append(out, e)
		}
	}
	return out
}

// checkRate checks that progress went out at most every 150 ms and five
// times in any second, and that within one command its percentages did
// not go back, those of the download apart from those of dpkg's steps.
func checkRate(t *testing.T, evs []apply.RunEvent) {
	t.Helper()
	last := map[string]float64{}
	for i, e := range evs {
		if i > 0 && e.Operation == evs[i-1].Operation {
			if gap := e.Timestamp.Sub(evs[i-1].Timestamp); gap < 150*time.Millisecond {
				t.Errorf("progress %d came %s after the one before", i, gap)
			}
		}
		if i >= 5 && e.Operation == evs[i-5].Operation && e.Timestamp.Sub(evs[i-5].Timestamp) < time.Second {
			t.Errorf("six progress events within %s", e.Timestamp.Sub(evs[i-5].Timestamp))
		}
		p := e.Progress
		if p.Percent == nil {
			continue
		}
		if *p.Percent < 0 || *p.Percent > 100 {
			t.Errorf("percent %v", *p.Percent)
		}
		scale := fmt.Sprintf("%p %d %v", e.Operation, p.Command, p.Phase == apply.PhaseDownloading)
		if prev, ok := last[scale]; ok && *p.Percent < prev {
			t.Errorf("percent went back from %.1f to %.1f in %s of command %d", prev, *p.Percent, p.Phase, p.Command)
		}
		last[scale] = *p.Percent
	}
}

// An apt transaction that downloads three packages, unpacks and
// configures them, builds a DKMS module and rebuilds the initramfs, at
// the pace of a slow mirror: its events say each phase with the package,
// its place among the three and the percentage, the bytes and rate of
// the download, and for the module and initramfs the elapsed time and
// the last line printed; at most four a second, percentages rising. The
// log keeps the whole output and none of the status lines.
func TestProgressEventsOfAnAptTransaction(t *testing.T) {
	fx := newFixture(t)
	if err := applytest.WriteArchive(fx.Archive, dkmsDeb); err != nil {
		t.Fatal(err)
	}
	fx.runner.Env = append(fx.runner.Env, applytest.EnvPace+"=150ms")
	ev := eventLog{want: apply.Wants{Output: true, Progress: true}}
	o := fx.opts(nil)
	o.Hook = &ev
	p := oneStep("driver", plan.Create, plan.Operation{Kind: plan.OpPackages, Packages: &plan.PackagesOp{
		Manager: "apt",
		Install: []plan.PackagePin{{Name: "cuda-toolkit-12-4", Version: "12.4.1-1"}, {Name: dkmsDeb.Name, Version: dkmsDeb.Version}},
	}})
	if res := fx.apply(p, o); res.Status != apply.StatusApplied {
		t.Fatalf("status %s\n%s", res.Status, fx.out.String())
	}
	evs := ev.progress(t)
	checkRate(t, evs)
	if len(evs) > 1 {
		span := evs[len(evs)-1].Timestamp.Sub(evs[0].Timestamp)
		t.Logf("%d progress events over %s (%.1f a second)", len(evs), span.Round(10*time.Millisecond), float64(len(evs)-1)/span.Seconds())
	}

	names := []string{"cuda-cudart-12-4", "cuda-toolkit-12-4", dkmsDeb.Name}
	seen := map[string]bool{}
	var bytes, rate int64
	building := false // a line of DKMS's build shown
	for _, e := range evs {
		p := e.Progress
		seen[p.Phase] = true
		switch p.Phase {
		case apply.PhaseDownloading:
			if p.Count != 3 || p.Index < 1 || p.Index > 3 || p.Percent == nil {
				t.Errorf("downloading: file %d of %d, percent %v; want of 3", p.Index, p.Count, p.Percent)
			}
			bytes, rate = max(bytes, p.Bytes), max(rate, p.Rate)
		case apply.PhaseUnpacking, apply.PhaseConfiguring:
			if !slices.Contains(names, p.Package) || p.Count != 3 || p.Index < 1 || p.Index > 3 || p.Percent == nil {
				t.Errorf("%s %s (%d of %d), percent %v", p.Phase, p.Package, p.Index, p.Count, p.Percent)
			}
		case apply.PhaseKernelModule:
			if p.Package != dkmsDeb.Name || p.Line == "" {
				t.Errorf("building the kernel module: package %q, last line %q", p.Package, p.Line)
			}
			if strings.Contains(p.Line, "DKMS files") || strings.HasPrefix(p.Line, "Building") {
				building = true
			}
		case apply.PhaseInitramfs:
			if p.Package != "initramfs-tools" || !strings.Contains(p.Line, "initramfs") {
				t.Errorf("rebuilding the initramfs: package %q, last line %q", p.Package, p.Line)
			}
		}
	}
	for _, phase := range []string{apply.PhaseDownloading, apply.PhaseUnpacking, apply.PhaseConfiguring, apply.PhaseKernelModule, apply.PhaseInitramfs} {
		if !seen[phase] {
			t.Errorf("no progress in phase %s; phases seen: %v", phase, seen)
		}
	}
	if !building {
		t.Error("no progress of the kernel module's build shows a line of it")
	}
	var size int64
	for _, d := range append(applytest.ArchiveDebs(), dkmsDeb) {
		if slices.Contains(names, d.Name) && (d.Name != "cuda-toolkit-12-4" || d.Version == "12.4.1-1") {
			size += int64(len(d.Bytes()))
		}
	}
	if bytes <= 0 || bytes > size || rate <= 0 {
		t.Errorf("downloaded %d bytes of %d at %d B/s: want some of them, at a rate", bytes, size, rate)
	}

	log := fx.read(stateDir + "/generations/1/log")
	for _, want := range []string{"$ apt-get -o APT::Status-Fd=3 ", "Building initial module for", "update-initramfs: Generating", "Setting up cuda-toolkit-12-4"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
	for _, status := range []string{"dlstatus:", "pmstatus:"} {
		if strings.Contains(log, status) {
			t.Errorf("the log has apt's status lines (%s):\n%s", status, log)
		}
	}
}

// The revert of a transaction cut while dpkg unpacked repairs dpkg with
// dpkg itself: its --status-fd lines are the progress of the undo.
func TestProgressEventsOfDpkgRepair(t *testing.T) {
	fx := newFixture(t)
	fx.runner.Env = append(fx.runner.Env, applytest.EnvFail+"=apt-get:install@reinstreq", applytest.EnvPace+"=150ms")
	ev := eventLog{want: apply.Wants{Output: true, Progress: true}}
	o := fx.opts(nil)
	o.Hook = &ev
	if res := fx.apply(applytest.StandardPlan(fx.Index), o); res.Status != apply.StatusReverted {
		t.Fatalf("status %s\n%s", res.Status, fx.out.String())
	}
	evs := ev.progress(t)
	checkRate(t, evs)
	var repaired []string
	for _, e := range evs {
		if p := e.Progress; e.Operation.Undoes != 0 && (p.Phase == apply.PhaseUnpacking || p.Phase == apply.PhaseConfiguring) && p.Percent != nil {
			repaired = append(repaired, p.Package)
		}
	}
	if !slices.Contains(repaired, "libnvidia-ml1") && !slices.Contains(repaired, "nvidia-smi") {
		t.Errorf("no progress of dpkg's repair of the driver packages in the undo; progress of the undo names %v", repaired)
	}
	if !strings.Contains(fx.read(stateDir+"/generations/1/log"), "$ dpkg --status-fd 3 --force-confdef --force-confold --install -- ") {
		t.Error("the log does not show dpkg run with its status descriptor")
	}
}

// A hook gets the package managers' output and the progress only when it
// wants them, and the run's steps whatever it wants.
func TestHookGetsWhatItWants(t *testing.T) {
	for _, want := range []apply.Wants{{}, {Progress: true}, {Output: true}, {Output: true, Progress: true}} {
		t.Run(fmt.Sprintf("output=%v,progress=%v", want.Output, want.Progress), func(t *testing.T) {
			fx := newFixture(t)
			fx.runner.Env = append(fx.runner.Env, applytest.EnvPace+"=50ms")
			fx.out.want = want
			if res := fx.apply(applytest.StandardPlan(fx.Index), fx.opts(nil)); res.Status != apply.StatusApplied {
				t.Fatalf("status %s\n%s", res.Status, fx.out.String())
			}
			got := map[string]int{}
			for _, e := range fx.out.Events() {
				got[e.Type]++
			}
			for typ, wanted := range map[string]bool{apply.RunOutput: want.Output, apply.RunProgress: want.Progress} {
				if (got[typ] > 0) != wanted {
					t.Errorf("%d %s events, wanted: %v", got[typ], typ, wanted)
				}
			}
			if got[apply.RunOperationStart] != 13 || got[apply.RunOperationEnd] != 13 || got[apply.RunMessage] == 0 {
				t.Errorf("events %v: want 13 operations started and ended, and the messages", got)
			}
		})
	}
}
