package spec

import (
	"testing"

	"github.com/gpuenv/gpuenv/spec/version"
)

func TestDefaultKernelModules(t *testing.T) {
	cases := []struct {
		name string
		host KernelModuleHost
		want KernelModules
	}{
		{"Ampere on 550", KernelModuleHost{Branch: 550}, KernelModulesProprietary},
		{"Ampere on 560", KernelModuleHost{Branch: 560}, KernelModulesOpen},
		{"Ada on 570", KernelModuleHost{Branch: 570}, KernelModulesOpen},
		{"Volta on 570", KernelModuleHost{Branch: 570, PreTuring: true}, KernelModulesProprietary},
		{"Blackwell on 570", KernelModuleHost{Branch: 570, OpenOnly: true}, KernelModulesOpen},
		{"Grace Hopper on 550", KernelModuleHost{Branch: 550, OpenOnly: true}, KernelModulesOpen},
		{"Pascal and Blackwell", KernelModuleHost{Branch: 570, PreTuring: true, OpenOnly: true}, KernelModulesOpen},
	}
	for _, c := range cases {
		if got := DefaultKernelModules(c.host); got != c.want {
			t.Errorf("%s: DefaultKernelModules = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestDefaultCUDAPath(t *testing.T) {
	if got := DefaultCUDAPath(SourceNVIDIA, version.MustParse("12.4.1")); got != "/usr/local/cuda-12.4" {
		t.Errorf("nvidia: %s", got)
	}
	if got := DefaultCUDAPath(SourceDistro, version.MustParse("11.8.89")); got != "/usr" {
		t.Errorf("distro: %s", got)
	}
}

func TestEffectiveIndexURL(t *testing.T) {
	cuda := setAttr(version.MustParse("11.8"), rangeZero)
	cases := []struct {
		f    Framework
		want string
	}{
		{Framework{Name: PyTorch, CUDA: cuda}, "https://download.pytorch.org/whl/cu118"},
		{Framework{Name: PyTorch}, DefaultIndexURL},
		{Framework{Name: JAX, CUDA: cuda}, DefaultIndexURL},
		{Framework{Name: PyTorch, CUDA: cuda, IndexURL: setAttr("https://mirror.example.com/simple", rangeZero)}, "https://mirror.example.com/simple"},
	}
	for _, c := range cases {
		if got := c.f.EffectiveIndexURL(); got != c.want {
			t.Errorf("%s cuda %v: %s, want %s", c.f.Name, c.f.CUDA.Value, got, c.want)
		}
	}
}

// Every default names a block and attribute the language has.
func TestDefaultsNameRealAttributes(t *testing.T) {
	attrs := map[string][]string{
		"driver":            {"version", "kernel_modules", "source", "persistence_mode", "blacklist_nouveau", "hold"},
		"cuda":              {"version", "source", "path", "set_environment"},
		"cudnn":             {"version", "source"},
		"framework":         {"version", "source", "python", "venv", "cuda", "index_url", "extras"},
		"repository":        {"url", "keyring", "key_fingerprint", "suites", "components", "priority"},
		"group":             {"members", "exclusive"},
		"environment":       {"cuda_visible_devices", "cuda_device_order", "variables"},
		"device":            {"compute_mode"},
		"container_toolkit": {"version", "engines", "cdi", "cdi_management", "default_runtime"},
		"every block":       {"absent"},
	}
	for _, d := range Defaults() {
		found := false
		for _, a := range attrs[d.Block] {
			found = found || a == d.Attribute
		}
		if !found {
			t.Errorf("default for unknown attribute %s.%s", d.Block, d.Attribute)
		}
		if d.Value == "" {
			t.Errorf("default for %s.%s has no value", d.Block, d.Attribute)
		}
	}
}
