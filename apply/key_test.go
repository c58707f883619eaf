package apply_test

import (
	"bytes"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/gpuenv/gpuenv/apply"
	"github.com/gpuenv/gpuenv/planner/compat/nvidiarepo"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/host/pgpkey"
)

// testKey is a repository key made for a test: its packets, the file a
// repository publishes (armored, with a Version header as NVIDIA's have)
// and its fingerprint.
func testKey(t *testing.T, name string) (binary, published []byte, fpr string) {
	t.Helper()
	e, err := openpgp.NewEntity(name, "", "repo@gpuenv.invalid", &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA})
	if err != nil {
		t.Fatal(err)
	}
	var b, a bytes.Buffer
	if err := e.Serialize(&b); err != nil {
		t.Fatal(err)
	}
	w, _ := armor.Encode(&a, "PGP PUBLIC KEY BLOCK", map[string]string{"Version": "GnuPG v2.0.22 (GNU/Linux)"})
	w.Write(b.Bytes())
	w.Close()
	return b.Bytes(), a.Bytes(), strings.ToUpper(hex.EncodeToString(e.PrimaryKey.Fingerprint))
}

// repoPlan is the step plan makes for NVIDIA's repository: the key, then
// the sources file.
func repoPlan(keyPath, url, fpr string, armored bool) *plan.Plan {
	return &plan.Plan{FormatVersion: plan.FormatVersion, Steps: []plan.Step{{
		Address: nvidiarepo.Address, Action: plan.Create, Reason: "the spec's packages come from NVIDIA's repository",
		Operations: []plan.Operation{
			{Kind: plan.OpFile, File: &plan.FileOp{Path: keyPath, Mode: 0o644, Key: &plan.KeyFetch{URL: url, Fingerprint: fpr, Armored: armored}}},
			{Kind: plan.OpFile, File: &plan.FileOp{Path: nvidiarepo.AptSourcesFile, Mode: 0o644, Content: "Types: deb\nURIs: file:/srv/repo/\nSuites: /\nSigned-By: " + nvidiarepo.AptKeyring + "\n"}},
		},
	}}}
}

func (fx *testHost) put(p string, data []byte) {
	fx.t.Helper()
	full := filepath.Join(fx.root, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		fx.t.Fatal(err)
	}
	if err := os.WriteFile(full, data, 0o644); err != nil {
		fx.t.Fatal(err)
	}
}

// The pinned key, fetched from the repository, is written as apt reads
// a Signed-By keyring (its binary packets) and, for dnf, armored without
// the Version header; rollback removes it and the sources file again.
func TestApplyWritesPinnedKey(t *testing.T) {
	binary, published, fpr := testKey(t, "NVIDIA test repository")

	fx := newFixture(t)
	fx.put("/srv/repo/key.pub", published)
	before := fx.snapshot()
	fx.applies(repoPlan(nvidiarepo.AptKeyring, "file:///srv/repo/key.pub", fpr, false))
	if got := fx.read(nvidiarepo.AptKeyring); got != string(binary) {
		t.Errorf("the keyring holds %d bytes, not the key's %d bytes of packets", len(got), len(binary))
	}
	if !fx.exists(nvidiarepo.AptSourcesFile) {
		t.Errorf("no %s after the key was accepted", nvidiarepo.AptSourcesFile)
	}
	fx.rollsBack(before, "after adding the repository")

	// Over http, armored for rpm.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(published) }))
	defer srv.Close()
	fx = newFixture(t)
	fx.applies(repoPlan(nvidiarepo.DnfKey, srv.URL+"/D42D0685.pub", fpr, true))
	got := fx.read(nvidiarepo.DnfKey)
	if !strings.HasPrefix(got, "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n") || strings.Contains(got, "Version:") {
		t.Errorf("the rpm key is not armored without headers:\n%s", got)
	}
	if _, fprs, err := pgpkey.ReadKey([]byte(got)); err != nil || len(fprs) != 1 || fprs[0] != fpr {
		t.Errorf("the rpm key holds %v (%v), want %s", fprs, err, fpr)
	}
}

// A key with another fingerprint is refused before the sources file is
// written, naming both fingerprints; the host is left as it was.
func TestApplyRefusesAnotherKey(t *testing.T) {
	_, published, fpr := testKey(t, "an impostor")
	_, _, pinned := testKey(t, "NVIDIA test repository")

	fx := newFixture(t)
	fx.put("/srv/repo/key.pub", published)
	before := fx.snapshot()
	res := fx.apply(repoPlan(nvidiarepo.AptKeyring, "file:///srv/repo/key.pub", pinned, false), fx.opts(nil))
	if res.Status != apply.StatusReverted || res.Failed == nil {
		t.Fatalf("status %s, want the apply refused and reverted\n%s", res.Status, fx.out.String())
	}
	for _, want := range []string{fpr, pinned, "refusing the key file:///srv/repo/key.pub"} {
		if !strings.Contains(res.Failed.Error, want) {
			t.Errorf("the error does not name %s: %s", want, res.Failed.Error)
		}
	}
	for _, p := range []string{nvidiarepo.AptKeyring, nvidiarepo.AptSourcesFile} {
		if fx.exists(p) {
			t.Errorf("%s exists after the refusal", p)
		}
	}
	fx.same(before, "after refusing the key")
}

// A plan file is untrusted: a fetched key goes only to gpuenv's own
// keyrings, from an http, https or file URL, against a full fingerprint.
func TestKeyFetchRules(t *testing.T) {
	const fpr = "EB693B3035CD5710E231E123A4B469963BF863CC"
	ok := plan.FileOp{Path: nvidiarepo.AptKeyring, Mode: 0o644, Key: &plan.KeyFetch{URL: "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/3bf863cc.pub", Fingerprint: fpr}}
	if err := plan.CheckOperation(plan.Operation{Kind: plan.OpFile, File: &ok}); err != nil {
		t.Fatalf("the planner's own operation: %v", err)
	}
	for name, mutate := range map[string]func(f *plan.FileOp){
		"another keyring":    func(f *plan.FileOp) { f.Path = "/etc/apt/keyrings/debian.gpg" },
		"a sources file":     func(f *plan.FileOp) { f.Path = nvidiarepo.AptSourcesFile },
		"ftp":                func(f *plan.FileOp) { f.Key.URL = "ftp://example.com/key" },
		"a short key ID":     func(f *plan.FileOp) { f.Key.Fingerprint = "3BF863CC" },
		"content of its own": func(f *plan.FileOp) { f.Content = "key" },
	} {
		f := ok
		k := *ok.Key
		f.Key = &k
		mutate(&f)
		if err := plan.CheckOperation(plan.Operation{Kind: plan.OpFile, File: &f}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
