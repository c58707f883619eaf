package providers

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner"
	planpkg "github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

// refusing is a runner that fails the test on any command.
type refusing struct{ t *testing.T }

func (r refusing) Run(_ context.Context, c host.Command) error {
	r.t.Errorf("a process was started: %q", c.Argv)
	return errors.New("refused")
}

// TestPlanFromIndexesStartsNoProcess plans the Debian example on a fresh
// Debian 12 root whose lists apt fetched: the versions come from the
// indexes on disk, and no process is started.
func TestPlanFromIndexesStartsNoProcess(t *testing.T) {
	h := hosttest.Fixture(t, "debian12-lists", host.WithRunner(refusing{t}))
	obs := Observe(context.Background(), h, ObserveOptions{})
	if len(obs.PackageIndexes.Indexes) != 9 {
		t.Fatalf("%d indexes observed", len(obs.PackageIndexes.Indexes))
	}
	pl := planner.New(Planners()...)
	cands := Candidates(h)
	pl.Candidates = cands
	plan, diags := pl.Plan(context.Background(), loadExample(t, "debian12-distro"), obs)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	want := []string{"kernel.nouveau create", "kernel.headers create", "driver create", "cuda create", "framework.pytorch create"}
	if got := addresses(plan); !slices.Equal(got, want) {
		t.Errorf("steps %q, want %q", got, want)
	}
	if cands.Runs() != 0 {
		t.Errorf("%d package-manager commands", cands.Runs())
	}
	// The newest version of the archive, the security update, as apt
	// would install it.
	install := plan.Step("driver").Operations[0].Packages.Install
	i := slices.IndexFunc(install, func(p planpkg.PackagePin) bool { return p.Name == "nvidia-kernel-dkms" })
	if i < 0 || install[i].Version != "535.309.01-0+deb12u1" {
		t.Errorf("driver packages %+v", install)
	}
	if k := plan.Step("kernel.headers"); k == nil || k.Operations[0].Packages.Install[0].Version != "6.1.119-1" {
		t.Errorf("headers step %+v", k)
	}
	if c := plan.Step("cuda"); c == nil || !strings.Contains(c.Operations[0].Packages.Install[0].Version, "11.8.89~11.8.0-5~deb12u1") {
		t.Errorf("cuda step %+v", c)
	}
}
