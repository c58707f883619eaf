package providers

import (
	"context"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/finding"
	planpkg "github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
	"github.com/gpuenv/gpuenv/spec"
)

// bookwormPolicy is apt-cache policy on a Debian 12 machine with contrib
// and non-free enabled, for the packages of examples/debian12-distro.
const bookwormPolicy = `nvidia-driver:
  Installed: (none)
  Candidate: 535.309.01-0+deb12u1
  Version table:
     535.309.01-0+deb12u1 500
        500 http://deb.debian.org/debian-security bookworm-security/non-free amd64 Packages
     535.261.03-1 500
        500 http://deb.debian.org/debian bookworm/non-free amd64 Packages
nvidia-kernel-dkms:
  Installed: (none)
  Candidate: 535.309.01-0+deb12u1
  Version table:
     535.309.01-0+deb12u1 500
        500 http://deb.debian.org/debian-security bookworm-security/non-free amd64 Packages
     535.261.03-1 500
        500 http://deb.debian.org/debian bookworm/non-free amd64 Packages
nvidia-cuda-toolkit:
  Installed: (none)
  Candidate: 11.8.89~11.8.0-5~deb12u1
  Version table:
     11.8.89~11.8.0-5~deb12u1 500
        500 http://deb.debian.org/debian bookworm/non-free amd64 Packages
python3-torch:
  Installed: (none)
  Candidate: 1.13.1+dfsg-4
  Version table:
     1.13.1+dfsg-4 500
        500 http://deb.debian.org/debian bookworm/main amd64 Packages
`

// aptCache answers apt-cache policy and counts its starts.
type aptCache struct{ runs [][]string }

func (a *aptCache) Run(_ context.Context, c host.Command) error {
	a.runs = append(a.runs, c.Argv)
	if slices.Contains(c.Argv, "apt-cache") {
		io.WriteString(c.Stdout, bookwormPolicy)
	}
	return nil
}

// mainOnly is a default Debian 12 installation's sources: main only.
const mainOnly = "Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm bookworm-updates\nComponents: main\n\nTypes: deb\nURIs: http://deb.debian.org/debian-security\nSuites: bookworm-security\nComponents: main\n"

func loadExample(t *testing.T, name string) *spec.Spec {
	t.Helper()
	s, diags := spec.Load(filepath.Join("..", "examples", name), spec.LoadOptions{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return s
}

func planRoot(t *testing.T, root string, s *spec.Spec, pkgs []facts.Package, more ...func(*facts.Observation)) (*planpkg.Plan, *aptCache) {
	t.Helper()
	runner := &aptCache{}
	h := hosttest.New(t, root, host.WithRunner(runner))
	obs := Observe(context.Background(), h, ObserveOptions{})
	obs.Packages.Manager = "dpkg"
	// The package database is the test's own list.
	obs.Packages.Packages = pkgs
	for _, f := range more {
		f(obs)
	}
	pl := planner.New(Planners()...)
	pl.Candidates = Candidates(h)
	pl.EndState = EndState
	plan, diags := pl.Plan(context.Background(), s, obs)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return plan, runner
}

func addresses(p *planpkg.Plan) []string {
	var out []string
	for _, s := range p.Steps {
		out = append(out, s.Address+" "+s.Action.String())
	}
	return out
}

// TestDebianExampleWithoutGPU is the README's first command: Debian 12 without
// a GPU and without non-free, planning examples/debian12-distro. As an
// image before its first apt-get update, the root has no package list:
// nothing is asked of apt, and every version is known after apply, once
// the step that enables contrib and non-free has run apt-get update. On
// the same kind of machine with its lists fetched (contrib and non-free
// enabled), the versions come from the lists, and still no process runs.
func TestDebianExampleWithoutGPU(t *testing.T) {
	root := t.TempDir()
	hosttest.WriteFile(t, root, "/usr/lib/os-release", "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nID=debian\nVERSION_ID=\"12\"\nVERSION_CODENAME=bookworm\n")
	hosttest.WriteFile(t, root, "/etc/os-release", "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nID=debian\nVERSION_ID=\"12\"\nVERSION_CODENAME=bookworm\n")
	hosttest.WriteFile(t, root, "/etc/apt/sources.list.d/debian.sources", mainOnly)
	hosttest.WriteFile(t, root, "/proc/sys/kernel/osrelease", "6.1.0-28-amd64\n")
	s := loadExample(t, "debian12-distro")
	plan, runner := planRoot(t, root, s, nil)
	want := []string{
		"repository.distro-components create",
		"kernel.nouveau create",
		"kernel.headers create",
		"driver create",
		"cuda create",
		"framework.pytorch create",
	}
	if got := addresses(plan); !slices.Equal(got, want) {
		t.Errorf("steps %q, want %q", got, want)
	}
	if len(runner.runs) != 0 {
		t.Errorf("package manager runs %q, want none: the root has no list to ask about", runner.runs)
	}
	if d := plan.Step("driver"); d == nil || d.Operations[0].Packages.Install[1].Name != "nvidia-kernel-dkms" || !d.Operations[0].Packages.Install[1].KnownAfterApply() ||
		d.Operations[0].Packages.Install[1].Constraint != "535.*" || d.After["version"] != planpkg.KnownAfterApply {
		t.Errorf("driver step %+v: want nvidia-kernel-dkms known after apply, the newest 535.*", d)
	}
	if !slices.ContainsFunc(plan.Warnings, func(w finding.Finding) bool { return w.ID == "pci.gpus" && w.Summary == "No NVIDIA GPU on the PCI bus" }) {
		t.Errorf("no warning that the host has no GPU: %+v", plan.Warnings)
	}
	// The example names no repository: a step enables contrib and non-free
	// (whose NVIDIA packages depend on contrib) for the suites the host
	// uses, and runs apt-get update, which fetches every list: no step of
	// its own refreshes them.
	st := plan.Step("repository.distro-components")
	if st == nil || !strings.Contains(st.Operations[0].File.Content, "Suites: bookworm bookworm-updates\nComponents: contrib non-free\n") ||
		!slices.Equal(st.Operations[0].File.After, []string{"apt-get", "update"}) {
		t.Fatalf("components step %+v in %q", st, addresses(plan))
	}
	if d := plan.Step("driver"); d == nil || !slices.Contains(d.DependsOn, "repository.distro-components") {
		t.Errorf("the driver must wait for the components: %+v", d)
	}

	root = hosttest.Build(t, "debian12-lists")
	plan, runner = planRoot(t, root, s, nil)
	if len(runner.runs) != 0 {
		t.Errorf("with the lists fetched: package manager runs %q, want none", runner.runs)
	}
	if d := plan.Step("driver"); d == nil || d.Operations[0].Packages.Install[1].Name != "nvidia-kernel-dkms" || d.Operations[0].Packages.Install[1].Version != "535.309.01-0+deb12u1" {
		t.Errorf("with the lists fetched: driver step %+v", d)
	}
	if st := plan.Step(planner.RefreshAddress(planpkg.ManagerApt)); st != nil {
		t.Errorf("with the lists fetched: a refresh is planned: %+v", st)
	}
}

// TestDebianExampleConverged plans the example on the Debian fixture (an
// L4 on Debian's 535.261.03 driver) once everything is in place: no step,
// and no process started.
func TestDebianExampleConverged(t *testing.T) {
	root := hosttest.Build(t, "debian12-distro")
	hosttest.WriteFile(t, root, "/etc/apt/sources.list", "deb http://deb.debian.org/debian bookworm main contrib non-free\n")
	s := loadExample(t, "debian12-distro")
	installed := func(name, v string) facts.Package {
		return facts.Package{Name: name, Version: v, State: "installed", Want: "install"}
	}
	pkgs := []facts.Package{
		installed("nvidia-driver", "535.261.03-1"),
		installed("nvidia-kernel-dkms", "535.261.03-1"),
		installed("nvidia-cuda-toolkit", "11.8.89~11.8.0-5~deb12u1"),
		installed("python3-torch", "1.13.1+dfsg-4"),
	}
	// Debian's toolkit as the cuda observer reports it.
	toolkit := func(obs *facts.Observation) {
		obs.CUDA.Toolkits = []facts.Toolkit{{Path: "/usr/lib/nvidia-cuda-toolkit", Version: "11.8.0", Runtime: "11.8.89", Layout: "distro", Package: "nvidia-cuda-toolkit"}}
	}
	// The repository files as gpuenv writes them.
	first, _ := planRoot(t, root, s, pkgs, toolkit)
	for _, st := range first.Steps {
		if !strings.HasPrefix(st.Address, "repository.") {
			t.Errorf("only the repositories differ on this host, and %s is planned: %s", st.Address, st.Reason)
		}
		for _, op := range st.Operations {
			if op.File != nil {
				hosttest.WriteFile(t, root, op.File.Path, op.File.Content)
			}
		}
	}
	plan, runner := planRoot(t, root, s, pkgs, toolkit)
	if len(plan.Steps) != 0 {
		t.Errorf("converged host plans %q", addresses(plan))
	}
	if len(runner.runs) != 0 {
		t.Errorf("a converged host started %q", runner.runs)
	}
}
