package nvidiarepo

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// MaxKeySize bounds a key file: NVIDIA's are a few KiB.
const MaxKeySize = 1 << 20

// ReadKey parses an OpenPGP public key file, armored or binary, as
// apt's gpgv and rpm read it, and returns its packets in binary form
// (what gpg --dearmor writes) and the fingerprint of every primary key in
// it, upper-case hex. Every packet must parse: a key file with a packet
// gpuenv cannot read is refused rather than half checked, as apt would
// trust a key in it that gpuenv did not see.
//
// The parsing is ProtonMail's go-crypto, an OpenPGP implementation made
// for it (the fork of golang.org/x/crypto/openpgp that keeps up with RFC
// 9580), rather than a parser of gpuenv's own: the fingerprint is the
// whole basis of trust here, and version 4, 5 and 6 keys compute it
// differently.
func ReadKey(data []byte) (binary []byte, fingerprints []string, err error) {
	if len(data) > MaxKeySize {
		return nil, nil, fmt.Errorf("the key file is %d bytes, more than the %d a public key takes", len(data), MaxKeySize)
	}
	binary = data
	if trimmed := bytes.TrimSpace(data); bytes.HasPrefix(trimmed, []byte("-----BEGIN ")) {
		block, err := armor.Decode(bytes.NewReader(trimmed))
		if err != nil {
			return nil, nil, fmt.Errorf("the key file is not valid OpenPGP armor: %w", err)
		}
		if block.Type != "PGP PUBLIC KEY BLOCK" {
			return nil, nil, fmt.Errorf("the key file holds a %q, not a PGP PUBLIC KEY BLOCK", block.Type)
		}
		if binary, err = io.ReadAll(io.LimitReader(block.Body, MaxKeySize)); err != nil {
			return nil, nil, fmt.Errorf("the key file's armor does not decode: %w", err)
		}
	}
	r := packet.NewReader(bytes.NewReader(binary))
	for {
		p, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("the key file has a packet gpuenv cannot read: %w", err)
		}
		pk, ok := p.(*packet.PublicKey)
		if !ok || pk.IsSubkey {
			continue
		}
		fingerprints = append(fingerprints, strings.ToUpper(fmt.Sprintf("%x", pk.Fingerprint)))
	}
	if len(fingerprints) == 0 {
		return nil, nil, errors.New("the key file holds no OpenPGP public key")
	}
	return binary, fingerprints, nil
}

// VerifyKey checks that a key file holds exactly the key with fingerprint
// want and nothing else, and returns its binary form. The error names the
// fingerprints found and the one wanted.
func VerifyKey(data []byte, want string) ([]byte, error) {
	binary, fprs, err := ReadKey(data)
	if err != nil {
		return nil, err
	}
	want = NormalizeFingerprint(want)
	for _, f := range fprs {
		if f != want {
			return nil, &MismatchError{Got: fprs, Want: want}
		}
	}
	return binary, nil
}

// MismatchError is a key file whose keys are not the pinned one.
type MismatchError struct {
	Got  []string
	Want string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("the key file holds the key %s, and gpuenv's table pins %s", strings.Join(e.Got, " and "), e.Want)
}

// Armor writes binary key packets as an ASCII-armored public key block
// without headers, the form rpm --import reads.
func Armor(binary []byte) ([]byte, error) {
	var b bytes.Buffer
	w, err := armor.Encode(&b, "PGP PUBLIC KEY BLOCK", nil)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(binary); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	b.WriteByte('\n')
	return b.Bytes(), nil
}

// NormalizeFingerprint writes a fingerprint as the table does: upper-case
// hex without spaces.
func NormalizeFingerprint(f string) string {
	return strings.ToUpper(strings.ReplaceAll(f, " ", ""))
}

// CheckFingerprint reports whether f is a full fingerprint: 40 hex digits
// (version 4) or 64 (versions 5 and 6).
func CheckFingerprint(f string) error {
	if len(f) != 40 && len(f) != 64 {
		return fmt.Errorf("fingerprint %q is not 40 or 64 hex digits", f)
	}
	for _, c := range f {
		if !(c >= '0' && c <= '9' || c >= 'A' && c <= 'F') {
			return fmt.Errorf("fingerprint %q is not upper-case hex", f)
		}
	}
	return nil
}
