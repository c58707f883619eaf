package doctor_test

import (
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner/doctor"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

// jaxVenv lays out /opt/jax with JAX and its CUDA 12 plugin at version jax
// and the nvidia-cudnn-cu12 wheel at cudnn.
func jaxVenv(jax, cudnn string) func(*testing.T, string) {
	return func(t *testing.T, root string) {
		site := "opt/jax/lib/python3.11/site-packages/"
		for p, data := range map[string]string{
			"opt/jax/pyvenv.cfg":                                         "home = /usr/bin\nversion = 3.11.9\n",
			site + "jax/version.py":                                      "_version: str = \"" + jax + "\"\n",
			site + "jax-" + jax + ".dist-info/INSTALLER":                 "pip\n",
			site + "jaxlib/version.py":                                   "_version: str = \"" + jax + "\"\n",
			site + "jax_cuda12_plugin/version.py":                        "_version: str = \"" + jax + "\"\n",
			site + "jax_plugins/xla_cuda12/version.py":                   "_version: str = \"" + jax + "\"\n",
			site + "nvidia/cudnn/lib/libcudnn.so.9":                      "",
			site + "nvidia_cudnn_cu12-" + cudnn + ".dist-info/INSTALLER": "pip\n",
		} {
			hosttest.WriteFile(t, root, p, data)
		}
		symlink("opt/jax/bin/python", "/usr/bin/python3")(t, root)
	}
}

// JAX alone with an older cuDNN wheel than its plugin was built with: a
// problem, and the fix installs the wheel the plugin accepts.
func TestJAXCuDNNWheel(t *testing.T) {
	for _, tc := range []struct {
		jax, cudnn string
		status     doctor.Status
		fix        string
	}{
		{"0.6.0", "9.1.0.70", doctor.Problem, "nvidia-cudnn-cu12>=9.8,<10"},
		{"0.6.0", "9.10.2.21", "", ""},
		{"0.4.31", "9.0.0.312", doctor.Problem, "nvidia-cudnn-cu12>=9.1,<10"},
	} {
		r := machine{fixture: "tensorflow-no-cudnn", pythons: []string{"/opt/jax/bin/python"}, change: jaxVenv(tc.jax, tc.cudnn)}.report(t)
		var got *doctor.Check
		for i, k := range r.Checks {
			if k.ID == "framework.cudnn:/opt/jax/bin/python:jax" {
				got = &r.Checks[i]
			}
		}
		if tc.status == "" {
			if got != nil {
				t.Errorf("jax %s with cuDNN %s: %s %s", tc.jax, tc.cudnn, got.Status, got.Summary)
			}
			continue
		}
		if got == nil {
			t.Errorf("jax %s with cuDNN %s: no framework.cudnn check", tc.jax, tc.cudnn)
			continue
		}
		if got.Status != tc.status || got.Fix == nil || !strings.Contains(strings.Join(got.Fix.Commands, "\n"), tc.fix) {
			t.Errorf("jax %s with cuDNN %s: %s %s, fix %+v; want %s with %q", tc.jax, tc.cudnn, got.Status, got.Summary, got.Fix, tc.status, tc.fix)
		}
	}
}
