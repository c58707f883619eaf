// Package pgpkey reads the OpenPGP keyrings package managers trust (apt's
// Signed-By files, dnf's gpgkey files) far enough to name their keys by
// fingerprint: the one name of a key that an attacker cannot give
// another key. It verifies nothing; apt and rpm check signatures. A
// keyring is a sequence of OpenPGP packets (RFC 9580 §4), binary as
// `gpg --export` writes it or ASCII-armored as `gpg --armor --export`
// does (§6); gpuenv needs only the primary public-key packets in it.
package pgpkey

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// MaxKeyring bounds the keyrings read: a keyring of a few keys is a few
// KiB, and the Debian archive's, among the largest, under 100 KiB.
const MaxKeyring = 1 << 20

// tagPublicKey is the packet tag of a primary public key (RFC 9580
// §5.5.1.1); subkeys (tag 14) are not what a fingerprint check names.
const tagPublicKey = 6

const armorHeader = "-----BEGIN PGP PUBLIC KEY BLOCK-----"

// Fingerprints returns the fingerprints of the primary keys in a keyring,
// in upper-case hex without spaces as gpg --with-colons prints them, in
// the order of the keyring, each once.
func Fingerprints(data []byte) ([]string, error) {
	if len(data) > MaxKeyring {
		return nil, fmt.Errorf("the keyring is %d bytes, more than the %d a keyring of public keys takes", len(data), MaxKeyring)
	}
	if t := bytes.TrimLeft(data, " \t\r\n"); bytes.HasPrefix(t, []byte("-----BEGIN PGP")) {
		var err error
		if data, err = dearmor(t); err != nil {
			return nil, err
		}
	} else if len(data) >= 12 && string(data[8:12]) == "KBXf" {
		return nil, errors.New("the file is a GnuPG keybox (pubring.kbx), which apt and rpm cannot read; export the key with gpg --export")
	}
	if len(data) == 0 {
		return nil, errors.New("the keyring is empty")
	}
	var out []string
	for len(data) > 0 {
		tag, body, rest, err := packet(data)
		if err != nil {
			return nil, err
		}
		data = rest
		if tag != tagPublicKey {
			continue
		}
		fp, err := fingerprint(body)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(out, fp) {
			out = append(out, fp)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("the keyring holds no public key")
	}
	return out, nil
}

// packet splits the first packet off data (RFC 9580 §4.2): its tag, its
// body and what follows it.
func packet(data []byte) (tag int, body, rest []byte, err error) {
	h := data[0]
	if h&0x80 == 0 {
		return 0, nil, nil, errors.New("not an OpenPGP keyring: a packet header lacks its first bit")
	}
	var n, hdr int
	if h&0x40 != 0 {
		tag = int(h & 0x3f)
		if len(data) < 2 {
			return 0, nil, nil, errTruncated
		}
		switch o := int(data[1]); {
		case o < 192:
			n, hdr = o, 2
		case o < 224:
			if len(data) < 3 {
				return 0, nil, nil, errTruncated
			}
			n, hdr = (o-192)<<8+int(data[2])+192, 3
		case o == 255:
			if len(data) < 6 {
				return 0, nil, nil, errTruncated
			}
			n, hdr = int(binary.BigEndian.Uint32(data[2:6])), 6
		default:
			// Partial body lengths are for literal and encrypted data,
			// never for a key.
			return 0, nil, nil, errors.New("not an OpenPGP keyring: a packet of partial length")
		}
	} else {
		tag = int(h>>2) & 0x0f
		switch h & 3 {
		case 0:
			hdr = 2
		case 1:
			hdr = 3
		case 2:
			hdr = 5
		default:
			return 0, nil, nil, errors.New("not an OpenPGP keyring: a packet of indeterminate length")
		}
		if len(data) < hdr {
			return 0, nil, nil, errTruncated
		}
		for _, b := range data[1:hdr] {
			n = n<<8 | int(b)
		}
	}
	if n < 0 || n > len(data)-hdr {
		return 0, nil, nil, errTruncated
	}
	return tag, data[hdr : hdr+n], data[hdr+n:], nil
}

var errTruncated = errors.New("the keyring is truncated: a packet is longer than the file")

// fingerprint is a public-key packet's fingerprint (RFC 9580 §5.5.4):
// SHA-1 over the packet for version 4, SHA-256 for versions 5 and 6.
func fingerprint(body []byte) (string, error) {
	if len(body) == 0 {
		return "", errTruncated
	}
	var sum []byte
	switch v := body[0]; v {
	case 4:
		h := sha1.New()
		h.Write([]byte{0x99, byte(len(body) >> 8), byte(len(body))})
		h.Write(body)
		sum = h.Sum(nil)
	case 5, 6:
		h := sha256.New()
		prefix := byte(0x9a)
		if v == 6 {
			prefix = 0x9b
		}
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(body)))
		h.Write([]byte{prefix})
		h.Write(n[:])
		h.Write(body)
		sum = h.Sum(nil)
	default:
		return "", fmt.Errorf("a version %d key, which gpuenv cannot fingerprint (versions 4, 5 and 6 are)", v)
	}
	return strings.ToUpper(hex.EncodeToString(sum)), nil
}

// dearmor decodes the first ASCII-armored public-key block of text
// (RFC 9580 §6.2): headers up to a blank line, base64, an optional
// "=" CRC-24 line, and the end line; a CRC that does not match is an
// error, as the text was changed.
func dearmor(text []byte) ([]byte, error) {
	lines := strings.Split(strings.ReplaceAll(string(text), "\r\n", "\n"), "\n")
	if strings.TrimSpace(lines[0]) != armorHeader {
		return nil, fmt.Errorf("the armored block is %q, not a public key block", strings.TrimSpace(lines[0]))
	}
	i := 1
	for ; i < len(lines) && strings.TrimSpace(lines[i]) != ""; i++ {
		if !strings.Contains(lines[i], ":") {
			// No header lines: the data starts at once (some writers
			// leave out the blank line).
			break
		}
	}
	var b64, crc strings.Builder
	ended := false
	for ; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		switch {
		case l == "":
		case strings.HasPrefix(l, "-----END PGP PUBLIC KEY BLOCK-----"):
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
		return nil, errors.New("the armored key has no END line: it is truncated")
	}
	data, err := base64.StdEncoding.DecodeString(b64.String())
	if err != nil {
		return nil, fmt.Errorf("the armored key's base64 is damaged: %v", err)
	}
	if crc.Len() > 0 {
		want, err := base64.StdEncoding.DecodeString(crc.String())
		if err != nil || len(want) != 3 {
			return nil, errors.New("the armored key's checksum line is damaged")
		}
		if got := crc24(data); got != uint32(want[0])<<16|uint32(want[1])<<8|uint32(want[2]) {
			return nil, errors.New("the armored key does not match its checksum: it was changed or damaged")
		}
	}
	return data, nil
}

// crc24 is the armor checksum of RFC 9580 §6.1.
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
