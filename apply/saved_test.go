package apply_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/apply"
	"github.com/gpuenv/gpuenv/apply/applytest"
)

// savedDeb is the package file generation gen saved for name, on this
// machine and inside the root.
func (fx *testHost) savedDeb(gen int, name string) (local, inRoot string) {
	fx.t.Helper()
	m, _ := filepath.Glob(filepath.Join(fx.root, stateDir, "generations", strconv.Itoa(gen), "packages", "*-"+name, name+"_*.deb"))
	if len(m) != 1 {
		fx.t.Fatalf("generation %d saved %d package files of %s: %v", gen, len(m), name, m)
	}
	rel, _ := filepath.Rel(fx.root, m[0])
	return m[0], "/" + filepath.ToSlash(rel)
}

// garble writes garbage over a saved file, as a disk error or a stray
// write would, and returns its SHA-256.
func garble(t *testing.T, p string) string {
	t.Helper()
	junk := []byte(strings.Repeat("not a package file\n", 40))
	if err := os.WriteFile(p, junk, 0o600); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(junk)
	return hex.EncodeToString(sum[:])
}

func fileSum(t *testing.T, p string) string {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// A saved package file with garbage over it, of a version the archive
// still has: the rollback notices before installing anything, fetches the
// version again from the archive and ends with the host as it was.
func TestCorruptSavedDebIsFetchedAgain(t *testing.T) {
	fx := newFixture(t)
	before := fx.snapshot()
	fx.applies(applytest.StandardPlan(fx.Index))
	local, inRoot := fx.savedDeb(1, "nvidia-smi")
	if !strings.Contains(fx.read(stateDir+"/generations/1/journal"), `"sha256":"`+fileSum(t, local)+`"`) {
		t.Errorf("the journal does not record the SHA-256 of %s", inRoot)
	}
	garble(t, local)
	res := fx.rollback(-1)
	if res.Status != apply.StatusDone {
		t.Fatalf("rollback: %s %+v\n%s", res.Status, res.RevertFailed, fx.out.String())
	}
	if out := fx.out.String(); !strings.Contains(out, inRoot+", is corrupt") || !strings.Contains(out, "fetched it again from the archive") {
		t.Errorf("the rollback does not say that it fetched %s again:\n%s", inRoot, out)
	}
	fx.same(before, "after a rollback from a package file fetched again")
}

// The same garbage over a file the archive no longer has (the fixture's
// archive lost libnvidia-ml1's old version, which was rebuilt from dpkg's
// records): the rollback installs nothing, fails (exit 3) naming the file,
// the digest it must have and what to do instead of telling the user to
// roll back again; once the file is put back, rollback finishes.
func TestCorruptSavedDebTheArchiveLacks(t *testing.T) {
	fx := newFixture(t)
	before := fx.snapshot()
	fx.applies(applytest.StandardPlan(fx.Index))
	local, inRoot := fx.savedDeb(1, "libnvidia-ml1")
	good, err := os.ReadFile(local)
	if err != nil {
		t.Fatal(err)
	}
	want := fileSum(t, local)
	got := garble(t, local)
	applied := fx.read("/var/lib/dpkg/status")
	for range 2 {
		res := fx.rollback(-1)
		if res.Status != apply.StatusFailed || res.ExitCode() != apply.ExitAttention || res.RevertFailed == nil {
			t.Fatalf("rollback: want it failed (exit 3); %s exit %d %+v\n%s", res.Status, res.ExitCode(), res.RevertFailed, fx.out.String())
		}
		msg := res.RevertFailed.Error
		for _, w := range []string{inRoot, "libnvidia-ml1 " + applytest.DriverOld, "is corrupt", "SHA-256 is " + got, want, "apt-get download libnvidia-ml1=" + applytest.DriverOld, "install libnvidia-ml1 " + applytest.DriverOld + " by hand"} {
			if !strings.Contains(msg, w) {
				t.Errorf("the failure does not say %q:\n%s", w, msg)
			}
		}
		if !strings.Contains(res.RevertFailed.Fix, "replace the saved package file") {
			t.Errorf("the failure's advice is %q, want how to replace the file", res.RevertFailed.Fix)
		}
		if fx.read("/var/lib/dpkg/status") != applied {
			t.Fatalf("the failed rollback changed dpkg's database:\n%s", fx.out.String())
		}
	}
	if err := os.WriteFile(local, good, 0o600); err != nil {
		t.Fatal(err)
	}
	fx.rollsBack(before, "after a rollback with the saved package file put back")
}

// The same for dnf: a corrupt saved .rpm is downloaded again while a
// repository has the version; once none has, the rollback installs
// nothing and names the file, and finishes once it is put back.
func TestCorruptSavedRPM(t *testing.T) {
	fx := newRPMFixture(t)
	before := fx.snapshot()
	fx.applies(applytest.DnfPlan())
	m, _ := filepath.Glob(filepath.Join(fx.root, stateDir, "generations", "1", "packages", "*", "*.rpm"))
	if len(m) == 0 {
		t.Fatal("the apply saved no .rpm")
	}
	local := m[0]
	rel, _ := filepath.Rel(fx.root, local)
	inRoot := "/" + filepath.ToSlash(rel)
	good, err := os.ReadFile(local)
	if err != nil {
		t.Fatal(err)
	}
	garble(t, local)
	res := fx.rollback(-1)
	if res.Status != apply.StatusDone || !strings.Contains(fx.out.String(), inRoot+", is corrupt") || !strings.Contains(fx.out.String(), "downloaded it again from the repositories") {
		t.Fatalf("rollback: want it done from the file downloaded again; %s %+v\n%s", res.Status, res.RevertFailed, fx.out.String())
	}
	fx.same(before, "after a rollback from a package file downloaded again")

	fx.applies(applytest.DnfPlan())
	m, _ = filepath.Glob(filepath.Join(fx.root, stateDir, "generations", "3", "packages", "*", filepath.Base(local)))
	if len(m) != 1 {
		t.Fatalf("the second apply saved %v", m)
	}
	local = m[0]
	rel, _ = filepath.Rel(fx.root, local)
	inRoot = "/" + filepath.ToSlash(rel)
	got := garble(t, local)
	if err := os.RemoveAll(fx.Repo); err != nil {
		t.Fatal(err)
	}
	res = fx.rollback(-1)
	if res.Status != apply.StatusFailed || res.RevertFailed == nil || res.RevertFailed.Fix == "" {
		t.Fatalf("rollback: want it failed with what to do; %s %+v\n%s", res.Status, res.RevertFailed, fx.out.String())
	}
	for _, w := range []string{inRoot, "is corrupt", "SHA-256 is " + got, "dnf download"} {
		if !strings.Contains(res.RevertFailed.Error, w) {
			t.Errorf("the failure does not say %q:\n%s", w, res.RevertFailed.Error)
		}
	}
	if err := os.WriteFile(local, good, 0o600); err != nil {
		t.Fatal(err)
	}
	fx.rollsBack(before, "after a rollback with the saved .rpm put back")
}
