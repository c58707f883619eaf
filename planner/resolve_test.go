package planner

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"

	"github.com/gpuenv/gpuenv/planner/compat"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/spec"
	"github.com/gpuenv/gpuenv/spec/version"
)

// loadSpec writes src as gpuenv.hcl in a fresh working directory, so that
// ranges name the file as "gpuenv.hcl", and loads it.
func loadSpec(t testing.TB, src string) *spec.Spec {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "gpuenv.hcl"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	s, diags := spec.Load("gpuenv.hcl", spec.LoadOptions{})
	if diags.HasErrors() {
		t.Fatalf("spec does not load: %v", diags)
	}
	return s
}

var (
	debian12   = facts.OS{ID: "debian", VersionID: "12", Codename: "bookworm", Family: "deb", Arch: "x86_64", Name: "Debian GNU/Linux 12 (bookworm)"}
	ubuntu2204 = facts.OS{ID: "ubuntu", VersionID: "22.04", Codename: "jammy", Family: "deb", Arch: "x86_64"}
	rhel9      = facts.OS{ID: "rhel", VersionID: "9.4", IDLike: []string{"fedora"}, Family: "rpm", Arch: "x86_64"}
)

// Device ids of the GPU table.
const (
	h100    = 0x2330
	rtx5090 = 0x2b85
	v100    = 0x1db1
	l4      = 0x27b8
	gh200   = 0x2342
)

// machine is an observation of a host with GPUs of the given device ids.
// ppc64le is o on a POWER machine, which NVIDIA's CUDA repositories do
// not serve.
func ppc64le(o facts.OS) facts.OS {
	o.Arch = "ppc64le"
	return o
}

func machine(o facts.OS, ids ...uint16) *facts.Observation {
	obs := &facts.Observation{OS: o}
	for i, id := range ids {
		obs.PCI = append(obs.PCI, facts.PCIDevice{Address: fmt.Sprintf("0000:%02x:00.0", 0x17+i), VendorID: 0x10de, DeviceID: id, Class: 0x030200})
	}
	return obs
}

// shown is a diagnostic reduced to what the tests compare.
type shown struct {
	Severity string
	Summary  string
	Detail   string
	Line     int // the subject's first line; 0 without a subject
}

func show(diags hcl.Diagnostics) []shown {
	var out []shown
	for _, d := range diags {
		s := shown{Severity: "error", Summary: d.Summary, Detail: d.Detail}
		if d.Severity == hcl.DiagWarning {
			s.Severity = "warning"
		}
		if d.Subject != nil {
			s.Line = d.Subject.Start.Line
			if d.Subject.Filename != "gpuenv.hcl" {
				s.Summary += " (in " + d.Subject.Filename + ")"
			}
		}
		out = append(out, s)
	}
	return out
}

func TestResolveConflicts(t *testing.T) {
	tests := []struct {
		name string
		src  string
		obs  *facts.Observation
		want []shown
	}{
		{
			name: "torch release without a build for the toolkit's CUDA",
			src: `cuda {
  version = "12.6"
  source  = "nvidia"
}
framework "pytorch" {
  version = "2.5.*"
  venv    = "/opt/pytorch"
}
`,
			obs: machine(ubuntu2204, h100),
			want: []shown{{"error", "No torch build for CUDA 12.6",
				"torch 2.5.1 is published for CUDA 11.8, 12.1 and 12.4 ({torch:2.5}); the spec asks for CUDA 12.6 (gpuenv.hcl:2).", 6}},
		},
		{
			name: "torch release without a build for the framework's CUDA",
			src: `framework "pytorch" {
  version = "2.5.1"
  venv    = "/opt/pytorch"
  cuda    = "12.6"
}
`,
			obs: machine(ubuntu2204, h100),
			want: []shown{{"error", "No torch build for CUDA 12.6",
				"torch 2.5.1 is published for CUDA 11.8, 12.1 and 12.4 ({torch:2.5}); the spec asks for CUDA 12.6 (gpuenv.hcl:4).", 2}},
		},
		{
			name: "driver too old for the toolkit",
			src: `driver {
  version = "535.*"
  source  = "nvidia"
}
cuda {
  version = "13.0"
  source  = "nvidia"
}
`,
			obs: machine(ubuntu2204, h100),
			want: []shown{{"error", "Driver too old for CUDA 13.0",
				"The driver block allows \"535.*\", but CUDA 13.0, asked for at gpuenv.hcl:6, needs driver 580.65.06 or newer, or 580 or newer through minor-version compatibility ({cuda:13.0.0}).", 2}},
		},
		{
			name: "driver older than the toolkit's own runs it through minor-version compatibility",
			src: `driver {
  version = "535.*"
}
cuda {
  version = "12.4"
  source  = "nvidia"
}
`,
			obs: machine(ubuntu2204, h100),
			want: []shown{{"warning", "Driver older than CUDA 12.4.1 was released with",
				"The driver block allows \"535.*\", below 550.54.15, the driver CUDA 12.4.1 shipped with ({cuda:12.4.1}), which gpuenv.hcl:5 asks for. The driver runs it through CUDA's minor-version compatibility only: programs that JIT-compile PTX from the newer toolkit fail with \"unsupported toolchain\". Allow 550.54.15 or newer to avoid this.", 2}},
		},
		{
			name: "cuDNN without a build for the CUDA major",
			src: `cuda {
  version = "13.0"
  source  = "nvidia"
}
cudnn {
  version = "8.*"
  source  = "nvidia"
}
`,
			obs: machine(ubuntu2204),
			want: []shown{{"error", "No cuDNN build for this CUDA",
				"cuDNN \"8.*\" has builds for CUDA 11 and 12 only, none for CUDA 13 ({cudnn:8.9/12}); the cuda block asks for CUDA 13.0 (gpuenv.hcl:2).", 6}},
		},
		{
			name: "TensorFlow built for another CUDA major",
			src: `cuda {
  version = "11.8"
  source  = "nvidia"
}
framework "tensorflow" {
  version = "2.17.*"
  venv    = "/opt/tf"
}
`,
			obs: machine(ubuntu2204, h100),
			want: []shown{{"error", "TensorFlow needs another CUDA",
				"TensorFlow 2.17 was built and tested with CUDA 12.3 and cuDNN 8.9 ({tf:2.17}); the cuda block asks for CUDA 11.8 (gpuenv.hcl:2).", 6}, {"warning", "TensorFlow will not find cuDNN",
				"TensorFlow 2.17 was built and tested with CUDA 12.3 and cuDNN 8.9 ({tf:2.17}); the host has no cuDNN and the spec has no cudnn block, so TensorFlow will run on the CPU only. Add a cudnn block, or set extras = [\"and-cuda\"] to install cuDNN from pip.", 6}},
		},
		{
			name: "TensorFlow built with another cuDNN major",
			src: `cuda {
  version = "12.3"
  source  = "nvidia"
}
cudnn {
  version = "9.*"
  source  = "nvidia"
}
framework "tensorflow" {
  version = "2.17.*"
  venv    = "/opt/tf"
}
`,
			obs: machine(ubuntu2204, h100),
			want: []shown{{"error", "TensorFlow needs another cuDNN",
				"TensorFlow 2.17 was built and tested with CUDA 12.3 and cuDNN 8.9 ({tf:2.17}), and needs cuDNN 8.x at 8.9 or newer; the cudnn block asks for \"9.*\" (gpuenv.hcl:6).", 10}},
		},
		{
			name: "Blackwell GPU with proprietary modules",
			src: `driver {
  version        = ">= 570"
  source         = "nvidia"
  kernel_modules = "proprietary"
}
`,
			obs: machine(ubuntu2204, rtx5090),
			want: []shown{{"error", "Kernel modules not available for this host",
				"kernel_modules = \"proprietary\" cannot work with the driver versions the spec allows (\">= 570\", gpuenv.hcl:2): GeForce RTX 5090 (Blackwell, compute capability 12.0) at 0000:17:00.0 is driven only by the open kernel modules ({arch:blackwell}).", 4}},
		},
		{
			name: "driver branch that dropped the GPU's architecture",
			src: `driver {
  version = "590.*"
  source  = "nvidia"
}
`,
			obs: machine(ubuntu2204, v100),
			want: []shown{{"error", "Driver does not support the GPU",
				"The driver block allows \"590.*\", but the host has Tesla V100 SXM2 16GB (Volta, compute capability 7.0) at 0000:17:00.0: R590 is newer than R580, the last branch that supports Volta GPUs ({arch:volta}).", 2}},
		},
		{
			name: "driver branch older than the GPU",
			src: `driver {
  version = "535.*"
}
`,
			obs: machine(ubuntu2204, rtx5090),
			want: []shown{{"error", "Driver does not support the GPU",
				"The driver block allows \"535.*\", but the host has GeForce RTX 5090 (Blackwell, compute capability 12.0) at 0000:17:00.0: R535 is older than R570, the first branch that supports Blackwell GPUs ({arch:blackwell}).", 2}},
		},
		{
			name: "torch without a build for a Blackwell GPU",
			src: `framework "pytorch" {
  version = "2.5.*"
  venv    = "/opt/pytorch"
}
`,
			obs: machine(ubuntu2204, rtx5090),
			want: []shown{{"error", "No torch build runs on the GPU",
				"The host has GeForce RTX 5090 (Blackwell, compute capability 12.0) at 0000:17:00.0, and none of the torch builds the spec allows runs on it: {ccwhy:2.5/cu124/12.0}. The first torch build for compute capability 12.0 is torch 2.7 with cu128 ({variant:2.7/cu128}).", 2}},
		},
		{
			name: "CUDA version the distribution does not ship",
			src: `cuda {
  version = "12.4"
  source  = "distro"
}
`,
			obs: machine(debian12),
			want: []shown{{"error", "CUDA version not in the distribution's archive",
				"Debian 12's archive has CUDA 11.8 only (nvidia-cuda-toolkit 11.8); the spec asks for CUDA \"12.4\" with source = \"distro\" (gpuenv.hcl:3). Use source = \"nvidia\" for other versions.", 2}},
		},
		{
			name: "driver branch the distribution does not ship, on a machine NVIDIA's repositories do not serve",
			src: `driver {
  version = "550.*"
}
`,
			obs: machine(ppc64le(debian12)),
			want: []shown{{"error", "No package source offers the driver (\"550.*\")",
				"The driver block leaves source out, and no package source offers the driver (\"550.*\"). Debian 12's archive has the 535 driver branch only (nvidia-driver, {pkg:debian/distro/driver/nvidia-driver}). NVIDIA's repository is not configured, and gpuenv does not add it: NVIDIA publishes its CUDA repository for debian 12 on x86_64 and aarch64 only, not on ppc64le. Add a repository block for it, and source = \"nvidia\" to the block.", 2}},
		},
		{
			name: "NVIDIA's packages asked for where gpuenv's table has no confirmed key",
			src: `cuda {
  version = "12.4"
  source  = "nvidia"
}
`,
			obs: machine(facts.OS{ID: "rocky", IDLike: []string{"rhel", "centos", "fedora"}, VersionID: "10.0", Family: "rpm", Arch: "x86_64"}),
			want: []shown{{"error", "NVIDIA's repository cannot be added",
				"The cuda block's packages come from NVIDIA's repository, which no package source of this host and no repository block of the spec configures, and gpuenv does not add it: NVIDIA's repository for rocky 10.0 is https://developer.download.nvidia.com/compute/cuda/repos/rhel10/x86_64/, but gpuenv's table has no confirmed fingerprint for its signing key CDF6BA43.pub (public cuda-rhel10.repo copies name gpgkey=…/rhel10/x86_64/CDF6BA43.pub, a key other than D42D0685; no source states its full fingerprint), and gpuenv trusts no key it cannot check. Add a repository block for it (a mirror's URL and its keyring), or configure it on the host.", 2}},
		},
		{
			name: "driver branch the distribution does not ship, source set",
			src: `driver {
  version = "550.*"
  source  = "distro"
}
`,
			obs: machine(debian12),
			want: []shown{{"error", "Driver version not in the distribution's archive",
				"Debian 12's archive has the 535 driver branch only (nvidia-driver, {pkg:debian/distro/driver/nvidia-driver}); the spec asks for \"550.*\" with source = \"distro\" (gpuenv.hcl:3). Use source = \"nvidia\" with NVIDIA's repository for other branches.", 2}},
		},
		{
			name: "JAX needs an exact version",
			src: `framework "jax" {
  version = "0.6.*"
  venv    = "/opt/jax"
}
`,
			obs: machine(ubuntu2204, h100),
			want: []shown{{"error", "JAX version must be exact",
				"gpuenv's tables hold JAX's CUDA plugins, not every JAX release, and a plan pins the exact wheel: write the release, such as version = \"0.6.2\", instead of \"0.6.*\".", 2}},
		},
		{
			name: "JAX's CUDA 13 plugin on a Volta GPU",
			src: `framework "jax" {
  version = "0.8.0"
  venv    = "/opt/jax"
  cuda    = "13.0"
}
`,
			obs: machine(ubuntu2204, v100),
			want: []shown{{"error", "JAX's CUDA plugin does not run on the GPU",
				"jax 0.8.0's CUDA 13 plugin needs compute capability 7.5 or newer ({jax:0.8.0/13}); the host has Tesla V100 SXM2 16GB (Volta, compute capability 7.0) at 0000:17:00.0.", 2}},
		},
		{
			name: "installed driver too old when the spec leaves the driver alone",
			src: `cuda {
  version = "12.4"
  source  = "nvidia"
}
`,
			obs: func() *facts.Observation {
				o := machine(ubuntu2204, h100)
				o.NVML.DriverVersion = "470.256.02"
				return o
			}(),
			want: []shown{{"warning", "The installed driver is too old for CUDA 12.4.1",
				"The host's driver is 470.256.02 (NVML), and CUDA 12.4.1 needs 525.60.13 or newer ({cuda:12.4.1}). The spec has no driver block, so gpuenv leaves the driver alone; add one to upgrade it.", 2}},
		},
		{
			name: "TensorFlow on a host without cuDNN",
			src: `framework "tensorflow" {
  version = "2.17.*"
  venv    = "/opt/tf"
}
`,
			obs: func() *facts.Observation {
				o := machine(ubuntu2204, h100)
				o.CUDA.Toolkits = []facts.Toolkit{{Path: "/usr/local/cuda-12.3", Version: "12.3.2", Layout: "nvidia"}}
				o.CUDA.Default = "/usr/local/cuda-12.3"
				return o
			}(),
			want: []shown{{"warning", "TensorFlow will not find cuDNN",
				"TensorFlow 2.17 was built and tested with CUDA 12.3 and cuDNN 8.9 ({tf:2.17}); the host has no cuDNN and the spec has no cudnn block, so TensorFlow will run on the CPU only. Add a cudnn block, or set extras = [\"and-cuda\"] to install cuDNN from pip.", 2}},
		},
		{
			name: "distribution's CPU-only torch",
			src: `framework "pytorch" {
  source = "distro"
}
`,
			obs: machine(debian12),
			want: []shown{{"warning", "The distribution's python3-torch does not use the GPU",
				"Debian 12's python3-torch is a CPU-only build ({pkg:debian/distro/pytorch/python3-torch}): programs importing it will not see a GPU. Use source = \"pip\" with a venv for a CUDA build.", 1}},
		},
		{
			name: "GPUs that need different kernel modules",
			src: `driver {
  version = "570.*"
  source  = "nvidia"
}
`,
			obs: machine(ubuntu2204, v100, rtx5090),
			want: []shown{{"error", "No kernel-module flavour serves every GPU",
				"This host mixes GPUs that need different kernel modules: GeForce RTX 5090 needs the open kernel modules and Tesla V100 SXM2 16GB the proprietary ones; no flavour serves both. Run them on separate hosts, or pass one to a virtual machine.", 1}},
		},
		{
			name: "spec that removes the driver a toolkit needs",
			src: `driver {
  absent = true
}
cuda {
  version = "12.4"
  source  = "nvidia"
}
`,
			obs: machine(ubuntu2204, h100),
			want: []shown{{"warning", "The spec removes the driver that this needs",
				"CUDA 12.4.1 needs an NVIDIA driver, and the driver block at gpuenv.hcl:1 has absent = true: nothing will run on the GPU.", 5}},
		},
		{
			name: "driver too old for the framework's CUDA build",
			src: `driver {
  version = "535.*"
  source  = "nvidia"
}
framework "pytorch" {
  version = "2.9.*"
  venv    = "/opt/pytorch"
  cuda    = "13.0"
}
`,
			obs: machine(ubuntu2204, h100),
			want: []shown{{"error", "Driver too old for torch",
				"torch 2.9.1+cu130 (CUDA 13.0) needs driver 580 or newer ({family:13}), and the driver block allows \"535.*\" (gpuenv.hcl:2).", 6}},
		},
		{
			name: "Python too new for the torch release",
			src: `framework "pytorch" {
  version = "2.5.*"
  python  = "/opt/py313/bin/python"
}
`,
			obs: func() *facts.Observation {
				o := machine(ubuntu2204, h100)
				o.Python = []facts.PythonEnv{{Interpreter: "/opt/py313/bin/python", Prefix: "/opt/py313", Version: "3.13", Virtual: true}}
				return o
			}(),
			want: []shown{{"error", "No torch build for this Python",
				"torch 2.5 supports Python 3.9 to 3.12 ({torch:2.5}); /opt/py313/bin/python is Python 3.13.", 2}},
		},
		{
			name: "RHEL's driver module stream",
			src: `driver {
  version = "570.*"
  source  = "nvidia"
}
`,
			obs: machine(rhel9, h100),
			want: []shown{{"warning", "Enable the driver's module stream first",
				"On RHEL 9.4, NVIDIA's driver packages are in the module stream nvidia-driver:570-open, which dnf hides until it is enabled: run dnf module enable nvidia-driver:570-open before applying ({stream:open}).", 3}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := loadSpec(t, tt.src)
			_, diags := Resolve(s, tt.obs)
			for i := range tt.want {
				tt.want[i].Detail = cite(t, tt.want[i].Detail)
			}
			if diff := cmp.Diff(tt.want, show(diags)); diff != "" {
				t.Errorf("diagnostics (-want +got):\n%s", diff)
			}
		})
	}
}

// citation matches a {table:key} placeholder in an expected message.
var citation = regexp.MustCompile(`\{(torch|variant|cuda|cudnn|tf|arch|jax|pkg|ccwhy|family|stream):([^}]*)\}`)

// cite replaces placeholders with the compat table's own source text, so
// that the messages are checked word for word while the tables' citations
// stay free to change.
func cite(t *testing.T, s string) string {
	t.Helper()
	return citation.ReplaceAllStringFunc(s, func(m string) string {
		sub := citation.FindStringSubmatch(m)
		key := sub[2]
		parts := strings.Split(key, "/")
		switch sub[1] {
		case "torch":
			r, err := compat.TorchRelease(version.MustParse(key))
			must(t, err)
			return r.Source.String()
		case "variant":
			v, err := compat.TorchVariant(version.MustParse(parts[0]), parts[1])
			must(t, err)
			return v.Source.String()
		case "ccwhy":
			_, why := compat.TorchVariantSupportsCC(version.MustParse(parts[0]), parts[1], version.MustParse(parts[2]))
			return why
		case "cuda":
			r, err := compat.LookupCUDA(version.MustParse(key))
			must(t, err)
			return r.Source.String()
		case "cudnn":
			c, ok := compat.CuDNNBuild(version.MustParse(parts[0]), version.MustParse(parts[1]).Major())
			if !ok {
				t.Fatalf("no cudnn row %s", key)
			}
			return c.Source.String()
		case "tf":
			r, err := compat.TensorFlowRelease(version.MustParse(key))
			must(t, err)
			return r.Source.String()
		case "arch":
			a, ok := compat.Arch(key)
			if !ok {
				t.Fatalf("no architecture %s", key)
			}
			return a.Source.String()
		case "jax":
			j, err := compat.JAXPlugin(version.MustParse(parts[0]), version.MustParse(parts[1]).Major())
			must(t, err)
			return j.Source.String()
		case "family":
			f, ok := compat.CUDAFamilyFor(version.MustParse(key).Major())
			if !ok {
				t.Fatalf("no CUDA family %s", key)
			}
			return f.Source.String()
		case "pkg":
			for _, r := range compat.PackageRows() {
				if r.OS == parts[0] && r.Repo == parts[1] && r.Component == parts[2] && r.Name == parts[3] {
					return r.Source.String()
				}
			}
			t.Fatalf("no package row %s", key)
		case "stream":
			for _, r := range compat.PackageRows() {
				if r.OS == "rhel" && r.Component == "module-stream" && string(r.Flavor) == key && r.When == compat.WhenBranch {
					return r.Source.String()
				}
			}
			t.Fatalf("no module-stream row %s", key)
		}
		return m
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
