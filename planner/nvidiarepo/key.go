package nvidiarepo

import (
	"bytes"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// MaxKeySize bounds a key file: NVIDIA's are a few KiB.
const MaxKeySize = 1 << 20

// ReadKey parses an OpenPGP public key file, armored or binary, as apt's
// gpgv and rpm read it, and returns its packets in binary form (what gpg
// --dearmor writes) and the fingerprint of every primary key in it,
// upper-case hex.
//
// It is a small parser of gpuenv's own rather than an OpenPGP library:
// the gpuenv binary runs as root on every host and links no PGP
// implementation (deploy/package's dependency test holds it to that), and
// a fingerprint needs only the packet framing of RFC 4880 section 4.2 and
// the version 4 fingerprint of section 12.2: SHA-1 over 0x99, the public
// key packet's two-byte length and its body. Everything else is checked
// strictly instead of skipped: every packet must frame exactly, the file
// may hold only public key material (keys, subkeys, user IDs and
// attributes, signatures, trust), and a primary key of a version other
// than 4 (whose fingerprint is computed otherwise) is refused, so that
// apt never trusts a key in the file that gpuenv did not check. The tests
// check it against ProtonMail's go-crypto, an independent implementation.
func ReadKey(data []byte) (binary []byte, fingerprints []string, err error) {
	if len(data) > MaxKeySize {
		return nil, nil, fmt.Errorf("the key file is %d bytes, more than the %d a public key takes", len(data), MaxKeySize)
	}
	binary = data
	if trimmed := bytes.TrimSpace(data); bytes.HasPrefix(trimmed, []byte("-----BEGIN ")) {
		if binary, err = dearmor(trimmed); err != nil {
			return nil, nil, err
		}
	}
	for rest := binary; len(rest) > 0; {
		tag, body, next, err := nextPacket(rest)
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
			h := sha1.New()
			h.Write([]byte{0x99, byte(len(body) >> 8), byte(len(body))})
			h.Write(body)
			fingerprints = append(fingerprints, strings.ToUpper(fmt.Sprintf("%x", h.Sum(nil))))
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

// The packet types of a public key file (RFC 4880 section 4.3).
const (
	tagSignature     = 2
	tagPublicKey     = 6
	tagTrust         = 12
	tagUserID        = 13
	tagPublicSubkey  = 14
	tagUserAttribute = 17
)

// nextPacket splits the first OpenPGP packet off data: its type, its body
// and what follows it. Partial (streamed) lengths, which only data
// packets may use, and an indeterminate length are refused.
func nextPacket(data []byte) (tag int, body, rest []byte, err error) {
	h := data[0]
	if h&0x80 == 0 {
		return 0, nil, nil, fmt.Errorf("byte %#02x does not start a packet", h)
	}
	var n uint64
	off := 1
	if h&0x40 != 0 { // new format
		tag = int(h & 0x3f)
		if len(data) < 2 {
			return 0, nil, nil, errors.New("truncated packet header")
		}
		switch l := data[1]; {
		case l < 192:
			n, off = uint64(l), 2
		case l < 224:
			if len(data) < 3 {
				return 0, nil, nil, errors.New("truncated packet header")
			}
			n, off = (uint64(l)-192)<<8+uint64(data[2])+192, 3
		case l == 255:
			if len(data) < 6 {
				return 0, nil, nil, errors.New("truncated packet header")
			}
			n, off = uint64(binary.BigEndian.Uint32(data[2:6])), 6
		default:
			return 0, nil, nil, errors.New("a partial body length, which key material never has")
		}
	} else { // old format
		tag = int(h>>2) & 0x0f
		switch h & 3 {
		case 0:
			if len(data) < 2 {
				return 0, nil, nil, errors.New("truncated packet header")
			}
			n, off = uint64(data[1]), 2
		case 1:
			if len(data) < 3 {
				return 0, nil, nil, errors.New("truncated packet header")
			}
			n, off = uint64(binary.BigEndian.Uint16(data[1:3])), 3
		case 2:
			if len(data) < 5 {
				return 0, nil, nil, errors.New("truncated packet header")
			}
			n, off = uint64(binary.BigEndian.Uint32(data[1:5])), 5
		default:
			return 0, nil, nil, errors.New("an indeterminate packet length")
		}
	}
	if n > uint64(len(data)-off) {
		return 0, nil, nil, fmt.Errorf("a packet of %d bytes where %d are left", n, len(data)-off)
	}
	return tag, data[off : off+int(n)], data[off+int(n):], nil
}

const (
	armorBegin = "-----BEGIN PGP PUBLIC KEY BLOCK-----"
	armorEnd   = "-----END PGP PUBLIC KEY BLOCK-----"
)

// dearmor decodes an ASCII-armored public key block (RFC 4880 section
// 6.2), checking its CRC-24 where it has one.
func dearmor(text []byte) ([]byte, error) {
	lines := strings.Split(strings.ReplaceAll(string(text), "\r\n", "\n"), "\n")
	if strings.TrimSpace(lines[0]) != armorBegin {
		return nil, fmt.Errorf("the key file is a %q, not a PGP PUBLIC KEY BLOCK", strings.TrimSpace(lines[0]))
	}
	i := 1
	// Armor headers ("Version: …") end at the first empty line.
	for ; i < len(lines) && strings.TrimSpace(lines[i]) != ""; i++ {
		if !strings.Contains(lines[i], ": ") {
			break // no headers: the data starts here
		}
	}
	var b64, crc strings.Builder
	ended := false
	for ; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		switch {
		case l == "":
		case l == armorEnd:
			ended = true
		case strings.HasPrefix(l, "="):
			crc.WriteString(l[1:])
		default:
			b64.WriteString(l)
		}
		if ended {
			break
		}
	}
	if !ended {
		return nil, errors.New("the key file's armor has no END line")
	}
	data, err := base64.StdEncoding.DecodeString(b64.String())
	if err != nil {
		return nil, fmt.Errorf("the key file's armor does not decode: %w", err)
	}
	if crc.Len() > 0 {
		sum, err := base64.StdEncoding.DecodeString(crc.String())
		if err != nil || len(sum) != 3 {
			return nil, errors.New("the key file's armor checksum does not decode")
		}
		if got := crc24(data); uint32(sum[0])<<16|uint32(sum[1])<<8|uint32(sum[2]) != got {
			return nil, errors.New("the key file's armor checksum does not match its data")
		}
	}
	return data, nil
}

// crc24 is the armor checksum of RFC 4880 section 6.1.
func crc24(data []byte) uint32 {
	crc := uint32(0xb704ce)
	for _, b := range data {
		crc ^= uint32(b) << 16
		for range 8 {
			crc <<= 1
			if crc&0x1000000 != 0 {
				crc ^= 0x1864cfb
			}
		}
	}
	return crc & 0xffffff
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
// without headers, with its checksum: the form rpm --import reads.
func Armor(binary []byte) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(armorBegin + "\n\n")
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
	b.WriteString(armorEnd + "\n")
	return b.Bytes(), nil
}

// NormalizeFingerprint writes a fingerprint as the table does: upper-case
// hex without spaces.
func NormalizeFingerprint(f string) string {
	return strings.ToUpper(strings.ReplaceAll(f, " ", ""))
}

// CheckFingerprint reports whether f is a full version 4 fingerprint: 40
// upper-case hex digits.
func CheckFingerprint(f string) error {
	if len(f) != 40 {
		return fmt.Errorf("fingerprint %q is not 40 hex digits", f)
	}
	for _, c := range f {
		if !(c >= '0' && c <= '9' || c >= 'A' && c <= 'F') {
			return fmt.Errorf("fingerprint %q is not upper-case hex", f)
		}
	}
	return nil
}
