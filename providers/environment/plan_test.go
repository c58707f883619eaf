package environment_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpuenv/gpuenv/planner/plantest"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/environment"
	"github.com/gpuenv/gpuenv/providers/host"
)

func planApply(t *testing.T, root string, steps []planner.Step) {
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
	tests := []struct {
		name   string
		src    string
		action planner.Action
		want   []file
	}{
		{
			name: "visible devices, order and a variable for shells and services",
			src: `environment {
  cuda_visible_devices = ["0", "1", "2"]
  cuda_device_order    = "PCI_BUS_ID"
  variables            = { NCCL_DEBUG = "it's \"warn\"" }
}
`,
			action: planner.Create,
			want: []file{
				{Path: environment.ManagedProfile, Content: "# Written by gpuenv from the spec; gpuenv rewrites it on every apply.\nexport CUDA_VISIBLE_DEVICES='0,1,2'\nexport CUDA_DEVICE_ORDER='PCI_BUS_ID'\nexport NCCL_DEBUG='it'\\''s \"warn\"'\n"},
				{Path: environment.ManagedSystemd, After: []string{"systemctl", "daemon-reexec"}, Content: "# Written by gpuenv from the spec: services see the same variables as login shells.\n[Manager]\nDefaultEnvironment=\"CUDA_VISIBLE_DEVICES=0,1,2\" \"CUDA_DEVICE_ORDER=PCI_BUS_ID\" \"NCCL_DEBUG=it's \\\"warn\\\"\"\n"},
			},
		},
		{
			name:   "the toolkit on PATH and in the loader's cache",
			src:    "cuda {\n  version = \"12.4\"\n  source = \"nvidia\"\n  set_environment = true\n}\n",
			action: planner.Create,
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
			obs := &facts.Observation{OS: facts.OS{ID: "ubuntu", VersionID: "22.04", Family: "deb"}}
			s := plantest.LoadSpec(t, tt.src)
			pl := planner.New(environment.Provider{Host: h})
			plan, diags := pl.Plan(context.Background(), s, obs)
			if diags.HasErrors() {
				t.Fatal(diags)
			}
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
			planApply(t, root, plan.Steps)
			if again, _ := pl.Plan(context.Background(), s, obs); len(again.Steps) != 0 {
				t.Errorf("after applying: %+v", again.Steps)
			}
			// Emptying the block removes what it wrote.
			if tt.action == planner.Create && s.Environment != nil {
				empty := plantest.LoadSpec(t, "environment {\n  absent = true\n}\n")
				plan, _ = pl.Plan(context.Background(), empty, obs)
				if len(plan.Steps) != 1 || plan.Steps[0].Action != planner.Delete || len(plan.Steps[0].Operations) != 2 {
					t.Errorf("absent: %+v", plan.Steps)
				}
				planApply(t, root, plan.Steps)
				if again, _ := pl.Plan(context.Background(), empty, obs); len(again.Steps) != 0 {
					t.Errorf("after removing: %+v", again.Steps)
				}
			}
		})
	}
}
