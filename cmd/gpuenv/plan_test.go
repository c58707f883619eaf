package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/tools/txtar"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
	"github.com/gpuenv/gpuenv/providers/host/pkgindex"
	"github.com/gpuenv/gpuenv/spec"
)

// tableCandidates answers package-version questions from a file of lines
// "manager name version..." (newest first), the archive a fixture root
// would see, and records every question.
type tableCandidates struct {
	versions map[string][]string
	mu       sync.Mutex
	asked    []string
}

func loadCandidates(tb testing.TB, root string) *tableCandidates {
	tb.Helper()
	c, err := readCandidates(root)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// readCandidates reads testdata/plan/candidates/ROOT.txt; a root without
// a file has an archive that knows no package.
func readCandidates(root string) (*tableCandidates, error) {
	c := &tableCandidates{versions: map[string][]string{}}
	_, file, _, _ := runtime.Caller(0)
	f, err := os.Open(filepath.Join(filepath.Dir(file), "testdata", "plan", "candidates", root+".txt"))
	if os.IsNotExist(err) {
		return c, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		if len(fields) < 2 {
			return nil, fmt.Errorf("candidates for %s: bad line %q", root, sc.Text())
		}
		c.versions[fields[0]+" "+fields[1]] = fields[2:]
	}
	return c, sc.Err()
}

// A test-only entry point for the plan scripts:
//
//	gpuenv-archive NAME ARGS...   gpuenv whose package manager answers from
//	                              testdata/plan/candidates/NAME.txt, and
//	                              which may start no process
func init() {
	extraTestCommands["gpuenv-archive"] = func() {
		if len(os.Args) < 2 {
			fmt.Fprintln(os.Stderr, "usage: gpuenv-archive NAME ARGS...")
			os.Exit(2)
		}
		c, err := readCandidates(os.Args[1])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		newCandidates = func(*host.Host) planner.Candidates { return c }
		hostOptions = append(hostOptions, host.WithRunner(refuseRunner{}))
		os.Exit(run(context.Background(), os.Args[2:], os.Stdin, os.Stdout, os.Stderr, os.Environ()))
	}
}

// A test-only entry point for the plan scripts on roots whose package
// lists are on disk:
//
//	gpuenv-noprocess ARGS...   gpuenv that may start no process: the
//	                           versions come from the lists on disk
func init() {
	extraTestCommands["gpuenv-noprocess"] = func() {
		hostOptions = append(hostOptions, host.WithRunner(refuseRunner{}))
		os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Environ()))
	}
}

// refuseRunner refuses every process, saying which.
type refuseRunner struct{}

func (refuseRunner) Run(_ context.Context, c host.Command) error {
	return fmt.Errorf("this test starts no process, but plan ran %q", c.Argv)
}

func (c *tableCandidates) Versions(_ context.Context, manager plan.Manager, name string) ([]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked = append(c.asked, string(manager)+" "+name)
	return c.versions[string(manager)+" "+name], nil
}

// noRunner fails a test that starts a process.
type noRunner struct{ tb testing.TB }

func (r noRunner) Run(_ context.Context, c host.Command) error {
	r.tb.Errorf("plan started a process: %q", c.Argv)
	return fmt.Errorf("no processes in this test")
}

// rpmRunner answers rpm -qa and rpm -ql, which observation runs on an
// RPM host (its database is not a file gpuenv reads), from the fixture's
// recorded output, and fails the test for any other process.
type rpmRunner struct {
	tb testing.TB
	qa []byte
	ql []byte // "package<TAB>path" lines
}

func (r rpmRunner) Run(ctx context.Context, c host.Command) error {
	if len(c.Argv) >= 4 && c.Argv[0] == "chroot" && c.Argv[2] == "rpm" {
		switch c.Argv[3] {
		case "-qa":
			_, err := c.Stdout.Write(r.qa)
			return err
		case "-ql":
			names := c.Argv[4:]
			if len(names) > 0 && names[0] == "--" {
				names = names[1:]
			}
			for line := range strings.Lines(string(r.ql)) {
				pkg, file, ok := strings.Cut(strings.TrimSpace(line), "\t")
				if ok && slices.Contains(names, pkg) {
					fmt.Fprintln(c.Stdout, file)
				}
			}
			return nil
		}
	}
	return noRunner{r.tb}.Run(ctx, c)
}

// runnerFor is the process runner a fixture root's plan may use.
func runnerFor(tb testing.TB, root string) host.Runner {
	qa, err := os.ReadFile(filepath.Join(repoTestdata(), "rpm", root+".qa"))
	if err != nil {
		return noRunner{tb}
	}
	ql, _ := os.ReadFile(filepath.Join(repoTestdata(), "rpm", root+".ql"))
	return rpmRunner{tb, qa, ql}
}

// withPlanHost makes plan use cands and the runner r for the duration of a
// test.
func withPlanHost(tb testing.TB, cands planner.Candidates, r host.Runner) {
	oldCands, oldOpts := newCandidates, hostOptions
	newCandidates = func(*host.Host) planner.Candidates { return cands }
	hostOptions = append(slices.Clone(hostOptions), host.WithRunner(r))
	tb.Cleanup(func() { newCandidates, hostOptions = oldCands, oldOpts })
}

// planCase is one fixture root planned against one spec.
type planCase struct {
	root string
	spec string // relative to the repository root
	args []string
	// indexes: the candidates come from the root's package indexes, as
	// gpuenv itself answers them, not from a table.
	indexes bool
}

func (c planCase) name() string {
	return c.root + "/" + strings.TrimSuffix(filepath.Base(c.spec), ".hcl")
}

// planCases are the fixture roots, each with the example specs written for
// its kind of machine, and the spec that matches the working DGX exactly.
var planCases = []planCase{
	{root: "ubuntu2204-h100-fresh", spec: "examples/pytorch-workstation"},
	{root: "ubuntu2204-h100-fresh", spec: "examples/tensorflow-server"},
	{root: "ubuntu2204-h100-fresh", spec: "examples/airgapped"},
	{root: "ubuntu2204-h100-fresh", spec: "examples/shared-multiuser"},
	{root: "ubuntu2204-h100-fresh", spec: "examples/variables", args: []string{"--var", "cuda=12.6"}},
	{root: "ubuntu2204-working", spec: "cmd/gpuenv/testdata/plan/ubuntu2204-working/converged.hcl"},
	{root: "ubuntu2204-working", spec: "cmd/gpuenv/testdata/plan/ubuntu2204-working/teams.hcl"},
	{root: "ubuntu2204-working", spec: "examples/pytorch-workstation"},
	{root: "ubuntu2204-working", spec: "examples/shared-multiuser"},
	{root: "ubuntu2204-mismatch", spec: "examples/pytorch-workstation"},
	{root: "debian12-distro", spec: "examples/debian12-distro"},
	{root: "rhel9", spec: "examples/shared-multiuser"},
	{root: "tensorflow-no-cudnn", spec: "examples/tensorflow-server"},
	{root: "nouveau", spec: "examples/pytorch-workstation"},
	{root: "apt-no-lists", spec: "cmd/gpuenv/testdata/plan/apt-no-lists/userspace.hcl", indexes: true},
	{root: "debian12-lists", spec: "cmd/gpuenv/testdata/plan/apt-no-lists/userspace.hcl", indexes: true},
	{root: "containers-host", spec: "cmd/gpuenv/testdata/plan/containers-host/podman.hcl"},
	{root: "containers-host", spec: "cmd/gpuenv/testdata/plan/containers-host/driver-upgrade.hcl"},
	{root: "containers-host", spec: "cmd/gpuenv/testdata/plan/containers-host/docker.hcl"},
	// Fresh hosts as their installers leave them: a whole stack with no
	// source and no repository block (repos_test.go says what must hold).
	{root: "ubuntu2204-h100-fresh", spec: "cmd/gpuenv/testdata/plan/fresh", indexes: true},
	{root: "fresh-ubuntu2404", spec: "cmd/gpuenv/testdata/plan/fresh", indexes: true},
	{root: "fresh-debian12", spec: "cmd/gpuenv/testdata/plan/fresh", indexes: true},
	{root: "fresh-rhel9", spec: "cmd/gpuenv/testdata/plan/fresh"},
}

// runPlan runs gpuenv plan in this process against a built fixture root.
func runPlanCase(root string, c planCase, json bool) (code int, stdout, stderr string) {
	args := []string{"--root", root, "plan"}
	if json {
		args = append(args, "--json")
	}
	args = append(args, c.args...)
	args = append(args, filepath.Join("..", "..", c.spec))
	var out, errb bytes.Buffer
	code = run(context.Background(), args, nil, &out, &errb, nil)
	// Messages that quote a path on this machine name the temporary root.
	mask := func(s string) string { return strings.ReplaceAll(s, root, "<root>") }
	return code, mask(out.String()), mask(errb.String())
}

// TestPlanGolden plans each fixture root against its specs and compares
// the human plan (stdout and stderr) and the JSON plan with
// testdata/plan/ROOT/SPEC.txtar; -update rewrites them.
func TestPlanGolden(t *testing.T) {
	for _, c := range planCases {
		t.Run(c.name(), func(t *testing.T) {
			root := hosttest.Build(t, c.root)
			cands := loadCandidates(t, c.root)
			if c.indexes {
				withPlanHost(t, nil, noRunner{t})
				newCandidates = func(h *host.Host) planner.Candidates { return providers.Candidates(h) }
			} else {
				withPlanHost(t, cands, runnerFor(t, c.root))
			}
			code, stdout, stderr := runPlanCase(root, c, false)
			jcode, jstdout, jstderr := runPlanCase(root, c, true)
			if jcode != code {
				t.Errorf("exit %d with --json, %d without", jcode, code)
			}
			if jstderr != "" {
				t.Errorf("--json wrote to stderr:\n%s", jstderr)
			}
			asked := "none"
			if c.indexes {
				asked = "none (from the package indexes on disk)"
			}
			if len(cands.asked) > 0 {
				asked = strings.Join(slices.Compact(slices.Sorted(slices.Values(cands.asked))), ", ")
			}
			ar := &txtar.Archive{
				Comment: fmt.Appendf(nil, "gpuenv --root <%s> plan %s%s\nexit status %d\npackage candidates asked for: %s\n", c.root,
					strings.Join(append(slices.Clone(c.args), ""), " "), c.spec, code, asked),
				Files: []txtar.File{
					{Name: "stdout", Data: []byte(stdout)},
					{Name: "stderr", Data: []byte(stderr)},
					{Name: "json", Data: []byte(jstdout)},
				},
			}
			got := txtar.Format(ar)
			golden := filepath.Join("testdata", "plan", c.name()+".txtar")
			if *update {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("%s (-want +got):\n%s", golden, diff)
			}
		})
	}
}

// A host that already matches the spec is planned from its files alone:
// no package manager asked, no process started.
func TestPlanConvergedStartsNoProcess(t *testing.T) {
	c := planCases[slices.IndexFunc(planCases, func(c planCase) bool { return c.root == "ubuntu2204-working" })]
	root := hosttest.Build(t, c.root)
	cands := &tableCandidates{}
	withPlanHost(t, cands, noRunner{t})
	args := []string{"--root", root, "plan", "--detailed-exitcode", filepath.Join("..", "..", c.spec)}
	var out, errb bytes.Buffer
	code := run(context.Background(), args, nil, &out, &errb, nil)
	if code != exitOK || !strings.Contains(out.String(), "No changes.") {
		t.Errorf("exit %d, want 0 and no changes:\n%s%s", code, out.String(), errb.String())
	}
	if len(cands.asked) > 0 {
		t.Errorf("a converged host asked the package manager for %v", cands.asked)
	}
}

// The saved plan a plan --out writes is one apply can read, and fresh
// against the host it was made on.
func TestPlanOutIsReadable(t *testing.T) {
	c := planCases[0]
	root := hosttest.Build(t, c.root)
	withPlanHost(t, loadCandidates(t, c.root), noRunner{t})
	out := filepath.Join(t.TempDir(), "tonight.plan")
	args := []string{"--root", root, "plan", "--out", out, "--detailed-exitcode", filepath.Join("..", "..", c.spec)}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), args, nil, &stdout, &stderr, nil); code != exitChanges {
		t.Fatalf("exit %d, want %d:\n%s%s", code, exitChanges, stdout.String(), stderr.String())
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sp, err := planner.ReadSavedPlan(f)
	if err != nil {
		t.Fatal(err)
	}
	if sp.Empty() {
		t.Error("the saved plan of a fresh machine has no steps")
	}
	fi, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o640 {
		t.Errorf("saved plan mode %v, want 0640", fi.Mode().Perm())
	}
}

func benchmarkPlan(b *testing.B, c planCase) {
	root := hosttest.Build(b, c.root)
	withPlanHost(b, loadCandidates(b, c.root), runnerFor(b, c.root))
	if c.indexes {
		newCandidates = func(h *host.Host) planner.Candidates { return providers.Candidates(h) }
	}
	args := []string{"--root", root, "plan", filepath.Join("..", "..", c.spec)}
	b.ReportAllocs()
	cpu := hosttest.CPUTime(b)
	for b.Loop() {
		if code := run(context.Background(), args, nil, io.Discard, io.Discard, nil); code != exitOK {
			b.Fatalf("exit %d", code)
		}
	}
	cpu.Report(b)
}

// BenchmarkPlanConverged is gpuenv plan's command (load the spec,
// observe, resolve, plan, render) on the working DGX with the spec it
// matches; a converged host asks for no package candidates.
func BenchmarkPlanConverged(b *testing.B) {
	benchmarkPlan(b, planCase{root: "ubuntu2204-working", spec: "cmd/gpuenv/testdata/plan/ubuntu2204-working/converged.hcl"})
}

// BenchmarkPlanFresh is gpuenv plan's command on a machine with nothing
// installed, where every layer has to change. The package candidates
// come from a hand-written table (testdata/plan/candidates), not from
// package indexes: BenchmarkPlanIndexes measures those.
func BenchmarkPlanFresh(b *testing.B) {
	benchmarkPlan(b, planCase{root: "ubuntu2204-h100-fresh", spec: "examples/pytorch-workstation"})
}

// BenchmarkPlanFreshRepository is gpuenv plan's command on fresh hosts as
// their installers leave them (no package list fetched), with a whole
// stack and no repository block: the plan adds NVIDIA's repository from
// gpuenv's table. Compare with BenchmarkPlanConverged, run beside it.
func BenchmarkPlanFreshRepository(b *testing.B) {
	for _, c := range planCases {
		if c.spec == "cmd/gpuenv/testdata/plan/fresh" {
			b.Run(strings.TrimPrefix(c.root, "fresh-"), func(b *testing.B) { benchmarkPlan(b, c) })
		}
	}
}

// BenchmarkPlanIndexes is gpuenv plan end to end on the fixture whose
// package lists are the Debian archive's own, cut (debian12-lists: 3,300
// stanzas, lz4 and gzip as apt keeps them on an image): observe the
// root, read its package indexes, answer the candidates from them as
// gpuenv does, plan the driver's userspace and render it. No process
// runs. "cold": the root has no /var/cache, so every plan decompresses
// and scans every list; "cached": it has one, and after the first plan
// the relevant stanzas are read from gpuenv's cache (written as root
// only).
func BenchmarkPlanIndexes(b *testing.B) {
	c := planCases[slices.IndexFunc(planCases, func(c planCase) bool { return c.root == "debian12-lists" })]
	for _, cached := range []bool{false, true} {
		name := map[bool]string{false: "cold", true: "cached"}[cached]
		b.Run(name, func(b *testing.B) {
			root := hosttest.Build(b, c.root)
			if cached {
				if os.Geteuid() != 0 {
					b.Skip("the index cache is written only as root")
				}
				if err := os.MkdirAll(filepath.Join(root, "var/cache"), 0o755); err != nil {
					b.Fatal(err)
				}
			}
			withPlanHost(b, nil, noRunner{b})
			newCandidates = func(h *host.Host) planner.Candidates { return providers.Candidates(h) }
			args := []string{"--root", root, "plan", filepath.Join("..", "..", c.spec)}
			// The plan measured is the one that needs the indexes: a
			// version only they can give.
			var out bytes.Buffer
			if code := run(context.Background(), args, nil, &out, io.Discard, nil); code != exitOK ||
				!strings.Contains(out.String(), "apt: install nvidia-smi=535.309.01-0+deb12u1") {
				b.Fatalf("exit %d, want a plan with the version the indexes offer:\n%s", code, out.String())
			}
			if _, err := os.Stat(filepath.Join(root, pkgindex.CacheDir)); (err == nil) != cached {
				b.Fatalf("the index cache exists: %v, want %v", err == nil, cached)
			}
			b.ReportAllocs()
			cpu := hosttest.CPUTime(b)
			for b.Loop() {
				if code := run(context.Background(), args, nil, io.Discard, io.Discard, nil); code != exitOK {
					b.Fatalf("exit %d", code)
				}
			}
			cpu.Report(b)
		})
	}
}

// BenchmarkPlanConvergedStages splits the converged plan into its stages,
// to tell the planner's own cost from the observation's.
func BenchmarkPlanConvergedStages(b *testing.B) {
	c := planCase{root: "ubuntu2204-working", spec: "cmd/gpuenv/testdata/plan/ubuntu2204-working/converged.hcl"}
	root := hosttest.Build(b, c.root)
	specPath := filepath.Join("..", "..", c.spec)
	h, err := host.New(root, host.WithRunner(noRunner{b}))
	if err != nil {
		b.Fatal(err)
	}
	s, diags := spec.Load(specPath, spec.LoadOptions{})
	if diags.HasErrors() {
		b.Fatal(diags)
	}
	obs := providers.Observe(context.Background(), h, providers.ObserveOptions{})
	pl := planner.New(providers.Planners()...)
	pl.Candidates = &tableCandidates{}
	p, diags := pl.Plan(context.Background(), s, obs)
	if diags.HasErrors() || !p.Empty() {
		b.Fatalf("not converged: %v %+v", diags, p.Steps)
	}
	b.Run("load", func(b *testing.B) {
		for b.Loop() {
			spec.Load(specPath, spec.LoadOptions{})
		}
	})
	b.Run("observe", func(b *testing.B) {
		for b.Loop() {
			providers.Observe(context.Background(), h, providers.ObserveOptions{})
		}
	})
	b.Run("plan", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			pl.Plan(context.Background(), s, obs)
		}
	})
	b.Run("render", func(b *testing.B) {
		for b.Loop() {
			(&humanPlan{w: io.Discard}).render(p)
		}
	})
	// What plan adds to the planner's own cost: predicting the end state
	// and judging every rule doctor has over it.
	b.Run("endstate", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			planner.EndStateFindings(providers.EndState(obs, p.Steps), nil)
		}
	})
}

func TestPythonsToObserve(t *testing.T) {
	s := &spec.Spec{Frameworks: []*spec.Framework{
		{Name: spec.PyTorch, Venv: spec.Attr[string]{Value: "/opt/pytorch", Set: true}},
		{Name: spec.JAX, Python: spec.Attr[string]{Value: "/usr/bin/python3", Set: true}},
		{Name: spec.TensorFlow, Source: spec.Attr[spec.Source]{Value: spec.SourceDistro, Set: true}},
		{Name: spec.TensorFlow, Venv: spec.Attr[string]{Value: "/opt/pytorch", Set: true}},
	}}
	got := pythonsToObserve(s, []string{"/usr/bin/python3", "/srv/env/bin/python"})
	want := []string{"/usr/bin/python3", "/srv/env/bin/python", "/opt/pytorch/bin/python"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("interpreters (-want +got):\n%s", diff)
	}
}

// BenchmarkStartup is what every invocation pays before its command runs:
// building the command tree and parsing the arguments ("gpuenv version").
func BenchmarkStartup(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if code := run(context.Background(), []string{"version"}, nil, io.Discard, io.Discard, nil); code != exitOK {
			b.Fatalf("exit %d", code)
		}
	}
}
