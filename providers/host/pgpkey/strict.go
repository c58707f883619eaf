package pgpkey

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// The packet types a public key file may hold besides primary keys (RFC
// 9580 §5): signatures, trust, user IDs and attributes, subkeys.
const (
	tagSignature     = 2
	tagTrust         = 12
	tagUserID        = 13
	tagPublicSubkey  = 14
	tagUserAttribute = 17
)

// ReadKey reads a public key file that gpuenv is about to make apt or dnf
// trust, armored or binary, and returns its packets in binary form (what
// gpg --dearmor writes) and the fingerprint of every primary key in it.
//
// Fingerprints names the keys of any keyring, skipping what it does not
// need; ReadKey is strict instead, so that the package manager never
// trusts a key in the file that gpuenv did not check: every packet must
// frame exactly, the file may hold only public key material, and a primary
// key must be of version 4, the version NVIDIA's keys are, whose
// fingerprint is SHA-1 over 0x99, the packet's two-byte length and its
// body. gpuenv links no OpenPGP library (the package's dependency test
// holds the binary to that); the tests check this reader against
// ProtonMail's go-crypto, an independent implementation.
func ReadKey(data []byte) (binary []byte, fingerprints []string, err error) {
	if len(data) > MaxKeyring {
		return nil, nil, fmt.Errorf("the key file is %d bytes, more than the %d a public key takes", len(data), MaxKeyring)
	}
	binary = data
	if trimmed := bytes.TrimSpace(data); bytes.HasPrefix(trimmed, []byte("-----BEGIN ")) {
		if binary, err = dearmor(trimmed); err != nil {
			return nil, nil, err
		}
	}
	for rest := binary; len(rest) > 0; {
		tag, body, next, err := packet(rest)
		if err != nil {
			return nil, nil, fmt.Errorf("the key file is not OpenPGP key material: %w", err)
		}
		rest = next
		switch tag {
		case tagPublicKey:
			if len(body) < 6 || body[0] != 4 {
				v := 0
				if len(body) > 0 {
					v = int(body[0])
				}
				return nil, nil, fmt.Errorf("the key file holds a version %d key; gpuenv checks version 4 keys, as NVIDIA's are", v)
			}
			fp, err := fingerprint(body)
			if err != nil {
				return nil, nil, err
			}
			fingerprints = append(fingerprints, fp)
		case tagSignature, tagTrust, tagUserID, tagPublicSubkey, tagUserAttribute:
		default:
			return nil, nil, fmt.Errorf("the key file holds a packet of type %d, which is not public key material", tag)
		}
	}
	if len(fingerprints) == 0 {
		return nil, nil, errors.New("the key file holds no OpenPGP public key")
	}
	return binary, fingerprints, nil
}

// VerifyKey checks that a key file holds exactly the key with fingerprint
// want (gpg's spaced form is accepted) and nothing else, and returns its
// binary form. The error names the fingerprints found and the one wanted.
func VerifyKey(data []byte, want string) ([]byte, error) {
	binary, fprs, err := ReadKey(data)
	if err != nil {
		return nil, err
	}
	want = strings.ToUpper(strings.ReplaceAll(want, " ", ""))
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
// without headers, with its checksum: the form rpm --import reads.
func Armor(binary []byte) []byte {
	var b bytes.Buffer
	b.WriteString(armorHeader + "\n\n")
	enc := base64.StdEncoding.EncodeToString(binary)
	for len(enc) > 64 {
		b.WriteString(enc[:64] + "\n")
		enc = enc[64:]
	}
	if enc != "" {
		b.WriteString(enc + "\n")
	}
	c := crc24(binary)
	b.WriteString("=" + base64.StdEncoding.EncodeToString([]byte{byte(c >> 16), byte(c >> 8), byte(c)}) + "\n")
	b.WriteString("-----END PGP PUBLIC KEY BLOCK-----\n")
	return b.Bytes()
}
