package main

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"

	"github.com/gpuenv/gpuenv/apply/applytest"
	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/providers"
	"github.com/gpuenv/gpuenv/providers/host"
)

// Test-only programs for the apply, rollback, history and unlock scripts:
//
//	chroot ROOT ARGV...        the fake host's tools (apt-get, dpkg,
//	                           gpasswd, python …, package applytest), run
//	                           inside ROOT as gpuenv runs them there
//	gpuenv-fakehost DIR        lays out applytest's standard host in
//	                           DIR/root with its archive and index, and
//	                           saves the standard plan for it as
//	                           DIR/plan.saved
//	gpuenv-snapshot ROOT       prints the host as "the same host"
//	                           compares it, for cmp
//	gpuenv-killat K ARGS...    gpuenv that SIGKILLs itself right after
//	                           journal record K is durable
//	gpuenv-exit N ARGS...      gpuenv that succeeds when gpuenv ARGS exits
//	                           with status N, for the statuses testscript
//	                           cannot tell apart (1 from 3)
//
// The standard plan is made by hand for the fake host, not planned from a
// spec, so it keeps none: scripts that apply it set GPUENV_TEST_UNPLANNED,
// read here only, and a saved plan without a spec is then checked
// against the facts' fingerprint alone. The binary has no such switch.
func init() {
	savedHooks.acceptUnplanned = os.Getenv("GPUENV_TEST_UNPLANNED") != ""
	extraTestCommands["gpuenv-exit"] = exitIs
	extraTestCommands["chroot"] = applytest.Main("chroot")
	extraTestCommands["gpuenv-fakehost"] = fakeHost
	extraTestCommands["gpuenv-snapshot"] = snapshot
	extraTestCommands["gpuenv-killat"] = killAt
}

func die(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

func fakeHost() {
	if len(os.Args) != 2 {
		die(fmt.Errorf("usage: gpuenv-fakehost DIR"))
	}
	if _, err := buildFakeHost(os.Args[1]); err != nil {
		die(err)
	}
}

// buildFakeHost lays out applytest's standard host in dir and saves the
// standard plan for it as dir/plan.saved.
func buildFakeHost(dir string) (*applytest.Fixture, error) {
	f, err := applytest.BuildHost(dir)
	if err != nil {
		return nil, err
	}
	h, err := host.New(f.Root)
	if err != nil {
		return nil, err
	}
	p := applytest.StandardPlan(f.Index)
	var pythons []string
	for _, s := range p.Steps {
		for _, op := range s.Operations {
			if op.Packages != nil && op.Packages.Venv != "" {
				pythons = append(pythons, path.Join(op.Packages.Venv, "bin", "python"))
			}
		}
	}
	obs := providers.Observe(context.Background(), h, providers.ObserveOptions{Pythons: pythons})
	out, err := os.Create(filepath.Join(dir, "plan.saved"))
	if err != nil {
		return nil, err
	}
	if err := planner.WriteSavedPlan(out, p, obs, nil, providers.Kinds()); err != nil {
		out.Close()
		return nil, err
	}
	return f, out.Close()
}

func snapshot() {
	if len(os.Args) != 2 {
		die(fmt.Errorf("usage: gpuenv-snapshot ROOT"))
	}
	st, err := applytest.Snapshot(os.Args[1], applytest.StateDir)
	if err != nil {
		die(err)
	}
	var lines []string
	for k, v := range st.Files {
		lines = append(lines, "file "+k+" "+v)
	}
	for k, v := range st.Packages {
		lines = append(lines, "package "+k+" "+v)
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
}

func killAt() {
	k, err := strconv.Atoi(os.Args[1])
	if err != nil || len(os.Args) < 3 {
		die(fmt.Errorf("usage: gpuenv-killat K ARGS..."))
	}
	applyHooks.journalPoint = func(n int) {
		if n == k {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	}
	os.Exit(run(context.Background(), os.Args[2:], os.Stdin, os.Stdout, os.Stderr, os.Environ()))
}

func exitIs() {
	want, err := strconv.Atoi(os.Args[1])
	if err != nil || len(os.Args) < 3 {
		die(fmt.Errorf("usage: gpuenv-exit N ARGS..."))
	}
	got := run(context.Background(), os.Args[2:], os.Stdin, os.Stdout, os.Stderr, os.Environ())
	if got != want {
		fmt.Fprintf(os.Stderr, "gpuenv-exit: exit status %d, want %d\n", got, want)
		os.Exit(1)
	}
}
