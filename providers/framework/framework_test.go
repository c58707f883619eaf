package framework

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

const torchVersion = `from typing import Optional

__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip']
__version__ = '2.5.1+cu124'
debug = False
cuda: Optional[str] = '12.4'
git_version = 'a8d6afb511a69687bbb2b7e88a3cf67917e1697e'
hip: Optional[str] = None
`

// TestVenvTorch is a venv made with python3.10 -m venv /opt/venv and
// pip install torch==2.5.1 --index-url …/whl/cu124.
func TestVenvTorch(t *testing.T) {
	h := hosttest.Host(t, `-- opt/venv/pyvenv.cfg --
home = /usr/bin
include-system-site-packages = false
version = 3.10.12
-- opt/venv/lib/python3.10/site-packages/torch/__init__.py --
-- opt/venv/lib/python3.10/site-packages/torch/version.py --
`+torchVersion+`-- opt/venv/lib/python3.10/site-packages/torch-2.5.1+cu124.dist-info/INSTALLER --
pip
-- opt/venv/lib/python3.10/site-packages/torch-2.5.1+cu124.dist-info/METADATA --
Metadata-Version: 2.1
Name: torch
Version: 2.5.1+cu124
-- opt/venv/lib/python3.10/site-packages/nvidia_cudnn_cu12-9.1.0.70.dist-info/INSTALLER --
pip
-- opt/venv/lib/python3.10/site-packages/numpy-2.1.3.dist-info/INSTALLER --
pip
-- .manifest --
symlink opt/venv/bin/python python3
symlink opt/venv/bin/python3 /usr/bin/python3
symlink opt/venv/lib64 lib
`)
	got, warns := Observe(h, facts.Packages{}, []string{"/opt/venv/bin/python", "/opt/venv/bin/python"})
	hosttest.NoWarnings(t, warns)
	want := []facts.PythonEnv{{
		Interpreter:  "/opt/venv/bin/python",
		Prefix:       "/opt/venv",
		Version:      "3.10",
		Virtual:      true,
		SitePackages: []string{"/opt/venv/lib/python3.10/site-packages"},
		Frameworks: []facts.Framework{{
			Name: "pytorch", Version: "2.5.1+cu124", Variant: "cu124", CUDA: "12.4", CuDNN: "9.1.0.70",
			Installer: "pip", Location: "/opt/venv/lib/python3.10/site-packages/torch",
		}},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Observe (-want +got):\n%s", diff)
	}
}

// TestDebianTorch lays out Debian 12's python3-torch 1.13.1+dfsg-4 as
// dpkg-deb -c lists it: an egg-info, no INSTALLER.
func TestDebianTorch(t *testing.T) {
	h := hosttest.Host(t, `-- usr/lib/python3/dist-packages/torch/version.py --
__version__ = '1.13.0a0'
debug = False
cuda = None
git_version = 'Unknown'
hip = None
-- usr/lib/python3/dist-packages/torch-1.13.0a0+gitunknown.egg-info/PKG-INFO --
Metadata-Version: 2.1
Name: torch
Version: 1.13.0a0+gitunknown
-- usr/lib/python3.11/os.py --
-- usr/local/lib/python3.11/dist-packages/.keep --
-- usr/lib/python3.9/site-packages/.keep --
-- .manifest --
symlink usr/bin/python3 python3.11
`)
	pkgs := facts.Packages{Manager: "dpkg", Packages: []facts.Package{
		{Name: "python3-torch", Version: "1.13.1+dfsg-4", Architecture: "amd64", Source: "pytorch", State: "installed", Want: "install"},
	}}
	got, warns := Observe(h, pkgs, []string{"/usr/bin/python3"})
	hosttest.NoWarnings(t, warns)
	want := []facts.PythonEnv{{
		Interpreter:  "/usr/bin/python3",
		Prefix:       "/usr",
		Version:      "3.11",
		System:       true,
		SitePackages: []string{"/usr/local/lib/python3.11/dist-packages", "/usr/lib/python3/dist-packages"},
		Frameworks: []facts.Framework{{
			Name: "pytorch", Version: "1.13.0a0", CPUOnly: true,
			Installer: "debian", Package: "python3-torch", Location: "/usr/lib/python3/dist-packages/torch",
		}},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Observe (-want +got):\n%s", diff)
	}

	// Without the package in the database, nothing claims the files.
	got, _ = Observe(h, facts.Packages{Manager: "dpkg"}, nil)
	if fw := got[0].Frameworks[0]; fw.Installer != "" || fw.Package != "" {
		t.Errorf("without python3-torch: %+v", fw)
	}
}

// TestTensorFlowAndJAX: TF 2.17.0 and JAX with the CUDA 12 plugin in a
// venv, as pip install 'tensorflow[and-cuda]==2.17.0' 'jax[cuda12]' lays
// them out.
func TestTensorFlowAndJAX(t *testing.T) {
	h := hosttest.Host(t, `-- srv/ml/pyvenv.cfg --
home = /usr/bin
version_info = 3.11.2.final.0
-- srv/ml/lib/python3.11/site-packages/tensorflow/python/platform/build_info.py --
# Copyright 2020 The TensorFlow Authors. All Rights Reserved.
"""Auto-generated module providing information about the build."""
import collections

build_info = collections.OrderedDict([('cpu_compiler', '/usr/lib/llvm-17/bin/clang'), ('cuda_compute_capabilities', ['sm_50', 'sm_60', 'sm_70', 'sm_80', 'compute_90']), ('cuda_version', '12.3'), ('cudnn_version', '8'), ('is_cuda_build', True), ('is_rocm_build', False), ('is_tensorrt_build', True)])
-- srv/ml/lib/python3.11/site-packages/tensorflow-2.17.0.dist-info/INSTALLER --
pip
-- srv/ml/lib/python3.11/site-packages/jax/version.py --
_version: str = "0.4.35"
-- srv/ml/lib/python3.11/site-packages/jax-0.4.35.dist-info/INSTALLER --
uv
-- srv/ml/lib/python3.11/site-packages/jaxlib/version.py --
_version: str = "0.4.35"
-- srv/ml/lib/python3.11/site-packages/jaxlib-0.4.35.dist-info/INSTALLER --
uv
-- srv/ml/lib/python3.11/site-packages/jax_cuda12_plugin/version.py --
_version: str = "0.4.35"
-- srv/ml/lib/python3.11/site-packages/jax_cuda12_plugin-0.4.35.dist-info/INSTALLER --
uv
-- srv/ml/lib/python3.11/site-packages/jax_plugins/xla_cuda12/version.py --
_version: str = "0.4.35"
_release_version: str = '0.4.35'
-- srv/ml/lib/python3.11/site-packages/nvidia_cudnn_cu12-9.5.1.17.dist-info/INSTALLER --
uv
-- .manifest --
symlink srv/ml/bin/python3.11 /usr/bin/python3.11
symlink srv/ml/bin/python python3.11
`)
	got, warns := Observe(h, facts.Packages{}, []string{"/srv/ml/bin/python"})
	hosttest.NoWarnings(t, warns)
	site := "/srv/ml/lib/python3.11/site-packages"
	want := []facts.PythonEnv{{
		Interpreter: "/srv/ml/bin/python", Prefix: "/srv/ml", Version: "3.11", Virtual: true,
		SitePackages: []string{site},
		Frameworks: []facts.Framework{
			{
				Name: "tensorflow", Version: "2.17.0", CUDA: "12.3", CuDNN: "8",
				CUDAArchs: []string{"sm_50", "sm_60", "sm_70", "sm_80", "compute_90"},
				// The cuDNN wheel of the environment, which TensorFlow
				// loads too (its cuDNN 9 is not the 8 it was built for).
				Plugins:   []facts.Library{{Path: site + "/nvidia/cudnn", Version: "9.5.1.17"}},
				Installer: "pip", Location: site + "/tensorflow",
			},
			{
				Name: "jax", Version: "0.4.35", CUDA: "12", CuDNN: "9.5.1.17",
				Plugins: []facts.Library{
					{Path: site + "/jaxlib", Version: "0.4.35"},
					{Path: site + "/jax_cuda12_plugin", Version: "0.4.35"},
					// No dist-info for the pjrt wheel: its version.py tells.
					{Path: site + "/jax_plugins/xla_cuda12", Version: "0.4.35"},
				},
				Installer: "uv", Location: site + "/jax",
			},
		},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Observe (-want +got):\n%s", diff)
	}
}

func TestBrokenFiles(t *testing.T) {
	h := hosttest.Host(t, `-- opt/env/lib/python3.12/site-packages/torch/version.py --
__version__ = '2.4.0+cu121'
debug = Fal
-- opt/env/lib/python3.12/site-packages/tensorflow/python/platform/build_info.py --
import collections

build_info = collections.OrderedDict([('cpu_compiler', '/usr/lib/llvm-17/bin/cl
-- opt/env/lib/python3.12/site-packages/jax/__init__.py --
-- opt/env/lib/python3.11/site-packages/other/__init__.py --
-- opt/env/bin/python3.12 --
`)
	got, warns := Observe(h, facts.Packages{}, []string{"/opt/env/bin/python3.12", "/opt/missing/bin/python", "relative/python"})
	if len(got) != 1 {
		t.Fatalf("got %d environments", len(got))
	}
	env := got[0]
	if env.Virtual || env.Version != "3.12" || len(env.SitePackages) != 1 {
		t.Errorf("environment: %+v", env)
	}
	if len(env.Frameworks) != 3 {
		t.Fatalf("frameworks: %+v", env.Frameworks)
	}
	torch := env.Frameworks[0]
	if torch.Version != "2.4.0+cu121" || torch.Variant != "cu121" || torch.CPUOnly || torch.CUDA != "" {
		t.Errorf("torch from a truncated version.py: %+v", torch)
	}
	site := "/opt/env/lib/python3.12/site-packages"
	hosttest.CheckWarnings(t, warns, map[string]string{
		site + "/torch/version.py":                         "no cuda assignment",
		site + "/tensorflow/python/platform/build_info.py": "no is_cuda_build",
		site + "/tensorflow":                               "no TensorFlow dist-info",
		site + "/jax/version.py":                           "no such file",
		"/opt/missing/bin/python":                          "interpreter not found",
		"relative/python":                                  "not absolute",
	})
}

func TestNoSystemPython(t *testing.T) {
	h := hosttest.Host(t, "-- etc/hostname --\nx\n")
	got, warns := Observe(h, facts.Packages{}, nil)
	if len(got) != 0 || got == nil || len(warns) != 0 {
		t.Errorf("got %v, %v", got, warns)
	}
}

// TestRPMSystem: RHEL's layout, pip installs into /usr/local/lib*.
func TestRPMSystem(t *testing.T) {
	h := hosttest.Host(t, `-- usr/bin/python3.9 --
-- usr/lib64/python3.9/site-packages/.keep --
-- usr/lib/python3.9/site-packages/.keep --
-- usr/local/lib64/python3.9/site-packages/torch/version.py --
__version__ = '2.5.1+cpu'
debug = False
cuda: Optional[str] = None
git_version = 'a8d6afb511a69687bbb2b7e88a3cf67917e1697e'
hip: Optional[str] = None
-- usr/local/lib64/python3.9/site-packages/torch-2.5.1+cpu.dist-info/INSTALLER --
pip
-- .manifest --
symlink usr/bin/python3 python3.9
`)
	got, warns := Observe(h, facts.Packages{Manager: "rpm"}, nil)
	hosttest.NoWarnings(t, warns)
	want := []facts.PythonEnv{{
		Interpreter: "/usr/bin/python3", Prefix: "/usr", Version: "3.9", System: true,
		SitePackages: []string{"/usr/local/lib64/python3.9/site-packages", "/usr/lib64/python3.9/site-packages", "/usr/lib/python3.9/site-packages"},
		Frameworks: []facts.Framework{{
			Name: "pytorch", Version: "2.5.1+cpu", Variant: "cpu", CPUOnly: true, Installer: "pip",
			Location: "/usr/local/lib64/python3.9/site-packages/torch",
		}},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Observe (-want +got):\n%s", diff)
	}
}

func TestParseTorchVersion(t *testing.T) {
	cases := []struct {
		in   string
		want TorchVersion
		err  bool
	}{
		{torchVersion, TorchVersion{Version: "2.5.1+cu124", CUDA: "12.4"}, false},
		{"__version__ = '1.8.0'\ncuda = '10.2'\n", TorchVersion{Version: "1.8.0", CUDA: "10.2"}, false},
		{"__version__ = \"2.3.1+rocm6.0\"\ncuda: Optional[str] = None\nhip: Optional[str] = '6.0.32830'\n", TorchVersion{Version: "2.3.1+rocm6.0", HIP: "6.0.32830"}, false},
		{"__version__ = '2.0.0'\n  cuda = '11.7'\n", TorchVersion{Version: "2.0.0"}, true},
		{"", TorchVersion{}, true},
	}
	for _, c := range cases {
		got, err := ParseTorchVersion([]byte(c.in))
		if got != c.want || (err != nil) != c.err {
			t.Errorf("ParseTorchVersion(%.40q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
}

func TestParseBuildInfo(t *testing.T) {
	cases := []struct {
		in   string
		want BuildInfo
		err  bool
	}{
		// TF 2.3-era module assignments.
		{"is_rocm_build = False\nis_cuda_build = True\ncuda_version_number = '10.1'\ncudnn_version_number = '7'\n",
			BuildInfo{CUDA: "10.1", CuDNN: "7", CUDABuild: true}, false},
		// A CPU wheel.
		{"build_info = collections.OrderedDict([('cpu_compiler', '/usr/bin/gcc-5'), ('is_cuda_build', False), ('is_rocm_build', False), ('is_tensorrt_build', False)])\n",
			BuildInfo{}, false},
		{"build_info = {}\n", BuildInfo{}, true},
	}
	for _, c := range cases {
		got, err := ParseBuildInfo([]byte(c.in))
		if !cmp.Equal(got, c.want) || (err != nil) != c.err {
			t.Errorf("ParseBuildInfo(%.50q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
}
