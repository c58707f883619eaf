package environment_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	planpkg "github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/planner/plantest"
	"github.com/gpuenv/gpuenv/providers"
	"github.com/gpuenv/gpuenv/providers/environment"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

func planApply(t *testing.T, root string, steps []planpkg.Step) {
	for _, s := range steps {
		for _, op := range s.Operations {
			f := op.File
			full := filepath.Join(root, f.Path)
			if f.Remove {
				os.Remove(full)
				continue
			}
			os.MkdirAll(filepath.Dir(full), 0o755)
			if err := os.WriteFile(full, []byte(f.Content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestPlan(t *testing.T) {
	type file struct {
		Path, Content string
		Remove        bool
		After         []string
	}
	variables := `environment {
  cuda_visible_devices = ["0", "1", "2"]
  cuda_device_order    = "PCI_BUS_ID"
  variables            = { NCCL_DEBUG = "it's \"warn\"" }
}
`
	profile := file{Path: environment.ManagedProfile, Content: "# Written by gpuenv from the spec; gpuenv rewrites it on every apply.\nexport CUDA_VISIBLE_DEVICES='0,1,2'\nexport CUDA_DEVICE_ORDER='PCI_BUS_ID'\nexport NCCL_DEBUG='it'\\''s \"warn\"'\n"}
	dropIn := file{Path: environment.ManagedSystemd, Content: "# Written by gpuenv from the spec: services see the same variables as login shells.\n[Manager]\nDefaultEnvironment=\"CUDA_VISIBLE_DEVICES=0,1,2\" \"CUDA_DEVICE_ORDER=PCI_BUS_ID\" \"NCCL_DEBUG=it's \\\"warn\\\"\"\n"}
	reexec := dropIn
	reexec.After = []string{"systemctl", "daemon-reexec"}
	systemd := facts.Init{PID1: "systemd", Live: true, Systemd: true}
	tests := []struct {
		name   string
		src    string
		init   facts.Init
		action planpkg.Action
		want   []file
		// reason is how the step's reason ends.
		reason string
	}{
		{
			name:   "visible devices, order and a variable for shells and services",
			src:    variables,
			init:   systemd,
			action: planpkg.Create,
			want:   []file{profile, reexec},
			reason: "writes /etc/systemd/system.conf.d/gpuenv.conf (services' variables).",
		},
		{
			// A container whose process 1 is not systemd: systemctl
			// reaches no manager there, and daemon-reexec would fail.
			name:   "a live root whose process 1 is not systemd",
			src:    variables,
			init:   facts.Init{PID1: "bash", Live: true},
			action: planpkg.Create,
			want:   []file{profile, dropIn},
			reason: "systemd is not process 1 here (bash is), so services see the change at the next boot with systemd, and login shells at their next login.",
		},
		{
			name:   "an image whose /proc says systemd is not the running system",
			src:    variables,
			init:   facts.Init{PID1: "systemd"},
			action: planpkg.Create,
			want:   []file{profile, dropIn},
			reason: "The root is not the running system, so services see the change when it next boots, and login shells at their next login.",
		},
		{
			name:   "a live root without /proc/1/comm",
			src:    variables,
			init:   facts.Init{Live: true},
			action: planpkg.Create,
			want:   []file{profile, dropIn},
			reason: "Process 1 is unknown (no /proc/1/comm), so services see the change at the next boot with systemd, and login shells at their next login.",
		},
		{
			name:   "the toolkit on PATH and in the loader's cache",
			src:    "cuda {\n  version = \"12.4\"\n  source = \"nvidia\"\n  set_environment = true\n}\n",
			init:   systemd,
			action: planpkg.Create,
			want: []file{
				{Path: environment.ManagedProfile, Content: "# Written by gpuenv from the spec; gpuenv rewrites it on every apply.\ncase \":$PATH:\" in *:/usr/local/cuda-12.4/bin:*) ;; *) export PATH='/usr/local/cuda-12.4'\"/bin:$PATH\" ;; esac\n"},
				{Path: environment.ManagedLdSoConf, After: []string{"ldconfig"}, Content: "# Written by gpuenv from the spec.\n/usr/local/cuda-12.4/lib64\n"},
			},
		},
		{
			name: "a spec without the environment block leaves the files alone",
			src:  "driver {\n  version = \"550.*\"\n}\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			h, _ := host.New(root)
			obs := &facts.Observation{OS: facts.OS{ID: "ubuntu", VersionID: "22.04", Family: "deb"}, Init: tt.init, Repositories: []facts.Repository{{File: "/etc/apt/sources.list.d/cuda-ubuntu2204-x86_64.list", URIs: []string{"https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/"}}}}
			s := plantest.LoadSpec(t, tt.src)
			pl := planner.New(environment.Kind.Provider())
			plan := plantest.Plan(t, pl, s, obs)
			if len(tt.want) == 0 {
				if len(plan.Steps) != 0 {
					t.Fatalf("steps %+v", plan.Steps)
				}
				return
			}
			if len(plan.Steps) != 1 || plan.Steps[0].Address != "environment" || plan.Steps[0].Action != tt.action {
				t.Fatalf("steps %+v", plan.Steps)
			}
			var got []file
			for _, op := range plan.Steps[0].Operations {
				got = append(got, file{op.File.Path, op.File.Content, op.File.Remove, op.File.After})
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("files (-want +got):\n%s", diff)
			}
			if r := plan.Steps[0].Reason; tt.reason != "" && !strings.HasSuffix(r, tt.reason) {
				t.Errorf("reason %q\ndoes not end %q", r, tt.reason)
			}
			planApply(t, root, plan.Steps)
			obs.Environment, _ = environment.Observe(h)
			plantest.Converged(t, pl, s, obs, "applying")
			// Emptying the block removes what it wrote.
			if tt.action == planpkg.Create && s.Environment != nil {
				empty := plantest.LoadSpec(t, "environment {\n  absent = true\n}\n")
				plan, _ = pl.Plan(context.Background(), empty, obs)
				if len(plan.Steps) != 1 || plan.Steps[0].Action != planpkg.Delete || len(plan.Steps[0].Operations) != 2 {
					t.Errorf("absent: %+v", plan.Steps)
				}
				planApply(t, root, plan.Steps)
				obs.Environment, _ = environment.Observe(h)
				plantest.Converged(t, pl, empty, obs, "removing")
			}
		})
	}
}

// TestPlanContainer: in a container whose process 1 is bash, as the
// fixture root observes it, the drop-in is written without a systemctl
// follow-up, and the step says when services see it.
func TestPlanContainer(t *testing.T) {
	h := hosttest.Fixture(t, "ubuntu2204-container")
	obs := providers.Observe(context.Background(), h, providers.ObserveOptions{})
	if want := (facts.Init{PID1: "bash"}); obs.Init != want {
		t.Fatalf("init %+v, want %+v", obs.Init, want)
	}
	s := plantest.LoadSpec(t, "environment {\n  cuda_visible_devices = [\"0\"]\n}\n")
	plan := plantest.Plan(t, planner.New(environment.Kind.Provider()), s, obs)
	if len(plan.Steps) != 1 {
		t.Fatalf("steps %+v", plan.Steps)
	}
	var paths []string
	for _, op := range plan.Steps[0].Operations {
		paths = append(paths, op.File.Path)
		if len(op.File.After) > 0 {
			t.Errorf("%s is followed by %q, which fails where systemd is not process 1", op.File.Path, op.File.After)
		}
	}
	if !slices.Contains(paths, environment.ManagedSystemd) {
		t.Errorf("the drop-in is not written: %q", paths)
	}
	if r := plan.Steps[0].Reason; !strings.Contains(r, "services see the change when it next boots") {
		t.Errorf("reason %q does not say when services see the change", r)
	}
}
