package pgpkey

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const (
	cudaFP  = "7D5AB3C8EA6E6296C742F6104948E0156F695994"
	otherFP = "8E48DF5BF0BD1A8947BE2652DC1F376763516D09"
)

func readKey(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "testdata", "keys", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// The fixtures' keys give the fingerprints gpg printed for them
// (testdata/keys/README.md): binary and armored, one key and two.
func TestFingerprints(t *testing.T) {
	for name, want := range map[string][]string{
		"fixture-cuda.gpg":  {cudaFP},
		"fixture-other.asc": {otherFP},
		"fixture-both.gpg":  {cudaFP, otherFP},
	} {
		got, err := Fingerprints(readKey(t, name))
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%s: %v, %v; want %v", name, got, err, want)
		}
	}
}

// A key gpg makes now, in each of its export forms, gets the fingerprint
// gpg itself reports for it.
func TestFingerprintsAgreeWithGPG(t *testing.T) {
	gpg, err := exec.LookPath("gpg")
	if err != nil {
		t.Skip("gpg not installed")
	}
	home := t.TempDir()
	run := func(args ...string) []byte {
		cmd := exec.Command(gpg, append([]string{"--batch", "--homedir", home}, args...)...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("gpg %v: %v", args, err)
		}
		return out
	}
	run("--passphrase", "", "--quick-gen-key", "test <test@gpuenv.invalid>", "rsa1024", "sign", "never")
	var want string
	for _, l := range strings.Split(string(run("--with-colons", "--list-keys")), "\n") {
		if f := strings.Split(l, ":"); f[0] == "fpr" && want == "" {
			want = f[9]
		}
	}
	for _, form := range [][]string{{"--export"}, {"--armor", "--export"}, {"--export-options", "export-minimal", "--export"}} {
		got, err := Fingerprints(run(form...))
		if err != nil || !slices.Equal(got, []string{want}) {
			t.Errorf("gpg %v: %v, %v; want %s", form, got, err, want)
		}
	}
}

// Damaged, truncated or foreign files are refused with a reason, never
// given a fingerprint.
func TestFingerprintsRefuse(t *testing.T) {
	bin := readKey(t, "fixture-cuda.gpg")
	arm := readKey(t, "fixture-other.asc")
	// Change one base64 character of the armored data (not the
	// checksum line): the CRC-24 no longer matches.
	lines := strings.Split(string(arm), "\n")
	for i, l := range lines {
		if i > 2 && len(l) > 10 && !strings.HasPrefix(l, "=") {
			c := "A"
			if l[5] == 'A' {
				c = "B"
			}
			lines[i] = l[:5] + c + l[6:]
			break
		}
	}
	keybox := append(make([]byte, 8), []byte("KBXf....")...)
	for name, tc := range map[string]struct {
		data []byte
		want string
	}{
		"empty":     {nil, "empty"},
		"truncated": {bin[:len(bin)-10], "truncated"},
		"text":      {[]byte("key\n"), "not an OpenPGP keyring"},
		"changed":   {[]byte(strings.Join(lines, "\n")), "checksum"},
		"no end":    {arm[:bytes.Index(arm, []byte("-----END"))], "no END line"},
		"keybox":    {keybox, "keybox"},
		"private":   {[]byte("-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nabc\n-----END PGP PRIVATE KEY BLOCK-----\n"), "not a public key block"},
		"too big":   {make([]byte, MaxKeyring+1), "more than"},
	} {
		got, err := Fingerprints(tc.data)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, %v; want an error saying %q", name, got, err, tc.want)
		}
	}
}

// BenchmarkFingerprints reads a binary keyring of two keys and an
// armored one, as observation reads each keyring of a host.
func BenchmarkFingerprints(b *testing.B) {
	bin, err := os.ReadFile(filepath.Join("..", "..", "..", "testdata", "keys", "fixture-both.gpg"))
	if err != nil {
		b.Fatal(err)
	}
	arm, err := os.ReadFile(filepath.Join("..", "..", "..", "testdata", "keys", "fixture-other.asc"))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Fingerprints(bin); err != nil {
			b.Fatal(err)
		}
		if _, err := Fingerprints(arm); err != nil {
			b.Fatal(err)
		}
	}
}
