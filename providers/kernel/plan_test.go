package kernel_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	planpkg "github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/planner/plantest"
	"github.com/gpuenv/gpuenv/providers"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
	"github.com/gpuenv/gpuenv/providers/kernel"
)

func planObserve(t *testing.T, fixture string) (*host.Host, *facts.Observation) {
	t.Helper()
	h := hosttest.Fixture(t, fixture)
	return h, providers.Observe(context.Background(), h, providers.ObserveOptions{})
}

func TestPlan(t *testing.T) {
	tests := []struct {
		name    string
		fixture string
		src     string
		want    []string // address action: operations
		reboot  bool
	}{
		{
			name:    "nouveau bound to the GPU",
			fixture: "nouveau",
			src:     "driver {\n  version = \"550.*\"\n  blacklist_nouveau = true\n}\n",
			want:    []string{"kernel.nouveau create: file " + kernel.BlacklistFile + ", kernel rebuild_initramfs"},
			reboot:  true,
		},
		{
			name:    "Debian's own blacklist, already in the initramfs",
			fixture: "debian12-distro",
			src:     "driver {\n  version = \"535.*\"\n  blacklist_nouveau = true\n}\n",
		},
		{
			name:    "headers installed for the running kernel",
			fixture: "debian12-distro",
			src:     "driver {\n  version = \"535.*\"\n}\n",
		},
		{
			name:    "blacklist_nouveau left out leaves nouveau alone",
			fixture: "nouveau",
			src:     "driver {\n  version = \"550.*\"\n}\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, obs := planObserve(t, tt.fixture)
			pl := planner.New(kernel.Kind.Provider())
			pl.Candidates = plantest.Candidates{}
			s := plantest.LoadSpec(t, tt.src)
			plan := plantest.Plan(t, pl, s, obs)
			var got []string
			for _, st := range plan.Steps {
				line := st.Address + " " + st.Action.String() + ":"
				for i, op := range st.Operations {
					if i > 0 {
						line += ","
					}
					switch {
					case op.File != nil:
						line += " file " + op.File.Path
						if op.File.Content != kernel.BlacklistContent {
							t.Errorf("blacklist content %q", op.File.Content)
						}
					case op.Kernel != nil:
						line += " kernel " + string(op.Kernel.Action)
					}
				}
				got = append(got, line)
				if st.Flags.NeedsReboot != tt.reboot {
					t.Errorf("%s needs reboot = %v", st.Address, st.Flags.NeedsReboot)
				}
			}
			if len(got) != len(tt.want) {
				t.Fatalf("steps %q, want %q", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("step %q, want %q", got[i], tt.want[i])
				}
			}
			if len(tt.want) == 0 {
				return
			}
			// Apply: the file is written and the initramfs rebuilt after it.
			p := filepath.Join(h.Root(), kernel.BlacklistFile)
			if err := os.WriteFile(p, []byte(kernel.BlacklistContent), 0o644); err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			os.Chtimes(p, now.Add(-time.Minute), now.Add(-time.Minute))
			if obs.Kernel.Initramfs != nil {
				os.Chtimes(filepath.Join(h.Root(), obs.Kernel.Initramfs.Path), now, now)
			}
			obs = providers.Observe(context.Background(), h, providers.ObserveOptions{})
			plantest.Converged(t, pl, s, obs, "applying")
		})
	}
}

func TestStaleInitramfs(t *testing.T) {
	_, obs := planObserve(t, "debian12-distro")
	lists := obs.Kernel.Blacklists
	if obs.Kernel.Initramfs == nil || len(lists) == 0 {
		t.Fatal("the fixture has a blacklist and an initramfs")
	}
	for i := range obs.Kernel.Blacklists {
		if obs.Kernel.Blacklists[i].Module == "nouveau" {
			obs.Kernel.Blacklists[i].ModTime = obs.Kernel.Initramfs.ModTime.Add(time.Hour)
		}
	}
	pl := planner.New(kernel.Kind.Provider())
	plan := plantest.Plan(t, pl, plantest.LoadSpec(t, "driver {\n  version = \"535.*\"\n  blacklist_nouveau = true\n}\n"), obs)
	st := plan.Step("kernel.nouveau")
	if st == nil || st.Action != planpkg.Update || len(st.Operations) != 1 || st.Operations[0].Kernel == nil {
		t.Fatalf("a blacklist newer than the initramfs must rebuild it: %+v", plan.Steps)
	}
}

func TestHeaders(t *testing.T) {
	_, obs := planObserve(t, "debian12-distro")
	for i := range obs.Kernel.Installed {
		obs.Kernel.Installed[i].Headers = false
	}
	obs.Packages.Manager = "dpkg"
	pl := planner.New(kernel.Kind.Provider())
	pl.Candidates = plantest.Candidates{"linux-headers-6.1.0-28-amd64": {"6.1.119-1"}}
	plan := plantest.Plan(t, pl, plantest.LoadSpec(t, "driver {\n  version = \"535.*\"\n}\n"), obs)
	st := plan.Step("kernel.headers")
	if st == nil || st.Operations[0].Packages.Install[0].Name != "linux-headers-6.1.0-28-amd64" || st.Operations[0].Packages.Install[0].Version != "6.1.119-1" {
		t.Fatalf("steps %+v", plan.Steps)
	}
	pl.Candidates = plantest.Candidates{}
	plan, _ = pl.Plan(context.Background(), plantest.LoadSpec(t, "driver {\n  version = \"535.*\"\n}\n"), obs)
	if plan.Step("kernel.headers") != nil || len(plan.Warnings) == 0 || plan.Warnings[0].Summary != "Kernel headers for the running kernel are missing" {
		t.Errorf("headers the archive does not have are a warning: %+v %+v", plan.Steps, plan.Warnings)
	}
}
