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

// The parser agrees with go-crypto on an RSA key (NVIDIA's keys are RSA),
// whatever header format gpg wrote its packets in; a key of version 6,
// whose fingerprint is computed otherwise, is refused rather than
// misread.
func TestReadKeyAgreesWithGoCrypto(t *testing.T) {
	e, err := openpgp.NewEntity("rsa", "", "rsa@gpuenv.invalid", &packet.Config{Algorithm: packet.PubKeyAlgoRSA, RSABits: 2048})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := e.Serialize(&b); err != nil {
		t.Fatal(err)
	}
	want := strings.ToUpper(hex.EncodeToString(e.PrimaryKey.Fingerprint))
	// The same packets with old-format headers and four-byte lengths.
	var old bytes.Buffer
	for rest := b.Bytes(); len(rest) > 0; {
		tag, body, next, err := nextPacket(rest)
		if err != nil {
			t.Fatal(err)
		}
		old.WriteByte(0x80 | byte(tag)<<2 | 2)
		old.Write([]byte{byte(len(body) >> 24), byte(len(body) >> 16), byte(len(body) >> 8), byte(len(body))})
		old.Write(body)
		rest = next
	}
	for name, data := range map[string][]byte{"new format": b.Bytes(), "old format": old.Bytes()} {
		if _, fprs, err := ReadKey(data); err != nil || len(fprs) != 1 || fprs[0] != want {
			t.Errorf("%s: %v %v, want [%s]", name, fprs, err, want)
		}
	}
	// What Armor writes, go-crypto reads, checksum and all.
	a, _ := Armor(b.Bytes())
	el, err := openpgp.ReadArmoredKeyRing(bytes.NewReader(a))
	if err != nil || len(el) != 1 || !bytes.Equal(el[0].PrimaryKey.Fingerprint, e.PrimaryKey.Fingerprint) {
		t.Errorf("go-crypto reads Armor's output as %v, %v", el, err)
	}
	// A corrupted armor checksum is refused.
	bad := bytes.Replace(a, []byte("\n="), []byte("\n=AAAA\n="), 1)
	if _, _, err := ReadKey(bad); err == nil {
		t.Error("an armor whose checksum does not match is accepted")
	}

	v6, err := openpgp.NewEntity("v6", "", "v6@gpuenv.invalid", &packet.Config{V6Keys: true, Algorithm: packet.PubKeyAlgoEd25519})
	if err != nil {
		t.Fatal(err)
	}
	var b6 bytes.Buffer
	if err := v6.Serialize(&b6); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadKey(b6.Bytes()); err == nil || !strings.Contains(err.Error(), "version 6") {
		t.Errorf("a version 6 key: %v, want a refusal naming its version", err)
	}
}
