//go:build realsystem

package realsys

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/planner/facts"
)

const cudaRepo = "/srv/cuda-repo"

func cudaSpec(version string) string {
	return fmt.Sprintf(`cuda {
  version = %q
  source  = "nvidia"
}
`, version)
}

// libcudnn is a package like NVIDIA's libcudnn9-cuda-12, with the header
// that names cuDNN's version.
var libcudnn = Deb{
	Name:    "libcudnn9-cuda-12",
	Version: "9.1.0.70-1",
	Files: map[string]string{
		"/usr/include/x86_64-linux-gnu/cudnn_version.h": `#ifndef CUDNN_VERSION_H_
#define CUDNN_VERSION_H_

#define CUDNN_MAJOR 9
#define CUDNN_MINOR 1
#define CUDNN_PATCHLEVEL 0

#define CUDNN_VERSION (CUDNN_MAJOR * 10000 + CUDNN_MINOR * 100 + CUDNN_PATCHLEVEL)

#endif
`,
	},
}

// Scenario 6: a local repository laid out like NVIDIA's CUDA repository.
// apply installs CUDA 12.4, upgrades to 12.6 (installed beside it, as
// NVIDIA's versioned toolkits are), and rollback removes 12.6 again; dpkg
// and observe agree at every step.
func TestNvidiaRepositoryLayout(t *testing.T) {
	r := h.NewRoot(t, Base, Mounts{Proc: true})
	r.AddRepository(cudaRepo, []Deb{
		cudaToolkit("12.4", "12.4.1", "12.4.1-1"),
		cudaToolkit("12.6", "12.6.3", "12.6.3-1"),
		libcudnn,
	})

	// cuDNN from the same repository, installed by apt: observe reads
	// its version from the header and the package that owns it.
	r.MustSh("apt-get install -y --no-install-recommends libcudnn9-cuda-12")
	obs := r.Observe()
	if !slices.ContainsFunc(obs.CuDNN.Installs, func(c facts.CuDNNInstall) bool {
		return c.Version == "9.1.0" && c.Package == "libcudnn9-cuda-12" && c.PackageVersion == "9.1.0.70-1" && c.CUDAMajor == "12"
	}) {
		t.Errorf("observe: cuDNN %+v, want 9.1.0 from libcudnn9-cuda-12 9.1.0.70-1 for CUDA 12", obs.CuDNN.Installs)
	}

	r.WriteFile("/root/cuda/gpuenv.hcl", cudaSpec("12.4.1"))
	res := r.Gpuenv("plan", "--detailed-exitcode", "/root/cuda")
	if res.Code != 2 || !strings.Contains(res.Stdout, "cuda-toolkit-12-4=12.4.1-1") {
		t.Fatalf("plan: want cuda-toolkit-12-4=12.4.1-1 installed; %s", res)
	}
	if res := r.Gpuenv("apply", "--auto-approve", "/root/cuda"); res.Code != 0 {
		t.Fatalf("apply 12.4: %s", res)
	}
	r.checkToolkits(map[string]string{"12.4": "12.4.1"})
	if res := r.Gpuenv("plan", "--detailed-exitcode", "/root/cuda"); res.Code != 0 || !strings.Contains(res.Stdout, "No changes") {
		t.Errorf("plan after apply: want no changes; %s", res)
	}

	r.WriteFile("/root/cuda/gpuenv.hcl", cudaSpec("12.6.3"))
	if res := r.Gpuenv("apply", "--auto-approve", "/root/cuda"); res.Code != 0 {
		t.Fatalf("apply 12.6: %s", res)
	}
	r.checkToolkits(map[string]string{"12.4": "12.4.1", "12.6": "12.6.3"})

	if res := r.Gpuenv("rollback", "--auto-approve"); res.Code != 0 {
		t.Fatalf("rollback: %s", res)
	}
	r.checkToolkits(map[string]string{"12.4": "12.4.1"})
	if _, err := os.Stat(r.Path("/usr/local/cuda-12.6")); err == nil {
		t.Errorf("/usr/local/cuda-12.6 is still there after rollback")
	}
}

// Scenario 7: a package whose postinst fails in the middle of a real apt
// transaction. apply stops, reverts, exits 1, and leaves dpkg's package set
// (name, version, selection, status) exactly as it found it.
func TestFailingPostinstReverts(t *testing.T) {
	r := h.NewRoot(t, Base, Mounts{Proc: true})
	broken := cudaToolkit("12.8", "12.8.1", "12.8.1-1")
	broken.Postinst = "#!/bin/sh\necho 'cuda-toolkit-12-8: configuration fails' >&2\nexit 1\n"
	r.AddRepository(cudaRepo, []Deb{cudaToolkit("12.4", "12.4.1", "12.4.1-1"), broken})
	// A held toolkit already there: the revert must keep it and its hold.
	r.MustSh("apt-get install -y --no-install-recommends cuda-toolkit-12-4 && apt-mark hold cuda-toolkit-12-4")
	before := r.Dpkg()

	r.WriteFile("/root/cuda/gpuenv.hcl", cudaSpec("12.8.1"))
	res := r.Gpuenv("apply", "--auto-approve", "/root/cuda")
	if res.Code != 1 {
		t.Fatalf("apply with a failing postinst: want exit 1 (failed, fully reverted); %s", res)
	}
	if !strings.Contains(res.Stdout, "the host is as it was before") {
		t.Errorf("apply does not say the revert is complete: %s", res)
	}
	after := r.Dpkg()
	if !maps.Equal(before, after) {
		for name, p := range after {
			if before[name] != p {
				t.Errorf("dpkg after the revert: %+v, before: %+v", p, before[name])
			}
		}
		for name, p := range before {
			if _, ok := after[name]; !ok {
				t.Errorf("dpkg after the revert has no %s; before: %+v", name, p)
			}
		}
	}
	if audit := r.MustSh("dpkg --audit"); strings.TrimSpace(audit) != "" {
		t.Errorf("dpkg --audit after the revert:\n%s", audit)
	}
	if _, err := os.Stat(r.Path("/usr/local/cuda-12.8")); err == nil {
		t.Errorf("/usr/local/cuda-12.8 is still there after the revert")
	}
	// Nothing is left unfinished: the same spec plans the install again.
	if res := r.Gpuenv("plan", "--detailed-exitcode", "/root/cuda"); res.Code != 2 || !strings.Contains(res.Stdout, "cuda-toolkit-12-8=12.8.1-1") {
		t.Errorf("plan after the revert: want the 12.8 install planned again; %s", res)
	}
}

// checkToolkits asserts that exactly the given toolkits (release → full
// version) are installed, by dpkg and by observe.
func (r *Root) checkToolkits(want map[string]string) {
	r.t.Helper()
	pkgs := r.Dpkg()
	for name, p := range pkgs {
		release, ok := strings.CutPrefix(name, "cuda-toolkit-")
		if !ok || p.Status == "not-installed" {
			continue
		}
		release = strings.ReplaceAll(release, "-", ".")
		if full, ok := want[release]; !ok || p.Status != "installed" || p.Version != full+"-1" {
			r.t.Errorf("dpkg: %s %+v; want %v", name, p, want)
		}
	}
	got := map[string]string{}
	for _, tk := range r.Observe().CUDA.Toolkits {
		got[strings.TrimPrefix(tk.Path, "/usr/local/cuda-")] = tk.Version
		if wantPkg := "cuda-toolkit-" + strings.ReplaceAll(strings.TrimPrefix(tk.Path, "/usr/local/cuda-"), ".", "-"); tk.Package != wantPkg {
			r.t.Errorf("observe: toolkit %s from package %q, want %s", tk.Path, tk.Package, wantPkg)
		}
	}
	if !maps.Equal(got, want) {
		r.t.Errorf("observe: toolkits %v, want %v", got, want)
	}
	for release := range want {
		if _, ok := pkgs["cuda-toolkit-"+strings.ReplaceAll(release, ".", "-")]; !ok {
			r.t.Errorf("dpkg: no cuda-toolkit for %s", release)
		}
	}
}

// NVIDIA's toolkit packages make /usr/local/cuda an alternatives link to
// the release they install and configure the loader for it
// (planner/compat/nvidiarepo/toolkit.go, with its sources). Here packages
// that do so with the root's own update-alternatives, and whose loader
// files ldconfig reads: plan predicts the link and the loader's paths,
// and once apply is done observe reads what was predicted; doctor's
// cuda.default and cuda.loader then hold, and the next plan has nothing
// to say of them.
func TestToolkitLinkAndLoaderArePredicted(t *testing.T) {
	r := h.NewRoot(t, Base, Mounts{Proc: true})
	tk := cudaToolkit("12.4", "12.4.1", "12.4.1-1")
	tk.Files["/usr/local/cuda-12.4/targets/x86_64-linux/lib/libcudart.so.12.4.127"] = "not a library: CUDA runtime 12.4.127\n"
	tk.Depends = "cuda-toolkit-12-config-common, cuda-toolkit-config-common"
	tk.Postinst = `#!/bin/sh
set -e
if [ "$1" = configure ]; then
	update-alternatives --install /usr/local/cuda cuda /usr/local/cuda-12.4 12
	update-alternatives --install /usr/local/cuda-12 cuda-12 /usr/local/cuda-12.4 12
fi
`
	tk.Prerm = `#!/bin/sh
set -e
if [ "$1" = remove ]; then
	update-alternatives --remove cuda /usr/local/cuda-12.4
	update-alternatives --remove cuda-12 /usr/local/cuda-12.4
fi
`
	r.AddRepository(cudaRepo, []Deb{tk,
		{Name: "cuda-toolkit-config-common", Version: "12.4.127-1", Files: map[string]string{
			"/etc/ld.so.conf.d/000_cuda.conf": "/usr/local/cuda/targets/x86_64-linux/lib\n"}},
		{Name: "cuda-toolkit-12-config-common", Version: "12.4.127-1", Files: map[string]string{
			"/etc/ld.so.conf.d/988_cuda-12.conf": "/usr/local/cuda-12/targets/x86_64-linux/lib\n"}},
	})
	r.WriteFile("/root/cuda/gpuenv.hcl", cudaSpec("12.4.1"))
	_, predicted, after := r.applyPredicted("/root/cuda")
	if predicted.CUDA.Default != "/usr/local/cuda-12.4" || after.CUDA.Default != predicted.CUDA.Default {
		t.Errorf("/usr/local/cuda: predicted %q, observed after apply %q; want /usr/local/cuda-12.4", predicted.CUDA.Default, after.CUDA.Default)
	}
	if diff := cmp.Diff(predicted.Environment.LoaderPaths, after.Environment.LoaderPaths); diff != "" {
		t.Errorf("the loader's paths: predicted and observed after apply differ (-predicted +observed):\n%s", diff)
	}
	if !slices.ContainsFunc(after.Environment.LoaderPaths, func(lp facts.LoaderPath) bool { return lp.File == "/etc/ld.so.conf.d/988_cuda-12.conf" }) {
		t.Errorf("observed loader paths %+v: the packages' files were not read", after.Environment.LoaderPaths)
	}
	res := r.Gpuenv("doctor", "--json")
	var rep struct {
		Checks []struct{ ID, Status string }
	}
	if err := json.Unmarshal([]byte(res.Stdout), &rep); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, res)
	}
	for _, id := range []string{"cuda.default", "cuda.loader"} {
		if i := slices.IndexFunc(rep.Checks, func(c struct{ ID, Status string }) bool { return c.ID == id }); i < 0 || rep.Checks[i].Status != "ok" {
			t.Errorf("doctor after apply: %s %+v, want ok", id, rep.Checks)
		}
	}
	res = r.Gpuenv("plan", "--json", "/root/cuda")
	if strings.Contains(res.Stdout, `"check": "cuda.default"`) || strings.Contains(res.Stdout, `"check": "cuda.loader"`) || !strings.Contains(res.Stdout, `"steps": []`) {
		t.Errorf("plan after apply: want no steps and nothing of the link or the loader; %s", res)
	}
}
