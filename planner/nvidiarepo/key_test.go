package nvidiarepo

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// newKey makes a public key for a test: its binary packets and its
// fingerprint.
func newKey(t *testing.T, name string) ([]byte, string) {
	t.Helper()
	e, err := openpgp.NewEntity(name, "", name+"@gpuenv.invalid", &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := e.Serialize(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes(), strings.ToUpper(hex.EncodeToString(e.PrimaryKey.Fingerprint))
}

func armored(t *testing.T, blockType string, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	w, err := armor.Encode(&b, blockType, map[string]string{"Version": "GnuPG v1"})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(data)
	w.Close()
	return b.Bytes()
}

func TestVerifyKey(t *testing.T) {
	key, fpr := newKey(t, "repository")
	other, otherFpr := newKey(t, "someone else")

	// Binary as apt keeps it, armored as NVIDIA publishes it (with a
	// Version header, which rpm stumbles on).
	for _, data := range [][]byte{key, armored(t, "PGP PUBLIC KEY BLOCK", key)} {
		got, err := VerifyKey(data, fpr)
		if err != nil {
			t.Fatalf("VerifyKey: %v", err)
		}
		if !bytes.Equal(got, key) {
			t.Errorf("VerifyKey returned other bytes than the key's packets")
		}
	}
	// A fingerprint written with spaces, as gpg prints it, is the same.
	if _, err := VerifyKey(key, strings.ToLower(fpr[:4])+" "+fpr[4:]); err != nil {
		t.Errorf("spaced fingerprint: %v", err)
	}

	// Another key is refused, naming both fingerprints.
	_, err := VerifyKey(other, fpr)
	var mm *MismatchError
	if !errors.As(err, &mm) || !strings.Contains(err.Error(), otherFpr) || !strings.Contains(err.Error(), fpr) {
		t.Errorf("another key: %v, want a mismatch naming %s and %s", err, otherFpr, fpr)
	}
	// The pinned key with another beside it is refused too: apt would
	// trust both.
	if _, err := VerifyKey(append(append([]byte{}, key...), other...), fpr); !errors.As(err, &mm) {
		t.Errorf("two keys: %v, want a mismatch", err)
	}

	for name, data := range map[string][]byte{
		"empty":        nil,
		"not OpenPGP":  []byte("<html>404 Not Found</html>\n"),
		"a signature":  armored(t, "PGP SIGNATURE", key),
		"broken armor": []byte("-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n!!!!\n-----END PGP PUBLIC KEY BLOCK-----\n"),
		"truncated":    key[:len(key)/2],
		"too large":    make([]byte, MaxKeySize+1),
	} {
		if _, err := VerifyKey(data, fpr); err == nil || errors.As(err, &mm) {
			t.Errorf("%s: %v, want an error that is not a mismatch", name, err)
		}
	}
}

// Armor writes the key as rpm imports it: no headers, and the same key.
func TestArmorRoundTrip(t *testing.T) {
	key, fpr := newKey(t, "repository")
	a, err := Armor(key)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(a, []byte("-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n")) {
		t.Errorf("armor has headers or another type:\n%s", a)
	}
	if _, fprs, err := ReadKey(a); err != nil || len(fprs) != 1 || fprs[0] != fpr {
		t.Errorf("ReadKey(Armor(key)) = %v, %v; want [%s]", fprs, err, fpr)
	}
}
