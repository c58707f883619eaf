package providers

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/planner/plantest"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

// nvidiaList is the index of NVIDIA's flat repository in the Ubuntu 22.04
// root, and jammyUpdates Ubuntu's restricted list of jammy-updates.
const (
	nvidiaList   = "/var/lib/apt/lists/developer.download.nvidia.com_compute_cuda_repos_ubuntu2204_x86%5f64_Packages"
	jammyUpdates = "/var/lib/apt/lists/archive.ubuntu.com_ubuntu_dists_jammy-updates_restricted_binary-amd64_Packages"
)

// issueSpec is the spec of a user whose driver, CUDA and cuDNN came from
// NVIDIA's repository, with every source left out.
const issueSpec = "driver { version = \"550.*\" }\ncuda { version = \"12.4\" }\ncudnn { version = \"9.*\" }\n"

// planUbuntuCUDA plans src on the Ubuntu 22.04 root with NVIDIA's
// repository (testdata/roots/ubuntu2204-cuda-lists), after edit changes the
// built root, with a runner that fails the test on any process.
func planUbuntuCUDA(t *testing.T, src string, edit func(root string)) (*plan.Plan, error) {
	t.Helper()
	root := hosttest.Build(t, "ubuntu2204-cuda-lists")
	if edit != nil {
		edit(root)
	}
	h, err := host.New(root, host.WithRunner(refusing{t}))
	if err != nil {
		t.Fatal(err)
	}
	obs := Observe(context.Background(), h, ObserveOptions{})
	pl := planner.New(Planners()...)
	cands := Candidates(h)
	pl.Candidates = cands
	plan, diags := pl.Plan(context.Background(), plantest.LoadSpec(t, src), obs)
	if cands.Runs() != 0 {
		t.Errorf("%d package-manager commands", cands.Runs())
	}
	if diags.HasErrors() {
		return nil, diags
	}
	return plan, nil
}

func inferred(p *plan.Plan, address, attr string) plan.Inference {
	for _, in := range p.Inferred {
		if in.Address == address && in.Attr == attr {
			return in
		}
	}
	return plan.Inference{}
}

// TestInferredSourcesKeepWhatIsInstalled: on a host whose driver, CUDA
// and cuDNN came from NVIDIA's repository, a spec without sources plans
// no change, and each source is the index that lists what is installed.
func TestInferredSourcesKeepWhatIsInstalled(t *testing.T) {
	plan, err := planUbuntuCUDA(t, issueSpec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Steps) != 0 {
		t.Errorf("steps %q, want none", addresses(plan))
	}
	for block, pkg := range map[string]string{
		"driver": "nvidia-driver-550 550.54.15-0ubuntu1",
		"cuda":   "cuda-toolkit-12-4 12.4.1-1 at /usr/local/cuda-12.4",
		"cudnn":  "libcudnn9-cuda-12 9.1.0.70-1",
	} {
		in := inferred(plan, block, "source")
		if in.Value != "nvidia" || !strings.Contains(in.From, "the installed "+pkg+",") || !strings.Contains(in.From, nvidiaList+" (NVIDIA CUDA) lists") {
			t.Errorf("%s source %+v", block, in)
		}
	}
}

// dpkgStatus rewrites the root's package database to hold these packages
// alone (name, version), all installed.
func dpkgStatus(t *testing.T, root string, pkgs ...string) {
	t.Helper()
	var b strings.Builder
	for i := 0; i+1 < len(pkgs); i += 2 {
		b.WriteString("Package: " + pkgs[i] + "\nStatus: install ok installed\nArchitecture: amd64\nVersion: " + pkgs[i+1] + "\n\n")
	}
	if err := os.WriteFile(filepath.Join(root, "var/lib/dpkg/status"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestInferredSourceUnknownOrigin: an installed driver that satisfies the
// spec is kept as it is when no index lists its version, or no index is
// on disk, and the plan says its origin is unknown.
func TestInferredSourceUnknownOrigin(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(root string)
		why  string
	}{
		{"a version no index lists", func(root string) {
			dpkgStatus(t, root, "nvidia-driver-550", "550.40.07-0ubuntu1")
		}, "no package index lists that version"},
		{"no lists on disk", func(root string) {
			dpkgStatus(t, root, "nvidia-driver-550", "550.40.07-0ubuntu1")
			if err := os.RemoveAll(filepath.Join(root, "var/lib/apt/lists")); err != nil {
				t.Fatal(err)
			}
		}, "no package index is on disk"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := planUbuntuCUDA(t, "driver { version = \"550.*\" }\n", tc.edit)
			if err != nil {
				t.Fatal(err)
			}
			if plan.Step("driver") != nil {
				t.Errorf("steps %q: the installed driver satisfies the spec", addresses(plan))
			}
			in := inferred(plan, "driver", "source")
			if in.Value != "distro" || !strings.Contains(in.From, "the installed nvidia-driver-550 550.40.07-0ubuntu1, which satisfies the spec and is kept as it is; "+tc.why+", so its origin is unknown") {
				t.Errorf("driver source %+v", in)
			}
		})
	}
}

// TestBranchFromTheArchive: with no driver version and nothing installed,
// the branch is the newest one the first source that has any offers, in
// the flavour the GPU takes (ubuntu-drivers' choice), at the version apt
// would install from that source.
func TestBranchFromTheArchive(t *testing.T) {
	fresh := func(root string) { dpkgStatus(t, root, "cuda-keyring", "1.1-1") }
	plan, err := planUbuntuCUDA(t, "driver {}\n", fresh)
	if err != nil {
		t.Fatal(err)
	}
	src, ver := inferred(plan, "driver", "source"), inferred(plan, "driver", "version")
	if src.Value != "distro" || !strings.Contains(src.From, "Ubuntu 22.04's archive (jammy, jammy-updates), which offers nvidia-driver-550 550.120-0ubuntu0.22.04.1 ("+jammyUpdates) {
		t.Errorf("driver source %+v", src)
	}
	if ver.Value != "550.*" || !strings.HasPrefix(ver.From, "the newest branch that supports the host's A100 PCIe 80GB: Ubuntu 22.04's archive") {
		t.Errorf("driver version %+v", ver)
	}
	step := plan.Step("driver")
	if step == nil {
		t.Fatalf("steps %q, want a driver step", addresses(plan))
	}
	var pins []string
	for _, p := range step.Operations[0].Packages.Install {
		pins = append(pins, p.Name+"="+p.Version)
	}
	want := []string{"nvidia-driver-550=550.120-0ubuntu0.22.04.1"}
	if !slices.Equal(pins, want) {
		t.Errorf("installs %q, want %q", pins, want)
	}

	// Asked for the open modules, the newest branch offered in that
	// flavour is NVIDIA's 570, under the repository's latest name.
	plan, err = planUbuntuCUDA(t, "driver { kernel_modules = \"open\" }\n", fresh)
	if err != nil {
		t.Fatal(err)
	}
	if v := inferred(plan, "driver", "version"); v.Value != "570.*" {
		t.Errorf("driver version %+v", v)
	}
	if s := plan.Step("driver"); s == nil || pinOf(s) != "nvidia-open=570.86.15-0ubuntu1" {
		t.Errorf("driver step %+v", s)
	}

	// A GPU only the open modules drive, which Ubuntu's archive has no
	// branch for, gets NVIDIA's.
	plan, err = planUbuntuCUDA(t, "driver {}\n", func(root string) {
		fresh(root)
		gpu := filepath.Join(root, "sys/devices/pci0000:16/0000:16:02.0/0000:17:00.0")
		uevent, err := os.ReadFile(filepath.Join(gpu, "uevent"))
		if err != nil {
			t.Fatal(err)
		}
		uevent = []byte(strings.ReplaceAll(strings.ReplaceAll(string(uevent), "10DE:20B5", "10DE:2B85"), "d000020B5", "d00002B85"))
		for name, data := range map[string][]byte{"uevent": uevent, "device": []byte("0x2b85\n")} {
			if err := os.WriteFile(filepath.Join(gpu, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	src, ver = inferred(plan, "driver", "source"), inferred(plan, "driver", "version")
	if src.Value != "nvidia" || !strings.HasSuffix(src.From, "Ubuntu 22.04's archive (jammy, jammy-updates) offers none that the spec admits") {
		t.Errorf("driver source %+v", src)
	}
	if ver.Value != "570.*" || !strings.HasPrefix(ver.From, "the newest branch that supports the host's GeForce RTX 5090: NVIDIA's repository") {
		t.Errorf("driver version %+v", ver)
	}
	if km := inferred(plan, "driver", "kernel_modules"); km.Value != "open" {
		t.Errorf("kernel_modules %+v", km)
	}
}

// TestVersionTheArchiveLacks: a version no source offers fails at plan
// time, naming each source and what it offers.
func TestVersionTheArchiveLacks(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want []string
	}{
		{"cuda { version = \"12.5\" }\n", []string{
			`No package source offers CUDA "12.5"`,
			"Ubuntu 22.04's archive (jammy, jammy-updates) offers no CUDA toolkit package.",
			"offers cuda-toolkit-12-4 12.4.1-1, 12.4.0-1; cuda-toolkit-12-6 12.6.3-1.",
		}},
		{"cuda {\n  version = \"12.5\"\n  source  = \"nvidia\"\n}\n", []string{
			"CUDA version not in the archive",
			"offers cuda-toolkit-12-4 12.4.1-1, 12.4.0-1; cuda-toolkit-12-6 12.6.3-1.",
		}},
		{"driver {\n  version = \"550.127.05\"\n  source  = \"nvidia\"\n}\n", []string{
			"Driver version not in the archive",
			"cuda-drivers-550 550.90.07-1, 550.54.15-1;",
		}},
		{"cuda { version = \"12.4\" }\ncudnn {\n  version = \"9.5.*\"\n  source  = \"nvidia\"\n}\n", []string{
			"cuDNN version not in the archive",
			"libcudnn9-cuda-12 9.8.0.87-1, 9.1.0.70-1.",
		}},
	} {
		_, err := planUbuntuCUDA(t, tc.src, nil)
		if err == nil {
			t.Errorf("%q planned", tc.src)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q: %v\nwant %q in it", tc.src, err, w)
			}
		}
	}
}

// TestSourceVersionsOnly: a source's versions are its own indexes', not
// another source's newer ones (Ubuntu's 550.120 for NVIDIA's driver).
func TestSourceVersionsOnly(t *testing.T) {
	plan, err := planUbuntuCUDA(t, "driver {\n  version = \">= 550.60, < 551\"\n  source  = \"nvidia\"\n}\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	s := plan.Step("driver")
	if s == nil || pinOf(s) != "cuda-drivers-550=550.90.07-1" {
		t.Errorf("driver step %+v", s)
	}
}

// pinOf is the first package a step installs, as name=version.
func pinOf(s *plan.Step) string {
	p := s.Operations[0].Packages.Install[0]
	return p.Name + "=" + p.Version
}

// TestPinDecides: where a pin puts an older version of the source first,
// that is the version installed, as apt would, and the step and the
// inferred source say that the pin decided.
func TestPinDecides(t *testing.T) {
	plan, err := planUbuntuCUDA(t, "cuda { version = \"12.4\" }\n", func(root string) {
		dpkgStatus(t, root, "cuda-keyring", "1.1-1")
		for _, p := range []string{"usr/local/cuda-12.4", "usr/local/cuda", "usr/local/cuda-12"} {
			if err := os.RemoveAll(filepath.Join(root, p)); err != nil {
				t.Fatal(err)
			}
		}
		pin := "Package: cuda-toolkit-12-4\nPin: version 12.4.0-1\nPin-Priority: 700\n"
		if err := os.WriteFile(filepath.Join(root, "etc/apt/preferences.d/cuda-12-4-0"), []byte(pin), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	step := plan.Step("cuda")
	if step == nil || pinOf(step) != "cuda-toolkit-12-4=12.4.0-1" {
		t.Fatalf("cuda step %+v", step)
	}
	note := "apt prefers 12.4.0-1 at priority 700 (pin /etc/apt/preferences.d/cuda-12-4-0 record 1 (Package: cuda-toolkit-12-4; Pin: version 12.4.0-1)) over the newer 12.4.1-1 at priority 600"
	if !strings.Contains(step.Reason, note) {
		t.Errorf("reason %q\nwant %q in it", step.Reason, note)
	}
	if in := inferred(plan, "cuda", "source"); in.Value != "nvidia" || !strings.Contains(in.From, note) {
		t.Errorf("cuda source %+v", in)
	}
}
