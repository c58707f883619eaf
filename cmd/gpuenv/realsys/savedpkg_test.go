//go:build realsystem

package realsys

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// A saved package file with garbage over it, with real apt and dpkg.
// While the local repository still has the old driver, rollback fetches
// it again and restores the old files byte for byte. Once the repository
// has dropped that version, rollback installs nothing and exits 3 naming
// the file, the SHA-256 it must have and what to do (apply refuses
// meanwhile); with the file put back, rollback finishes.
func TestCorruptSavedPackageRollback(t *testing.T) {
	r := h.NewRoot(t, Base, Mounts{Proc: true})
	r.AddRepository(cudaRepo, nvidiaRepository())
	r.WriteFile("/root/nvidia/gpuenv.hcl", nvidiaSpec("550.54.*", "12.4", true))
	if res := r.Gpuenv("apply", "--auto-approve", "/root/nvidia"); res.Code != 0 {
		t.Fatalf("apply: %s", res)
	}
	upgrade := func(gen int) (local, inRoot string) {
		t.Helper()
		r.WriteFile("/root/nvidia/gpuenv.hcl", nvidiaSpec("550.90.*", "12.4", true))
		if res := r.Gpuenv("apply", "--auto-approve", "/root/nvidia"); res.Code != 0 {
			t.Fatalf("apply of the upgrade: %s", res)
		}
		r.checkNvidiaDriver(nvidiaDriverNew)
		m, _ := filepath.Glob(r.Path("/var/lib/gpuenv/generations/" + strconv.Itoa(gen) + "/packages/*-nvidia-driver-cuda/nvidia-driver-cuda_" + nvidiaDriverOld + "_*.deb"))
		if len(m) != 1 {
			t.Fatalf("generation %d saved %v for nvidia-driver-cuda %s", gen, m, nvidiaDriverOld)
		}
		rel, _ := filepath.Rel(r.Dir, m[0])
		return m[0], "/" + rel
	}

	// The archive still has the version: fetched again.
	local, inRoot := upgrade(2)
	garbleFile(t, local)
	res := r.Gpuenv("rollback", "--auto-approve")
	if res.Code != 0 || !strings.Contains(res.Stdout, inRoot+", is corrupt") || !strings.Contains(res.Stdout, "fetched it again from the archive") {
		t.Fatalf("rollback: want exit 0, the file fetched again; %s", res)
	}
	r.checkNvidiaDriver(nvidiaDriverOld)
	r.checkDriverFiles(nvidiaDriverOld)

	// The repository drops the old version (its lists refreshed): the
	// file cannot be had again.
	local, inRoot = upgrade(4)
	good, err := os.ReadFile(local)
	if err != nil {
		t.Fatal(err)
	}
	goodSum := sha256.Sum256(good)
	bad := garbleFile(t, local)
	r.dropFromRepository(cudaRepo, nvidiaDriverOld)
	before := r.Dpkg()
	res = r.Gpuenv("rollback", "--auto-approve")
	msg := strings.Join(strings.Fields(res.Stdout), " ")
	for _, want := range []string{
		inRoot + ", is corrupt", "its SHA-256 is " + bad, "recorded when it was saved as " + hex.EncodeToString(goodSum[:]),
		"no package index lists nvidia-driver-cuda " + nvidiaDriverOld + " any more",
		"The host needs attention: replace the saved package file named above",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("rollback does not say %q", want)
		}
	}
	if res.Code != 3 || strings.Contains(res.Stdout, "run gpuenv rollback to finish reverting") {
		t.Fatalf("rollback of a corrupt file the archive lacks: want exit 3 and the file to replace; %s", res)
	}
	if after := r.Dpkg(); !maps.Equal(before, after) {
		t.Errorf("the failed rollback changed dpkg's database")
	}
	if res := r.Gpuenv("apply", "--auto-approve", "/root/nvidia"); res.Code != 1 || !strings.Contains(res.Stderr, "unfinished") {
		t.Errorf("apply while the rollback is unfinished: want it refused; %s", res)
	}
	if err := os.WriteFile(local, good, 0o600); err != nil {
		t.Fatal(err)
	}
	if res := r.Gpuenv("rollback", "--auto-approve"); res.Code != 0 {
		t.Fatalf("rollback with the file put back: %s", res)
	}
	r.checkNvidiaDriver(nvidiaDriverOld)
	r.checkDriverFiles(nvidiaDriverOld)
	if audit := r.MustSh("dpkg --audit"); strings.TrimSpace(audit) != "" {
		t.Errorf("dpkg --audit after the rollback:\n%s", audit)
	}
}

// garbleFile writes garbage over p and returns its SHA-256.
func garbleFile(t *testing.T, p string) string {
	t.Helper()
	junk := []byte(strings.Repeat("not a package file\n", 64))
	if err := os.WriteFile(p, junk, 0o600); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(junk)
	return hex.EncodeToString(sum[:])
}

// checkDriverFiles asserts that the driver's files are those of version,
// byte for byte.
func (r *Root) checkDriverFiles(version string) {
	r.t.Helper()
	for _, d := range nvidiaDriver(version) {
		for p, want := range d.Files {
			got, err := os.ReadFile(r.Path(p))
			if err != nil || string(got) != want {
				r.t.Errorf("%s: %q (%v), want %q", p, got, err, want)
			}
		}
	}
}

// dropFromRepository removes every package at version from the flat
// repository at dir, indexes it again and refreshes apt's lists of it.
func (r *Root) dropFromRepository(dir, version string) {
	r.t.Helper()
	m, _ := filepath.Glob(filepath.Join(r.Path(dir), "*_"+version+"_*.deb"))
	if len(m) == 0 {
		r.t.Fatalf("%s has no package at %s", dir, version)
	}
	for _, f := range m {
		if err := os.Remove(f); err != nil {
			r.t.Fatal(err)
		}
	}
	scan := exec.Command("dpkg-scanpackages", "--multiversion", ".")
	scan.Dir = r.Path(dir)
	packages, err := scan.Output()
	if err != nil {
		r.t.Fatalf("dpkg-scanpackages: %v", err)
	}
	if err := os.WriteFile(filepath.Join(r.Path(dir), "Packages"), packages, 0o644); err != nil {
		r.t.Fatal(err)
	}
	r.UseRepository(filepath.Base(dir), "file://"+dir)
}
