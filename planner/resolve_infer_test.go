package planner

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/planner/compat"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/spec/version"
)

// resolved is what the inference tests compare of a Desired.
type resolved struct {
	Driver     string // versions and flavour: ">= 525.60.13 open"
	DriverPkgs string
	CUDA       string
	Framework  string // package==version index
	Components string
	Inferred   []string // address attribute=value from
}

func resolvedSummary(d *Desired) resolved {
	var s resolved
	if dd := d.Driver; dd != nil {
		s.Driver = strings.TrimSpace(dd.Versions.String() + " " + string(dd.KernelModules))
		var names []string
		for _, p := range dd.Packages {
			names = append(names, p.Name)
		}
		s.DriverPkgs = strings.Join(names, " ")
	}
	if dc := d.CUDA; dc != nil {
		var names []string
		for _, p := range dc.Packages {
			names = append(names, p.Name+"="+p.Version)
		}
		s.CUDA = dc.Minor.String() + " " + dc.Path + " " + strings.Join(names, " ")
	}
	for _, f := range d.Frameworks {
		s.Framework += f.Package + "==" + f.Version.String() + " " + f.IndexURL + " " + strings.Join(f.Extras, ",")
	}
	s.Components = strings.Join(d.Components, " ")
	for _, i := range d.Inferred {
		line := i.Address + " " + i.Attr + "=" + i.Value + " from " + i.From
		if i.Unverified != "" {
			line += " [unverified " + i.Unverified + "]"
		}
		s.Inferred = append(s.Inferred, line)
	}
	return s
}

func TestResolveInference(t *testing.T) {
	torch25 := must1(compat.TorchRelease(version.MustParse("2.5")))
	cu124 := must1(compat.TorchVariant(version.MustParse("2.5"), "cu124"))
	cu128 := must1(compat.TorchVariant(version.MustParse("2.7"), "cu128"))
	torch27 := must1(compat.TorchRelease(version.MustParse("2.7")))
	fam12, _ := compat.CUDAFamilyFor(12)
	hopperBranch, _ := compat.BranchOf(version.MustParse("595"))
	blackwell, _ := compat.Arch("blackwell")
	volta, _ := compat.Arch("volta")
	tf217 := must1(compat.TensorFlowRelease(version.MustParse("2.17")))
	jax := must1(compat.JAXPlugin(version.MustParse("0.6.2"), 12))
	floor12 := fam12.Source
	floor12.Key += ", for torch 2.5.1+cu124 (CUDA 12.4)"
	floor128 := fam12.Source
	floor128.Key += ", for torch 2.7.1+cu128 (CUDA 12.8)"
	tests := []struct {
		name string
		src  string
		obs  *facts.Observation
		want resolved
	}{
		{
			name: "a torch version alone implies its build, index and driver floor",
			src:  "framework \"pytorch\" {\n  version = \"2.5.*\"\n  venv    = \"/opt/pytorch\"\n}\n",
			obs:  machine(ubuntu2204, h100),
			want: resolved{
				Framework: "torch==2.5.1+cu124 https://download.pytorch.org/whl/cu124 ",
				Inferred: []string{
					"framework.pytorch version=2.5.1 from " + cited(torch25.Source),
					"framework.pytorch cuda=12.4 from " + cited(cu124.Source),
					"framework.pytorch index_url=https://download.pytorch.org/whl/cu124 from " + cited(cu124.Source),
				},
			},
		},
		{
			name: "a driver block without a version gets the framework's floor",
			src:  "driver {\n  source = \"nvidia\"\n}\nframework \"pytorch\" {\n  version = \"2.5.*\"\n  venv    = \"/opt/pytorch\"\n}\n",
			obs:  machine(ubuntu2204, h100),
			want: resolved{
				Driver:     ">= 525.60.13 open",
				DriverPkgs: "nvidia-open",
				Framework:  "torch==2.5.1+cu124 https://download.pytorch.org/whl/cu124 ",
				Inferred: []string{
					"framework.pytorch version=2.5.1 from " + cited(torch25.Source),
					"framework.pytorch cuda=12.4 from " + cited(cu124.Source),
					"framework.pytorch index_url=https://download.pytorch.org/whl/cu124 from " + cited(cu124.Source),
					"driver version=>= 525.60.13 from " + floor12.String(),
					"driver kernel_modules=open from " + cited(hopperBranch.Source),
				},
			},
		},
		{
			name: "a Blackwell GPU needs cu128 and the open modules",
			src:  "driver {\n  source = \"nvidia\"\n}\nframework \"pytorch\" {\n  version = \"2.7.*\"\n  venv    = \"/opt/pytorch\"\n}\n",
			obs:  machine(ubuntu2204, rtx5090),
			want: resolved{
				Driver:     ">= 570 open",
				DriverPkgs: "nvidia-open",
				Framework:  "torch==2.7.1+cu128 https://download.pytorch.org/whl/cu128 ",
				Inferred: []string{
					"framework.pytorch version=2.7.1 from " + cited(torch27.Source),
					"framework.pytorch cuda=12.8 from " + cited(cu128.Source),
					"framework.pytorch index_url=https://download.pytorch.org/whl/cu128 from " + cited(cu128.Source),
					"driver version=>= 525.60.13 from " + floor128.String(),
					"driver kernel_modules=open from " + cited(blackwell.Source),
				},
			},
		},
		{
			name: "a Volta GPU keeps the proprietary modules and R580 at most",
			src:  "driver {\n  source = \"nvidia\"\n}\n",
			obs:  machine(ubuntu2204, v100),
			want: resolved{
				Driver:     ">= 384, < 581 proprietary",
				DriverPkgs: "cuda-drivers",
				Inferred:   []string{"driver kernel_modules=proprietary from " + cited(volta.Source)},
			},
		},
		{
			name: "Debian's own packages need non-free",
			src:  "driver {\n  version        = \"535.*\"\n  kernel_modules = \"proprietary\"\n}\ncuda {\n  version = \"11.8\"\n  source  = \"distro\"\n}\n",
			obs:  machine(debian12),
			want: resolved{
				Driver:     "535.* proprietary",
				DriverPkgs: "nvidia-driver nvidia-kernel-dkms",
				CUDA:       "11.8 /usr nvidia-cuda-toolkit=",
				Components: "contrib non-free",
				Inferred:   []string{"driver source=distro from " + debianDriverRow(t) + noLists},
			},
		},
		{
			name: "Debian's open modules are in contrib and need the GSP firmware",
			src:  "driver {\n  kernel_modules = \"open\"\n}\n",
			obs:  machine(debian12, l4),
			want: resolved{
				Driver:     "535.* open",
				DriverPkgs: "nvidia-driver nvidia-open-kernel-dkms firmware-nvidia-gsp",
				Components: "contrib non-free",
				Inferred:   []string{"driver source=distro from " + debianDriverRow(t) + noLists, "driver version=535.* from " + debianDriverRow(t)},
			},
		},
		{
			name: "the userspace alone",
			src:  "driver {\n  version        = \"535.*\"\n  kernel_modules = \"none\"\n}\n",
			obs:  machine(debian12),
			want: resolved{
				Driver:     "535.* none",
				DriverPkgs: "nvidia-smi libnvidia-ml1 libcuda1",
				Components: "contrib non-free",
				Inferred:   []string{"driver source=distro from " + debianDriverRow(t) + noLists},
			},
		},
		{
			name: "a TensorFlow version resolves to its tested release",
			src:  "framework \"tensorflow\" {\n  version = \"2.17.*\"\n  venv    = \"/opt/tf\"\n  extras  = [\"and-cuda\"]\n}\n",
			obs:  machine(ubuntu2204, h100),
			want: resolved{
				Framework: "tensorflow==2.17.0 https://pypi.org/simple and-cuda",
				Inferred:  []string{"framework.tensorflow version=2.17.0 from " + cited(tf217.Source)},
			},
		},
		{
			name: "JAX's plugin extra follows the CUDA major",
			src:  "framework \"jax\" {\n  version = \"0.6.2\"\n  venv    = \"/opt/jax\"\n}\n",
			obs:  machine(ubuntu2204, h100),
			want: resolved{
				Framework: "jax==0.6.2 https://pypi.org/simple cuda12",
				Inferred: []string{
					"framework.jax cuda=12 from " + cited(jax.Source),
					"framework.jax extras=cuda12 from " + cited(jax.Source),
				},
			},
		},
		{
			name: "PyPI's default build has no local version",
			src:  "framework \"pytorch\" {\n  version = \"2.5.*\"\n  venv    = \"/opt/pytorch\"\n  index_url = \"https://pypi.org/simple\"\n}\n",
			obs:  machine(ubuntu2204, h100),
			want: resolved{
				Framework: "torch==2.5.1 https://pypi.org/simple ",
				Inferred: []string{
					"framework.pytorch version=2.5.1 from " + cited(torch25.Source),
					"framework.pytorch cuda=12.4 from " + cited(cu124.Source),
				},
			},
		},
		{
			name: "the toolkit's exact release names the package version",
			src:  "cuda {\n  version = \"12.4.1\"\n  source  = \"nvidia\"\n}\n",
			obs:  machine(ubuntu2204),
			want: resolved{CUDA: "12.4 /usr/local/cuda-12.4 cuda-toolkit-12-4=12.4.1-1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := loadSpec(t, tt.src)
			d, diags := Resolve(s, tt.obs)
			if diags.HasErrors() {
				t.Fatalf("errors: %v", diags)
			}
			if diff := cmp.Diff(tt.want, resolvedSummary(d)); diff != "" {
				t.Errorf("resolved (-want +got):\n%s", diff)
			}
		})
	}
}

// noLists ends the origin of a source that gpuenv's tables gave, on a
// host whose package lists are not on disk.
const noLists = "; the distribution's package lists are not on disk, so gpuenv's tables say what its archive offers"

// cited is how an inferred value names its table row: the row and its
// references, and apart from them the fields no reference confirms.
func cited(src compat.Source) string {
	out := src.Cited()
	if u := src.UnverifiedText(); u != "" {
		out += " [unverified " + u + "]"
	}
	return out
}

func debianDriverRow(t *testing.T) string {
	for _, r := range compat.PackageRows() {
		if r.OS == "debian" && r.Repo == compat.RepoDistro && r.Component == "driver" {
			return cited(r.Source)
		}
	}
	t.Fatal("no Debian driver row")
	return ""
}

func must1[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestResolveHostGPUs(t *testing.T) {
	obs := machine(ubuntu2204, h100)
	obs.NVML.Devices = []facts.GPUDevice{
		{Index: 0, UUID: "GPU-a", PCIBusID: "00000000:17:00.0", ComputeCapability: "9.0", Name: "NVIDIA H100 80GB HBM3"},
		{Index: 1, UUID: "GPU-b", PCIBusID: "00000000:99:00.0", ComputeCapability: "8.0", Name: "NVIDIA A100-SXM4-80GB"},
	}
	got := HostGPUs(obs)
	if len(got) != 2 {
		t.Fatalf("got %d GPUs, want 2", len(got))
	}
	if g := got[0]; g.Index != 0 || g.UUID != "GPU-a" || g.Arch != "hopper" || g.Row == nil || g.Describe() != "H100 SXM5 80GB HBM3 (Hopper, compute capability 9.0) at 0000:17:00.0" {
		t.Errorf("PCI GPU with NVML's index: %+v, %q", g, g.Describe())
	}
	if g := got[1]; g.Index != 1 || g.Arch != "ampere" || g.Row != nil || g.Model != "NVIDIA A100-SXM4-80GB" {
		t.Errorf("GPU only NVML sees: %+v", g)
	}
}

func TestResolveWithoutGPU(t *testing.T) {
	s := loadSpec(t, "driver {\n  version = \"535.*\"\n  blacklist_nouveau = true\n}\nframework \"pytorch\" {\n  version = \"2.5.*\"\n  venv = \"/opt/pytorch\"\n}\n")
	d, diags := Resolve(s, machine(debian12))
	if diags.HasErrors() {
		t.Fatalf("a host without a GPU still resolves: %v", diags)
	}
	if len(d.GPUs) != 0 || d.Driver.KernelModules != "proprietary" || len(d.Driver.Packages) != 2 {
		t.Errorf("resolved %+v", d.Driver)
	}
}

func TestNarrow(t *testing.T) {
	tests := []struct {
		c, extra, want string
		ok             bool
	}{
		{"", ">= 550", ">= 550", true},
		{"535.*", ">= 520.61.05", "535.*", true},
		{">= 525.60.13", ">= 570", ">= 570", true},
		{"550.54.15", ">= 550.54.14", "550.54.15", true},
		{"< 581", ">= 384", "< 581, >= 384", true},
		{"535.*", "535.*", "535.*", true},
		{"535.* || 550.*", ">= 540", "535.*, >= 540 || 550.*", true},
		{"535.*", ">= 550", "535.*, >= 550", false},
	}
	for _, tt := range tests {
		c := version.Constraint{}
		if tt.c != "" {
			c = version.MustParseConstraint(tt.c)
		}
		got, ok := narrow(c, tt.extra)
		if got.String() != tt.want || ok != tt.ok {
			t.Errorf("narrow(%q, %q) = %q, %v; want %q, %v", tt.c, tt.extra, got, ok, tt.want, tt.ok)
		}
	}
}

func TestResolvePackageNames(t *testing.T) {
	tests := []struct {
		name string
		src  string
		obs  *facts.Observation
		want []string // driver, cuda, cudnn package names
	}{
		{
			name: "RHEL 9 with NVIDIA's repository and the open modules",
			src:  "driver {\n  version = \"570.*\"\n  source = \"nvidia\"\n}\ncuda {\n  version = \"12.8\"\n  source = \"nvidia\"\n}\n",
			obs:  machine(rhel9, h100),
			want: []string{"nvidia-open", "kmod-nvidia-open-dkms", "cuda-toolkit-12-8"},
		},
		{
			name: "RHEL 9 with the proprietary modules",
			src:  "driver {\n  version = \"550.*\"\n  source = \"nvidia\"\n  kernel_modules = \"proprietary\"\n}\n",
			obs:  machine(rhel9, v100),
			want: []string{"cuda-drivers", "kmod-nvidia-latest-dkms"},
		},
		{
			name: "Ubuntu's archive, branch by name",
			src:  "driver {\n  version = \"550.*\"\n  kernel_modules = \"open\"\n}\n",
			obs:  machine(ubuntu2204, l4),
			want: []string{"nvidia-driver-550-open"},
		},
		{
			name: "NVIDIA's repository from R590 pins the branch first",
			src:  "driver {\n  version = \"590.*\"\n  source = \"nvidia\"\n}\ncudnn {\n  version = \"9.*\"\n  source = \"nvidia\"\n}\ncuda {\n  version = \"13.1\"\n  source = \"nvidia\"\n}\n",
			obs:  machine(ubuntu2204, h100),
			want: []string{"nvidia-driver-pinning-590", "nvidia-open", "cuda-toolkit-13-1", "libcudnn9-cuda-13", "libcudnn9-dev-cuda-13"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, diags := Resolve(loadSpec(t, tt.src), tt.obs)
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			var got []string
			for _, set := range [][]PackageName{d.Driver.Packages, cudaPackages(d), cudnnPackages(d)} {
				for _, p := range set {
					got = append(got, p.Name)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("packages (-want +got):\n%s", diff)
			}
		})
	}
}

func cudaPackages(d *Desired) []PackageName {
	if d.CUDA == nil {
		return nil
	}
	return d.CUDA.Packages
}

func cudnnPackages(d *Desired) []PackageName {
	if d.CuDNN == nil {
		return nil
	}
	return d.CuDNN.Packages
}

func TestResolveFrameworkAddresses(t *testing.T) {
	s := loadSpec(t, "framework \"pytorch\" {\n  version = \"2.5.1\"\n  venv = \"/opt/a\"\n}\nframework \"pytorch\" {\n  version = \"2.7.*\"\n  venv = \"/opt/b\"\n}\nframework \"jax\" {\n  version = \"0.6.2\"\n  python = \"/srv/jax/bin/python\"\n}\n")
	d, diags := Resolve(s, machine(ubuntu2204, h100))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	var got []string
	for _, f := range d.Frameworks {
		got = append(got, f.Address+" "+f.Python+" "+f.Venv+" "+f.BasePython)
	}
	want := []string{
		"framework.pytorch[/opt/a] /opt/a/bin/python /opt/a /usr/bin/python3",
		"framework.pytorch[/opt/b] /opt/b/bin/python /opt/b /usr/bin/python3",
		"framework.jax /srv/jax/bin/python  ",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestResolveUnknownSystem(t *testing.T) {
	_, diags := Resolve(loadSpec(t, "driver {\n  version = \"550.*\"\n}\n"), &facts.Observation{OS: facts.OS{ID: "arch"}})
	if !diags.HasErrors() {
		t.Fatal("a host whose packages gpuenv cannot name must be an error")
	}
	if d := diags[len(diags)-1]; d.Summary != "Unknown package manager" || d.Subject != nil {
		t.Errorf("diagnostic %v", d)
	}
}

func TestResolveKernelModuleDefaults(t *testing.T) {
	hopper, _ := compat.Arch("hopper")
	tests := []struct {
		name    string
		version string
		km      string // the spec's, "" for the default
		gpu     uint16
		want    string // the flavour, or the error's summary
	}{
		{"before R560 the proprietary modules are the default", "550.*", "", h100, "proprietary"},
		{"from R560 the open modules are", "570.*", "", h100, "open"},
		{"Grace Hopper needs the open modules on any branch", "550.*", "", gh200, "open"},
		{"Grace Hopper refuses the proprietary ones", "550.*", "proprietary", gh200, "Kernel modules not available for this host"},
		{"Volta has no open modules", "570.*", "open", v100, "Kernel modules not available for this host"},
		{"the userspace alone needs no flavour", "570.*", "none", v100, "none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "driver {\n  version = \"" + tt.version + "\"\n  source = \"nvidia\"\n"
			if tt.km != "" {
				src += "  kernel_modules = \"" + tt.km + "\"\n"
			}
			d, diags := Resolve(loadSpec(t, src+"}\n"), machine(ubuntu2204, tt.gpu))
			got := ""
			if diags.HasErrors() {
				got = diags[0].Summary
			} else {
				got = string(d.Driver.KernelModules)
			}
			if got != tt.want {
				t.Errorf("got %q (%v), want %q", got, diags, tt.want)
			}
		})
	}
	// The flavour a GPU decides cites the GPU's architecture; one the
	// branch decides cites the branch.
	d, _ := Resolve(loadSpec(t, "driver {\n  version = \"550.*\"\n  source = \"nvidia\"\n}\n"), machine(ubuntu2204, gh200))
	if len(d.Inferred) != 1 || d.Inferred[0].From != hopper.Source.Cited() || d.Inferred[0].Unverified != hopper.Source.UnverifiedText() {
		t.Errorf("inferred %+v", d.Inferred)
	}
}
