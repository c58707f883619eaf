package capture_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers"
	"github.com/gpuenv/gpuenv/providers/cuda"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
	"github.com/gpuenv/gpuenv/providers/host/pkgindex"
	"github.com/gpuenv/gpuenv/spec"
)

// cudaRepo is NVIDIA's rhel9 repository as rhel9-dnf configures it, its
// key a file in /etc/pki/rpm-gpg (the fixtures' key, testdata/keys).
const cudaRepo = `[cuda-rhel9-x86_64]
name=cuda-rhel9-x86_64
baseurl=https://developer.download.nvidia.com/compute/cuda/repos/rhel9/x86_64
enabled=1
gpgcheck=1
gpgkey=file:///etc/pki/rpm-gpg/RPM-GPG-KEY-NVIDIA-CUDA
`

// rpmInstalled is what rpm -qa reports of the first host's stack:
// NVIDIA's 550.90.07 driver with its DKMS module, and CUDA 12.4.1.
var rpmInstalled = []facts.Package{
	{Name: "cuda-drivers", Version: "550.90.07-1", State: facts.StateInstalled, Want: "install"},
	{Name: "nvidia-driver", Version: "3:550.90.07-1.el9", State: facts.StateInstalled, Want: "install"},
	{Name: "kmod-nvidia-latest-dkms", Version: "3:550.90.07-1.el9", State: facts.StateInstalled, Want: "install"},
	{Name: "cuda-toolkit-12-4", Version: "12.4.1-1", State: facts.StateInstalled, Want: "install"},
}

// TestReproduceRPM: init on a Rocky 9 host that installed its stack from
// NVIDIA's repository captures the repository with its key, and its
// spec plans the first host's versions on a fresh Rocky 9 once the
// repository it configures is in place. rpm -qa cannot run in a fixture
// root, so the first host's package facts are what it would report.
func TestReproduceRPM(t *testing.T) {
	key, err := os.ReadFile(filepath.Join(hosttest.TestdataDir(t), "keys", "fixture-cuda.gpg"))
	if err != nil {
		t.Fatal(err)
	}
	first := hosttest.Build(t, "rhel9-dnf")
	hosttest.WriteFile(t, first, "/etc/yum.repos.d/cuda-rhel9.repo", cudaRepo)
	hosttest.WriteFile(t, first, "/etc/pki/rpm-gpg/RPM-GPG-KEY-NVIDIA-CUDA", string(key))
	hosttest.WriteFile(t, first, "/sys/module/nvidia/version", "550.90.07\n")
	hosttest.WriteFile(t, first, "/usr/local/cuda-12.4/version.json", `{"cuda": {"name": "CUDA SDK", "version": "12.4.1"}}`)
	hosttest.WriteFile(t, first, "/usr/local/cuda-12.4/bin/nvcc", "")
	if err := os.Symlink("/usr/local/cuda-12.4", filepath.Join(first, "usr/local/cuda")); err != nil {
		t.Fatal(err)
	}
	h := hosttest.New(t, first)
	obs := providers.Observe(context.Background(), h, providers.ObserveOptions{})
	obs.Packages = facts.Packages{Manager: facts.DatabaseRPM, Total: 412, Packages: rpmInstalled}
	obs.PackageIndexes, _ = pkgindex.Read(h, pkgindex.Options{Family: "rpm", Repositories: obs.Repositories, Installed: rpmInstalled, Arch: obs.OS.Arch})
	obs.CUDA, _ = cuda.Observe(h, obs.Packages)

	src := roundTrip(t, obs)
	for _, want := range []string{
		"repository \"cuda-rhel9-x86_64\" {\n  url             = \"https://developer.download.nvidia.com/compute/cuda/repos/rhel9/x86_64\"\n  keyring         = \"/etc/pki/rpm-gpg/RPM-GPG-KEY-NVIDIA-CUDA\"\n  key_fingerprint = \"7D5AB3C8EA6E6296C742F6104948E0156F695994\"\n}",
		"  version          = \"550.90.07\"\n",
		"  source           = \"nvidia\"\n",
		"cuda {\n  version = \"12.4.1\"\n  source  = \"nvidia\"\n}",
		"[epel] is not captured: it lists its mirrors with",
	} {
		if !strings.Contains(src, want) {
			t.Errorf("spec lacks %q:\n%s", want, src)
		}
	}
	file := filepath.Join(t.TempDir(), "gpuenv.hcl")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	s, diags := spec.Load(file, spec.LoadOptions{})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}

	// A fresh Rocky 9: EPEL and its cache, nothing of NVIDIA's. The plan
	// configures the repository first; once its .repo file is written as
	// planned, with the key in place and dnf's cache of it fetched under
	// the new repository id, it installs the first host's versions.
	fresh := hosttest.Build(t, "rhel9-dnf")
	if err := os.Remove(filepath.Join(fresh, "etc/yum.repos.d/cuda-rhel9.repo")); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(fresh, pkgindex.DnfCacheDir)
	old, _ := filepath.Glob(filepath.Join(cache, "cuda-rhel9-x86_64-*"))
	if len(old) != 1 {
		t.Fatalf("dnf's cache of the repository: %v", old)
	}
	hidden := filepath.Join(t.TempDir(), "cache")
	if err := os.Rename(old[0], hidden); err != nil {
		t.Fatal(err)
	}
	pl := planner.New(providers.Planners()...)
	fh := hosttest.New(t, fresh)
	p, diags := pl.Plan(context.Background(), s, providers.Observe(context.Background(), fh, providers.ObserveOptions{}))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if len(p.Steps) == 0 || p.Steps[0].Address != "repository.cuda-rhel9-x86_64" {
		t.Fatalf("the repository is not configured first: %v", addresses(p))
	}
	for _, op := range p.Steps[0].Operations {
		hosttest.WriteFile(t, fresh, op.File.Path, op.File.Content)
	}
	hosttest.WriteFile(t, fresh, "/etc/pki/rpm-gpg/RPM-GPG-KEY-NVIDIA-CUDA", string(key))
	if err := os.Rename(hidden, filepath.Join(cache, "gpuenv-"+filepath.Base(old[0]))); err != nil {
		t.Fatal(err)
	}
	p, diags = pl.Plan(context.Background(), s, providers.Observe(context.Background(), fh, providers.ObserveOptions{}))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	have := map[string]string{}
	for _, pkg := range rpmInstalled {
		have[pkg.Name] = pkg.Version
	}
	pinned := 0
	for _, st := range p.Steps {
		if st.Address == "repository.cuda-rhel9-x86_64" {
			t.Errorf("the repository is planned again once in place: %s", st.Reason)
		}
		for _, op := range st.Operations {
			if op.Packages == nil || st.Address == "kernel.headers" {
				continue
			}
			for _, pin := range op.Packages.Install {
				pinned++
				t.Logf("%s: %s=%s", st.Address, pin.Name, pin.Version)
				if have[pin.Name] != pin.Version {
					t.Errorf("%s: installs %s=%s; the first host has %q", st.Address, pin.Name, pin.Version, have[pin.Name])
				}
			}
		}
	}
	if pinned < 3 {
		t.Errorf("%d packages planned; want the driver's and the toolkit: %v", pinned, addresses(p))
	}
}

func addresses(p *plan.Plan) []string {
	var out []string
	for _, s := range p.Steps {
		out = append(out, s.Address)
	}
	return out
}
