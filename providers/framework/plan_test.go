package framework_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	planpkg "github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/planner/plantest"
	"github.com/gpuenv/gpuenv/providers/framework"
)

// h100 is an Ubuntu host with one H100 and the system's Python.
func h100(envs ...facts.PythonEnv) *facts.Observation {
	return &facts.Observation{
		OS:     facts.OS{ID: "ubuntu", VersionID: "22.04", Family: "deb"},
		PCI:    []facts.PCIDevice{{Address: "0000:17:00.0", VendorID: 0x10de, DeviceID: 0x2330}},
		Python: append([]facts.PythonEnv{{Interpreter: "/usr/bin/python3", Prefix: "/usr", Version: "3.10", System: true}}, envs...),
	}
}

func venv(prefix string, fws ...facts.Framework) facts.PythonEnv {
	return facts.PythonEnv{Interpreter: prefix + "/bin/python", Prefix: prefix, Version: "3.10", Virtual: true, Frameworks: fws}
}

func TestPlan(t *testing.T) {
	torch := func(v, cuda string) facts.Framework {
		return facts.Framework{Name: "pytorch", Version: v, CUDA: cuda, CPUOnly: cuda == "", Installer: "pip"}
	}
	tests := []struct {
		name   string
		src    string
		obs    *facts.Observation
		want   *planpkg.Step
		update facts.Framework // what apply leaves installed
	}{
		{
			name: "torch into a venv gpuenv creates",
			src:  "framework \"pytorch\" {\n  version = \"2.5.*\"\n  venv = \"/opt/pytorch\"\n}\n",
			obs:  h100(),
			want: &planpkg.Step{
				Address: "framework.pytorch", Action: planpkg.Create,
				After:      map[string]string{"version": "2.5.1+cu124", "environment": "the venv /opt/pytorch", "index_url": "https://download.pytorch.org/whl/cu124"},
				Reason:     "The package torch is not installed in the venv /opt/pytorch; installs torch==2.5.1+cu124 from https://download.pytorch.org/whl/cu124; the venv /opt/pytorch is created first with /usr/bin/python3; the cu124 wheels bring their own CUDA 12.4 runtime and cuDNN.",
				ReasonCode: planpkg.ReasonMissing,
				Operations: []planpkg.Operation{{Kind: planpkg.OpPackages, Packages: &planpkg.PackagesOp{
					Manager: "pip", Install: []planpkg.PackagePin{{Name: "torch", Version: "2.5.1+cu124"}},
					Python: "/usr/bin/python3", Venv: "/opt/pytorch", IndexURL: "https://download.pytorch.org/whl/cu124",
				}}},
			},
			update: torch("2.5.1+cu124", "12.4"),
		},
		{
			name: "a CPU-only build is replaced by the CUDA one",
			src:  "framework \"pytorch\" {\n  version = \"2.5.*\"\n  venv = \"/opt/pytorch\"\n}\n",
			obs:  h100(venv("/opt/pytorch", torch("2.5.1+cpu", ""))),
			want: &planpkg.Step{
				Address: "framework.pytorch", Action: planpkg.Update,
				Before:     map[string]string{"version": "2.5.1+cpu", "environment": "the venv /opt/pytorch"},
				After:      map[string]string{"version": "2.5.1+cu124", "environment": "the venv /opt/pytorch", "index_url": "https://download.pytorch.org/whl/cu124"},
				Reason:     "The installed torch 2.5.1+cpu is a CPU-only build and the spec needs the CUDA 12.4 build; installs torch==2.5.1+cu124 from https://download.pytorch.org/whl/cu124; the cu124 wheels bring their own CUDA 12.4 runtime and cuDNN.",
				ReasonCode: planpkg.ReasonVariantMismatch,
				Operations: []planpkg.Operation{{Kind: planpkg.OpPackages, Packages: &planpkg.PackagesOp{
					Manager: "pip", Install: []planpkg.PackagePin{{Name: "torch", Version: "2.5.1+cu124"}},
					Python: "/usr/bin/python3", Venv: "/opt/pytorch", IndexURL: "https://download.pytorch.org/whl/cu124",
				}}},
			},
			update: torch("2.5.1+cu124", "12.4"),
		},
		{
			name:   "an older patch that satisfies the constraint stays",
			src:    "framework \"pytorch\" {\n  version = \"2.5.*\"\n  venv = \"/opt/pytorch\"\n}\n",
			obs:    h100(venv("/opt/pytorch", torch("2.5.0+cu124", "12.4"))),
			update: torch("2.5.0+cu124", "12.4"),
		},
		{
			name: "TensorFlow with CUDA from its wheels, in an existing environment",
			src:  "framework \"tensorflow\" {\n  version = \"2.17.*\"\n  python = \"/srv/tf/bin/python\"\n  extras = [\"and-cuda\"]\n}\n",
			obs:  h100(venv("/srv/tf")),
			want: &planpkg.Step{
				Address: "framework.tensorflow", Action: planpkg.Create,
				After:      map[string]string{"version": "2.17.0", "environment": "/srv/tf/bin/python", "index_url": "https://pypi.org/simple", "extras": "and-cuda"},
				Reason:     "The package tensorflow is not installed in /srv/tf/bin/python; installs tensorflow[and-cuda]==2.17.0 from https://pypi.org/simple.",
				ReasonCode: planpkg.ReasonMissing,
				Operations: []planpkg.Operation{{Kind: planpkg.OpPackages, Packages: &planpkg.PackagesOp{
					Manager: "pip", Install: []planpkg.PackagePin{{Name: "tensorflow", Version: "2.17.0", Extras: []string{"and-cuda"}}},
					Python: "/srv/tf/bin/python", IndexURL: "https://pypi.org/simple",
				}}},
			},
			update: facts.Framework{Name: "tensorflow", Version: "2.17.0"},
		},
		{
			name: "absent uninstalls",
			src:  "framework \"pytorch\" {\n  absent = true\n  venv = \"/opt/pytorch\"\n}\n",
			obs:  h100(venv("/opt/pytorch", torch("2.5.1+cu124", "12.4"))),
			want: &planpkg.Step{
				Address: "framework.pytorch", Action: planpkg.Delete,
				Before:     map[string]string{"version": "2.5.1+cu124", "environment": "the venv /opt/pytorch"},
				Reason:     "absent = true removes torch 2.5.1+cu124 from the venv /opt/pytorch.",
				ReasonCode: planpkg.ReasonAbsentRequested,
				Operations: []planpkg.Operation{{Kind: planpkg.OpPackages, Packages: &planpkg.PackagesOp{Manager: "pip", Remove: []string{"torch"}, Python: "/opt/pytorch/bin/python"}}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := plantest.LoadSpec(t, tt.src)
			pl := planner.New(framework.Kind.Provider())
			plan := plantest.Plan(t, pl, s, tt.obs)
			var want []planpkg.Step
			if tt.want != nil {
				want = []planpkg.Step{*tt.want}
			}
			got := plan.Steps
			for i := range got {
				got[i].DependsOn = nil
				for j := range got[i].Operations {
					got[i].Operations[j].Transaction = 0
				}
			}
			if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b []planpkg.Step) bool { return len(a) == 0 && len(b) == 0 || cmp.Equal(a, b) })); diff != "" {
				t.Errorf("steps (-want +got):\n%s", diff)
			}
			// Apply: the environment holds what was installed or removed.
			var env *facts.PythonEnv
			for i := range tt.obs.Python {
				if p := tt.obs.Python[i].Prefix; strings.HasPrefix(s.Frameworks[0].Venv.Value+s.Frameworks[0].Python.Value, p) && p != "/usr" {
					env = &tt.obs.Python[i]
				}
			}
			if env == nil {
				tt.obs.Python = append(tt.obs.Python, venv(s.Frameworks[0].Venv.Value))
				env = &tt.obs.Python[len(tt.obs.Python)-1]
			}
			env.Frameworks = nil
			if tt.update.Name != "" {
				env.Frameworks = []facts.Framework{tt.update}
			}
			plantest.Converged(t, pl, s, tt.obs, "applying")
		})
	}
}

func TestPlanDistro(t *testing.T) {
	obs := &facts.Observation{OS: facts.OS{ID: "debian", VersionID: "12", Codename: "bookworm", Family: "deb"}}
	s := plantest.LoadSpec(t, "framework \"pytorch\" {\n  source = \"distro\"\n}\n")
	pl := planner.New(framework.Kind.Provider())
	pl.Candidates = plantest.Candidates{"python3-torch": {"1.13.1+dfsg-4"}}
	plan := plantest.Plan(t, pl, s, obs)
	if len(plan.Steps) != 1 || !cmp.Equal(plan.Steps[0].Operations[0].Packages.Install, []planpkg.PackagePin{{Name: "python3-torch", Version: "1.13.1+dfsg-4"}}) || plan.Steps[0].Operations[0].Packages.Manager != "apt" {
		t.Fatalf("steps %+v", plan.Steps)
	}
	obs.Packages.Packages = []facts.Package{{Name: "python3-torch", Version: "1.13.1+dfsg-4", State: "installed", Want: "install"}}
	plantest.Converged(t, pl, s, obs, "applying")
}
