package spec

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gpuenv/gpuenv/spec/version"
)

// TestExamples loads every example with no diagnostics at all, and checks
// that each still says what its README promises.
func TestExamples(t *testing.T) {
	checks := map[string]func(t *testing.T, s *Spec){
		"pytorch-workstation": func(t *testing.T, s *Spec) {
			wantDriver(t, s, "550.54.15", "550.163.01")
			wantNotDriver(t, s, "550.40.07", "555.42.02")
			if s.Driver.KernelModules.Value != KernelModulesOpen || s.Driver.Source.Value != SourceNVIDIA {
				t.Errorf("driver = %+v", s.Driver)
			}
			wantCUDA(t, s, "12.4.1")
			wantCuDNN(t, s, "9.1.0.70")
			torch := framework(t, s, PyTorch)
			if !torch.Version.Value.Check(version.MustParse("2.5.1+cu124")) || torch.EffectiveIndexURL() != "https://download.pytorch.org/whl/cu124" || !torch.Venv.Set {
				t.Errorf("pytorch = %+v", torch)
			}
			if r := s.Repositories[0]; r.URL.Value != "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/" {
				t.Errorf("repository = %s", r.URL.Value)
			}
		},
		"tensorflow-server": func(t *testing.T, s *Spec) {
			wantDriver(t, s, "545.23.08", "550.54.15")
			wantNotDriver(t, s, "535.261.03")
			wantCUDA(t, s, "12.3.2")
			wantCuDNN(t, s, "8.9.7.29")
			tf := framework(t, s, TensorFlow)
			if !tf.Version.Value.Check(version.MustParse("2.17.0")) || tf.Version.Value.Check(version.MustParse("2.18.0")) {
				t.Errorf("tensorflow = %s", tf.Version.Value)
			}
			if s.Driver.KernelModules.Set {
				t.Error("kernel_modules should be left to its host-dependent default")
			}
			if !s.Driver.PersistenceMode.Value {
				t.Error("persistence mode is off")
			}
		},
		"shared-multiuser": func(t *testing.T, s *Spec) {
			if len(s.Groups) != 2 || s.Groups[0].Name != "video" || s.Groups[1].Name != "render" || len(s.Groups[0].Members.Value) == 0 {
				t.Errorf("groups = %+v", s.Groups)
			}
			e := s.Environment
			if e.CUDADeviceOrder.Value != DeviceOrderPCIBusID || len(e.CUDAVisibleDevices.Value) == 0 {
				t.Errorf("environment = %+v", e)
			}
			if len(s.Devices) != 1 || s.Devices[0].Selector != AllDevices || s.Devices[0].ComputeMode.Value != ComputeModeExclusiveProcess {
				t.Errorf("devices = %+v", s.Devices)
			}
			if !s.Driver.PersistenceMode.Value {
				t.Error("persistence mode is off")
			}
		},
		"debian12-distro": func(t *testing.T, s *Spec) {
			wantDriver(t, s, "535.261.03", "535.309.01")
			wantNotDriver(t, s, "550.54.15")
			wantCUDA(t, s, "11.8.89")
			if s.Driver.Source.Value != SourceDistro || s.CUDA.Source.Value != SourceDistro {
				t.Errorf("sources = %q, %q", s.Driver.Source.Value, s.CUDA.Source.Value)
			}
			torch := framework(t, s, PyTorch)
			if torch.Source.Value != SourceDistro || torch.EnvironmentKey() != "distro" {
				t.Errorf("pytorch = %+v", torch)
			}
			if s.CuDNN != nil {
				t.Error("Debian's nvidia-cudnn is an installer package; the example must not manage cuDNN")
			}
		},
		"debian12-container": func(t *testing.T, s *Spec) {
			if s.Driver != nil {
				t.Error("a container's driver is the host's; the example must not manage it")
			}
			wantCUDA(t, s, "11.8.89")
			if s.CUDA.Source.Value != SourceDistro {
				t.Errorf("cuda source = %q", s.CUDA.Source.Value)
			}
			if torch := framework(t, s, PyTorch); torch.Source.Value != SourceDistro {
				t.Errorf("pytorch = %+v", torch)
			}
		},
		"airgapped": func(t *testing.T, s *Spec) {
			if v, ok := s.Driver.Version.Value.Exact(); !ok || v.String() != "550.54.15" {
				t.Errorf("driver is not pinned: %s", s.Driver.Version.Value)
			}
			r := s.Repositories[0]
			if r.URL.Value != "file:///srv/mirror/cuda/repos/ubuntu2204/x86_64/" {
				t.Errorf("repository = %s", r.URL.Value)
			}
			torch := framework(t, s, PyTorch)
			if torch.EffectiveIndexURL() != "file:///srv/mirror/pypi/simple" {
				t.Errorf("index = %s", torch.EffectiveIndexURL())
			}
		},
		"containers": func(t *testing.T, s *Spec) {
			c := s.ContainerToolkit
			if c == nil {
				t.Fatal("no container_toolkit block")
			}
			if !c.Version.Value.Check(version.MustParse("1.17.8")) || c.Version.Value.Check(version.MustParse("1.18.0")) {
				t.Errorf("toolkit version = %s", c.Version.Value)
			}
			for _, e := range []Engine{EngineDocker, EngineContainerd, EnginePodman} {
				if !c.HasEngine(e) {
					t.Errorf("engine %s is not configured", e)
				}
			}
			if !c.EffectiveCDI() {
				t.Error("podman needs the CDI spec")
			}
			// Both of NVIDIA's repositories are plan's to add.
			if len(s.Repositories) != 0 {
				t.Errorf("repositories = %+v", s.Repositories)
			}
		},
		"variables": func(t *testing.T, s *Spec) {
			wantCUDA(t, s, "12.4.1")
			wantCuDNN(t, s, "9.1.0.70")
			torch := framework(t, s, PyTorch)
			if torch.Venv.Value != "/opt/pytorch-cu124" || torch.EffectiveIndexURL() != "https://download.pytorch.org/whl/cu124" {
				t.Errorf("pytorch = %+v", torch)
			}
		},
	}

	checks["hgx-8gpu"] = func(t *testing.T, s *Spec) {
		wantDriver(t, s, "550.54.15")
		if !s.Driver.PersistenceMode.Value || !s.Driver.Hold.Value || s.Driver.KernelModules.Value != KernelModulesOpen {
			t.Errorf("driver = %+v", s.Driver)
		}
		c := s.ContainerToolkit
		if c == nil || !c.EffectiveCDI() || !c.EffectiveDevCharLinks() || !c.HasEngine(EngineDocker) || !c.HasEngine(EngineContainerd) {
			t.Errorf("container_toolkit = %+v", c)
		}
		if s.Environment == nil || s.Environment.CUDADeviceOrder.Value != DeviceOrderPCIBusID || s.Environment.CUDAVisibleDevices.Set {
			t.Errorf("environment = %+v", s.Environment)
		}
		// Two teams, each of a group the spec makes, on whole GPUs
		// apart from each other and from the MIG GPUs 6 and 7.
		if len(s.Teams) != 2 || s.Team("training") == nil || s.Team("vision") == nil {
			t.Fatalf("teams = %+v", s.Teams)
		}
		used := map[string]string{}
		for _, team := range s.Teams {
			made := false
			for _, g := range s.Groups {
				made = made || g.Name == team.Group && !g.IsAbsent()
			}
			if !made {
				t.Errorf("the team %s's group is not made by the spec", team.Group)
			}
			for _, d := range team.CUDAVisibleDevices.Value {
				if d == "6" || d == "7" || used[d] != "" {
					t.Errorf("the team %s has GPU %s (MIG, or also the team %s's)", team.Group, d, used[d])
				}
				used[d] = team.Group
			}
		}
	}
	dirs, err := filepath.Glob("../examples/*")
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, dir := range dirs {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			continue
		}
		name := filepath.Base(dir)
		t.Run(name, func(t *testing.T) {
			check, ok := checks[name]
			if !ok {
				t.Fatalf("example %s has no check here", name)
			}
			if _, err := os.Stat(filepath.Join(dir, "README.md")); err != nil {
				t.Errorf("example %s has no README.md", name)
			}
			s, diags := Load(dir, LoadOptions{})
			if len(diags) > 0 {
				t.Fatalf("diagnostics: %v", diagsOf(diags))
			}
			check(t, s)
			for _, p := range s.Paths {
				src, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				if out, _ := Format(src, p); string(out) != string(src) {
					t.Errorf("%s is not formatted; run gpuenv fmt %s", p, dir)
				}
			}
		})
		seen++
	}
	if seen != len(checks) {
		t.Errorf("found %d examples, want %d", seen, len(checks))
	}
}

// The variables example switches the whole stack with one variable, from
// each source of values.
func TestExampleVariablesCUDA126(t *testing.T) {
	for name, opts := range map[string]LoadOptions{
		"--var":       {Vars: map[string]string{"cuda": "12.6"}},
		"--var-file":  {VarFiles: []string{"../examples/variables/cuda-12.6.vars"}},
		"GPUENV_VAR_": {Environ: []string{"GPUENV_VAR_cuda=12.6"}},
	} {
		t.Run(name, func(t *testing.T) {
			s, diags := Load("../examples/variables", opts)
			if len(diags) > 0 {
				t.Fatalf("diagnostics: %v", diagsOf(diags))
			}
			wantCUDA(t, s, "12.6.3")
			wantCuDNN(t, s, "9.5.1.17")
			wantDriver(t, s, "560.35.03", "570.124.06")
			wantNotDriver(t, s, "550.54.15")
			torch := framework(t, s, PyTorch)
			if !torch.Version.Value.Check(version.MustParse("2.7.1+cu126")) || torch.EffectiveIndexURL() != "https://download.pytorch.org/whl/cu126" {
				t.Errorf("pytorch = %s from %s", torch.Version.Value, torch.EffectiveIndexURL())
			}
		})
	}
}

func wantDriver(t *testing.T, s *Spec, accepted ...string) {
	t.Helper()
	if s.Driver == nil {
		t.Fatal("no driver block")
	}
	for _, v := range accepted {
		if !s.Driver.Version.Value.Check(version.MustParse(v)) {
			t.Errorf("driver constraint %q rejects %s", s.Driver.Version.Value, v)
		}
	}
}

func wantNotDriver(t *testing.T, s *Spec, rejected ...string) {
	t.Helper()
	for _, v := range rejected {
		if s.Driver.Version.Value.Check(version.MustParse(v)) {
			t.Errorf("driver constraint %q accepts %s", s.Driver.Version.Value, v)
		}
	}
}

func wantCUDA(t *testing.T, s *Spec, v string) {
	t.Helper()
	if s.CUDA == nil || !s.CUDA.Version.Value.Check(version.MustParse(v)) {
		t.Errorf("cuda does not accept %s", v)
	}
}

func wantCuDNN(t *testing.T, s *Spec, v string) {
	t.Helper()
	if s.CuDNN == nil || !s.CuDNN.Version.Value.Check(version.MustParse(v)) {
		t.Errorf("cudnn does not accept %s", v)
	}
}

func framework(t *testing.T, s *Spec, name FrameworkName) *Framework {
	t.Helper()
	for _, f := range s.Frameworks {
		if f.Name == name {
			return f
		}
	}
	t.Fatalf("no framework %q", name)
	return nil
}
