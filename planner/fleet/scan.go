package fleet

import (
	"bytes"
	"encoding/json"
	"hash/maphash"
	"strconv"
	"strings"
)

// A fleet holds a few dozen kinds of host, and hosts of one kind plan
// alike: the planner is a function of the facts it reads and of the
// spec. So a document is first scanned, not decoded: the scan digests
// the document as it goes, and a host whose digest was planned already
// takes that plan without its observation ever being built.
//
// The digest covers every byte of the document but what planning never
// reads, left out so that hosts of one kind share a digest:
//
//   - "hostname" (its value; that the key is there is digested, since a
//     document without it is of an older minor and says so in its row);
//   - "packages"."total", the size of the package database, which only
//     gpuenv init reads;
//   - "last_apply", which is no fact of the observation at all: a
//     collector's note of the host's last apply (gather.yml adds it),
//     which --canaries reads.
//
// TestDigestLeavesOutOnlyWhatPlanningIgnores proves each of them unread
// by planning. Everything else is digested, the fact sections a saved
// plan's fingerprint leaves out included: the fingerprint ignores what
// changes by the minute (running processes, module reference counts),
// but the planner reads them (whether a module reload must wait for a
// reboot), so two hosts that differ in them may plan differently.
//
// Whitespace between tokens is not digested, so a document written
// indented or compact digests the same; any other difference of bytes
// is a different digest. Two documents of one digest therefore read
// (but for the three values above) as the same tokens, which decode to
// the same observation, or fail to decode alike: a document that does
// not decode is never planned from another's digest (planOnce keeps no
// such entry). Where the scan meets anything it does not read plainly (a
// key spelled with escapes or in another case, a key twice, a value of
// the wrong type where it reads one) it gives up, and the document is
// decoded and planned on its own, as every document once was.

// scanned is what the scan of one document found.
type scanned struct {
	// ok is false when the document must be decoded on its own.
	ok     bool
	digest digest
	// hostname is the document's hostname ("" when it has none).
	hostname string
	// lastApply is the value of "last_apply", nil when there is none.
	lastApply []byte
}

// Top-level keys the scan treats apart.
const (
	keyHostname  = "hostname"
	keyPackages  = "packages"
	keyTotal     = "total"
	keyLastApply = "last_apply"
)

// digest is a document's digest: two 64-bit hashes of the bytes digested,
// seeded apart. It is never written anywhere: it only tells documents
// apart within one run, where the seeds, drawn at random as the process
// starts, cannot be known to whoever wrote the documents. The two
// together make a collision among a fleet's documents as unlikely as a
// sha256 one would be at that size, at a tenth of sha256's cost, which
// was half the scan's.
type digest [2]uint64

var digestSeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

// hasher feeds both hashes.
type hasher struct{ a, b maphash.Hash }

func newHasher() *hasher {
	h := new(hasher)
	h.a.SetSeed(digestSeeds[0])
	h.b.SetSeed(digestSeeds[1])
	return h
}

func (h *hasher) Write(p []byte) (int, error) {
	h.a.Write(p)
	h.b.Write(p)
	return len(p), nil
}

func (h *hasher) sum() digest { return digest{h.a.Sum64(), h.b.Sum64()} }

type scanner struct {
	data []byte
	i    int
	h    *hasher
	// mark is where the bytes not yet digested begin, -1 when nothing
	// is being digested.
	mark int
}

// scanDocument scans one document.
func scanDocument(data []byte) scanned {
	s := scanner{data: data, h: newHasher(), mark: -1}
	var out scanned
	if !s.object(true, &out) {
		return scanned{}
	}
	s.ws()
	if s.i != len(s.data) {
		return scanned{}
	}
	out.ok = true
	out.digest = s.h.sum()
	return out
}

// object reads the object at s.i, the document's (top) or its
// "packages", member by member, digesting all it keeps with separators
// of its own, so that a member left out leaves no trace.
func (s *scanner) object(top bool, out *scanned) bool {
	s.ws()
	if !s.byte('{') {
		return false
	}
	s.h.Write([]byte{'{'})
	seen := 0
	const sawHostname, sawPackages, sawTotal, sawLastApply = 1, 2, 4, 8
	s.ws()
	if s.peek() == '}' {
		s.i++
		s.h.Write([]byte{'}'})
		return true
	}
	for {
		s.ws()
		kstart := s.i
		if s.peek() != '"' || !s.str() {
			return false
		}
		raw := s.data[kstart:s.i]
		key := raw[1 : len(raw)-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			// An escaped key may spell one read apart here.
			return false
		}
		s.ws()
		if !s.byte(':') {
			return false
		}
		s.ws()
		k := string(key)
		special := func(name string, bit int) (bool, bool) {
			if k == name {
				if seen&bit != 0 {
					return true, false
				}
				seen |= bit
				return true, true
			}
			// encoding/json matches a key to a field in any case: a key
			// that could be the same field under another spelling is not
			// the scan's to judge.
			if strings.EqualFold(k, name) {
				return true, false
			}
			return false, true
		}
		var is, fine bool
		switch {
		case top:
			if is, fine = special(keyHostname, sawHostname); is {
				if !fine || !s.hostname(out) {
					return false
				}
				s.h.Write(raw)
				s.h.Write([]byte(":\x00,"))
				break
			}
			if is, fine = special(keyLastApply, sawLastApply); is {
				start := s.i
				if !fine || !s.value(false) {
					return false
				}
				out.lastApply = s.data[start:s.i]
				if !json.Valid(out.lastApply) {
					return false
				}
				break
			}
			if is, fine = special(keyPackages, sawPackages); is {
				if !fine {
					return false
				}
				s.h.Write(raw)
				s.h.Write([]byte{':'})
				if s.peek() == '{' {
					if !s.object(false, out) {
						return false
					}
				} else if !s.value(true) {
					return false
				}
				s.h.Write([]byte{','})
				break
			}
			fallthrough
		default:
			if !top {
				if is, fine = special(keyTotal, sawTotal); is {
					if !fine || !s.integer() {
						return false
					}
					break
				}
			}
			s.h.Write(raw)
			s.h.Write([]byte{':'})
			if !s.value(true) {
				return false
			}
			s.h.Write([]byte{','})
		}
		s.ws()
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			s.h.Write([]byte{'}'})
			return true
		default:
			return false
		}
	}
}

// hostname reads the value of "hostname": a string or null.
func (s *scanner) hostname(out *scanned) bool {
	if s.literal("null") {
		return true
	}
	start := s.i
	if s.peek() != '"' || !s.str() {
		return false
	}
	raw := s.data[start:s.i]
	inner := raw[1 : len(raw)-1]
	plain := true
	for _, c := range inner {
		if c < 0x20 || c == '\\' || c >= 0x80 {
			plain = false
			break
		}
	}
	if plain {
		out.hostname = string(inner)
		return true
	}
	// Escapes, control characters and other encodings are decoded (or
	// refused) as the full decoder would.
	return json.Unmarshal(raw, &out.hostname) == nil
}

// integer reads a JSON integer that fits an int, or null: what
// encoding/json decodes into Packages.Total without an error.
func (s *scanner) integer() bool {
	if s.literal("null") {
		return true
	}
	start := s.i
	for s.i < len(s.data) && (s.data[s.i] == '-' || s.data[s.i] >= '0' && s.data[s.i] <= '9') {
		s.i++
	}
	lit := s.data[start:s.i]
	if len(lit) == 0 || len(lit) > 1 && lit[0] == '0' || len(lit) > 2 && lit[0] == '-' && lit[1] == '0' {
		return false
	}
	_, err := strconv.ParseInt(string(lit), 10, strconv.IntSize)
	return err == nil
}

// literal reads word when it is next.
func (s *scanner) literal(word string) bool {
	if bytes.HasPrefix(s.data[s.i:], []byte(word)) {
		s.i += len(word)
		return true
	}
	return false
}

// value passes over one value, digesting it without the whitespace
// between its tokens when digest is set. It checks no more than where
// the value ends: the bytes digested are the judge of the rest.
func (s *scanner) value(digest bool) bool {
	if digest {
		s.mark = s.i
	}
	depth := 0
	for s.i < len(s.data) {
		switch c := s.data[s.i]; c {
		case '"':
			if !s.str() {
				return false
			}
			if depth == 0 {
				return s.done(digest)
			}
		case '{', '[':
			depth++
			s.i++
		case '}', ']':
			if depth == 0 {
				return s.done(digest)
			}
			depth--
			s.i++
			if depth == 0 {
				return s.done(digest)
			}
		case ',', ':':
			if depth == 0 {
				return s.done(digest)
			}
			s.i++
		case ' ', '\t', '\n', '\r':
			if depth == 0 {
				return s.done(digest)
			}
			// Whitespace between two bytes of a number or a word would
			// part two tokens that digest as one.
			if s.i > 0 && scalarByte(s.data[s.i-1]) {
				end := s.i
				s.ws()
				if s.i < len(s.data) && scalarByte(s.data[s.i]) {
					return false
				}
				if digest {
					s.h.Write(s.data[s.mark:end])
					s.mark = s.i
				}
				continue
			}
			if digest {
				s.h.Write(s.data[s.mark:s.i])
			}
			s.ws()
			if digest {
				s.mark = s.i
			}
		default:
			s.i++
		}
	}
	return false
}

// done digests what remains of the value that ends at s.i.
func (s *scanner) done(digest bool) bool {
	if digest {
		s.h.Write(s.data[s.mark:s.i])
		s.mark = -1
	}
	return true
}

// scalarByte is a byte of a number or of true, false, null.
func scalarByte(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '+' || c == '.'
}

// str passes over the string that starts at s.i, to its closing quote.
func (s *scanner) str() bool {
	j := s.i + 1
	for {
		k := bytes.IndexByte(s.data[j:], '"')
		if k < 0 {
			return false
		}
		j += k
		// A quote after an odd number of backslashes is escaped.
		n := 0
		for p := j - 1; p > s.i && s.data[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			s.i = j + 1
			return true
		}
		j++
	}
}

func (s *scanner) ws() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) peek() byte {
	if s.i < len(s.data) {
		return s.data[s.i]
	}
	return 0
}

func (s *scanner) byte(c byte) bool {
	if s.peek() == c {
		s.i++
		return true
	}
	return false
}
