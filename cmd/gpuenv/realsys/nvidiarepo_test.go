//go:build realsystem

package realsys

import (
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner/compat/nvidiarepo"
	"github.com/gpuenv/gpuenv/providers/host/pgpkey"
)

// nvidiaRepoDir is the tests' copy of NVIDIA's CUDA repository for Debian
// 12, laid out as NVIDIA's is below its base URL.
const nvidiaRepoDir = "/srv/nvidia/compute/cuda/repos/debian12/x86_64"

// gpuenvForRepo builds gpuenv with the test hook of NVIDIA's repository
// table (the tag gpuenv_testrepo, which no other build has): its debian12
// row names the tests' repository inside the root and the key with
// fingerprint fpr. The binary replaces the root's gpuenv.
func (r *Root) gpuenvForRepo(fpr string) {
	r.t.Helper()
	const pkg = "github.com/gpuenv/gpuenv/planner/compat/nvidiarepo"
	ldflags := fmt.Sprintf("-X %s.testDir=debian12 -X %s.testURL=file://%s/ -X %s.testKeyFile=testkey.pub -X %s.testFingerprint=%s",
		pkg, pkg, nvidiaRepoDir, pkg, pkg, fpr)
	bin := filepath.Join(r.t.TempDir(), "gpuenv")
	if err := r.h.buildLinked(bin, ldflags, "gpuenv_testrepo"); err != nil {
		r.t.Fatal(err)
	}
	r.copyFile(bin, r.Path("/usr/local/bin/gpuenv"), 0o755)
}

// keyFingerprint is the fingerprint of the key file at p inside the root.
func (r *Root) keyFingerprint(p string) string {
	r.t.Helper()
	_, fprs, err := pgpkey.ReadKey(r.readFile(p))
	if err != nil || len(fprs) != 1 {
		r.t.Fatalf("%s: %v %v", p, fprs, err)
	}
	return fprs[0]
}

// aptTrust is every file and directory that decides what apt reads and
// trusts: sources, preferences and keyrings, with their bytes and modes.
func (r *Root) aptTrust() map[string]string {
	r.t.Helper()
	out := map[string]string{}
	for _, dir := range []string{"/etc/apt/sources.list.d", "/etc/apt/preferences.d", "/etc/apt/keyrings", "/etc/apt/trusted.gpg.d", "/usr/share/keyrings"} {
		filepath.WalkDir(r.Path(dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			rel := strings.TrimPrefix(p, r.Dir)
			fi, _ := d.Info()
			if d.IsDir() {
				out[rel] = fmt.Sprintf("dir %v", fi.Mode())
				return nil
			}
			data, _ := os.ReadFile(p)
			out[rel] = fmt.Sprintf("%v %q", fi.Mode(), data)
			return nil
		})
	}
	for _, f := range []string{"/etc/apt/sources.list", "/etc/apt/preferences", "/etc/apt/trusted.gpg"} {
		if data, err := os.ReadFile(r.Path(f)); err == nil {
			out[f] = string(data)
		}
	}
	return out
}

// repoLists are apt's lists of the tests' NVIDIA repository.
func (r *Root) repoLists() []string {
	r.t.Helper()
	entries, _ := os.ReadDir(r.Path("/var/lib/apt/lists"))
	var out []string
	for _, e := range entries {
		if strings.Contains(e.Name(), "srv_nvidia") {
			out = append(out, e.Name())
		}
	}
	return out
}

// Scenario: a fresh Debian 12 root with only Debian's archive and a spec
// that names a CUDA version only. plan adds NVIDIA's repository from
// gpuenv's table (here, through the test build's hook, a copy of it
// signed with a test key); apply checks the key's fingerprint, configures
// the repository and installs the toolkit from it; the next plan has
// nothing to do; rollback leaves packages, sources, preferences and
// keyrings as they were, byte for byte. A key of another fingerprint is
// refused before apt reads the repository.
func TestNVIDIARepositoryFromTable(t *testing.T) {
	r := h.NewRoot(t, Base, Mounts{Proc: true})
	r.BuildRepository(nvidiaRepoDir, []Deb{cudaToolkit("12.4", "12.4.1", "12.4.1-1")})
	r.SignRepository(nvidiaRepoDir, nvidiaRepoDir+"/testkey.pub")
	fpr := r.keyFingerprint(nvidiaRepoDir + "/testkey.pub")
	r.gpuenvForRepo(fpr)

	dpkgBefore, trustBefore := r.Dpkg(), r.aptTrust()
	r.WriteFile("/root/cuda/gpuenv.hcl", "cuda {\n  version = \"12.4.1\"\n}\n")

	res := r.Gpuenv("plan", "--detailed-exitcode", "/root/cuda")
	repoAt, cudaAt := strings.Index(res.Stdout, "# "+nvidiarepo.Address+" will be created"), strings.Index(res.Stdout, "# cuda will be created")
	if res.Code != 2 || repoAt < 0 || cudaAt < repoAt || !strings.Contains(res.Stdout, fpr) {
		t.Fatalf("plan: want %s first, checking the key %s, then cuda; %s", nvidiarepo.Address, fpr, res)
	}
	if res := r.Gpuenv("apply", "--auto-approve", "/root/cuda"); res.Code != 0 {
		t.Fatalf("apply: %s", res)
	}
	if p := r.Dpkg()["cuda-toolkit-12-4"]; p.Status != "installed" || p.Version != "12.4.1-1" {
		t.Errorf("dpkg: cuda-toolkit-12-4 %+v, want 12.4.1-1 installed", p)
	}
	if got := r.keyFingerprint(nvidiarepo.AptKeyring); got != fpr {
		t.Errorf("the keyring holds %s, want %s", got, fpr)
	}
	if res := r.Gpuenv("plan", "--detailed-exitcode", "/root/cuda"); res.Code != 0 || !strings.Contains(res.Stdout, "No changes") {
		t.Errorf("plan after apply: want no changes; %s", res)
	}
	if res := r.Gpuenv("rollback", "--auto-approve"); res.Code != 0 {
		t.Fatalf("rollback: %s", res)
	}
	if after := r.Dpkg(); !maps.Equal(dpkgBefore, after) {
		t.Errorf("dpkg after rollback differs: cuda-toolkit-12-4 %+v", after["cuda-toolkit-12-4"])
	}
	r.sameTrust(trustBefore, "after rollback")

	// The repository now publishes another key: apply refuses it, naming
	// both fingerprints, before apt has read a byte of the repository.
	if err := os.Remove(r.Path(nvidiaRepoDir + "/InRelease")); err != nil {
		t.Fatal(err)
	}
	r.SignRepository(nvidiaRepoDir, "/root/other.pub")
	r.copyFile(r.Path("/root/other.pub"), r.Path(nvidiaRepoDir+"/testkey.pub"), 0o644)
	other := r.keyFingerprint(nvidiaRepoDir + "/testkey.pub")
	for _, f := range r.repoLists() {
		os.Remove(r.Path("/var/lib/apt/lists/" + f))
	}
	res = r.Gpuenv("apply", "--auto-approve", "/root/cuda")
	out := res.Stdout + res.Stderr
	if res.Code != 1 || !strings.Contains(out, other) || !strings.Contains(out, fpr) {
		t.Errorf("apply with another key: want exit 1 naming %s and %s; %s", other, fpr, res)
	}
	if lists := r.repoLists(); len(lists) > 0 {
		t.Errorf("apt fetched the repository although its key was refused: %v", lists)
	}
	if after := r.Dpkg(); !maps.Equal(dpkgBefore, after) {
		t.Errorf("dpkg after the refusal differs")
	}
	r.sameTrust(trustBefore, "after the refusal")
}

// sameTrust fails the test where apt's sources, preferences or keyrings
// differ from before.
func (r *Root) sameTrust(before map[string]string, when string) {
	r.t.Helper()
	after := r.aptTrust()
	for p, v := range after {
		if before[p] != v {
			r.t.Errorf("%s: %s is %.120s, was %.120s", when, p, v, before[p])
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			r.t.Errorf("%s: %s is gone", when, p)
		}
	}
}
