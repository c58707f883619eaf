// Package ldcache reads and writes the dynamic loader's cache,
// /etc/ld.so.cache, in the format glibc's ldconfig writes and ld.so reads
// ("glibc-ld.so.cache1.1", optionally after the old "ld.so-1.7.0"
// table), so that gpuenv knows which file a soname resolves to from the
// cache itself rather than from the configuration ldconfig last read.
//
// Write exists so that fixture roots can hold a real cache; it is checked
// against ldconfig's own output.
package ldcache

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

const (
	magicNew   = "glibc-ld.so.cache"
	versionNew = "1.1"
	magicOld   = "ld.so-1.7.0"
	// headerNew is the size of struct cache_file_new before its entries.
	headerNew = 48
	entryNew  = 24
	entryOld  = 12
	// flagELFLibc6 is FLAG_ELF_LIBC6, the type of every glibc library.
	flagELFLibc6 = 0x0003
	// hwcapExtension marks an entry for a glibc-hwcaps subdirectory
	// (DL_CACHE_HWCAP_EXTENSION).
	hwcapExtension = uint64(1) << 62
)

// Arch flags (FLAG_*_LIB64 and friends, dl-cache.h): the cache holds
// libraries of several ABIs, and ld.so takes only its own.
const (
	ArchNone    uint32 = 0
	ArchX8664   uint32 = 0x0300
	ArchPPC64   uint32 = 0x0500
	ArchAArch64 uint32 = 0x0a00
	ArchRISCV64 uint32 = 0x1000
)

// ArchFlag is the flag of a uname -m architecture ("x86_64", "aarch64").
func ArchFlag(arch string) uint32 {
	switch arch {
	case "x86_64", "amd64":
		return ArchX8664
	case "aarch64", "arm64":
		return ArchAArch64
	case "ppc64le", "ppc64":
		return ArchPPC64
	case "riscv64":
		return ArchRISCV64
	}
	return ArchNone
}

// Entry is one library in the cache.
type Entry struct {
	// Soname is the name programs ask for ("libcudart.so.12").
	Soname string
	// Path is where ldconfig found it.
	Path string
	// Flags are the type (low byte) and ABI (ArchX8664 …) bits.
	Flags uint32
	// HWCap is non-zero for a library of a glibc-hwcaps subdirectory.
	HWCap uint64
}

// Arch is the entry's ABI flag.
func (e Entry) Arch() uint32 { return e.Flags & 0xff00 }

// Cache is a parsed ld.so.cache.
type Cache struct {
	Entries []Entry
}

// Lookup returns the path ld.so takes for soname on arch (an Arch flag;
// ArchNone matches entries without one): the first entry of the cache for
// it that is not a glibc-hwcaps variant, else the first hwcaps one.
func (c *Cache) Lookup(soname string, arch uint32) (string, bool) {
	hw := ""
	for _, e := range c.Entries {
		if e.Soname != soname || e.Arch() != arch {
			continue
		}
		if e.HWCap&hwcapExtension == 0 {
			return e.Path, true
		}
		if hw == "" {
			hw = e.Path
		}
	}
	return hw, hw != ""
}

// Dirs returns the directories the cache holds libraries from, in first
// appearance order.
func (c *Cache) Dirs() []string {
	var out []string
	seen := map[string]bool{}
	for _, e := range c.Entries {
		i := bytes.LastIndexByte([]byte(e.Path), '/')
		if i <= 0 {
			continue
		}
		d := e.Path[:i]
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out
}

// ErrFormat is wrapped by Parse's errors.
var ErrFormat = errors.New("not an ld.so.cache")

// Parse reads a cache in the new format, or in the old format followed by
// the new one (glibc before 2.32 wrote both by default).
func Parse(data []byte) (*Cache, error) {
	off := 0
	if bytes.HasPrefix(data, []byte(magicOld)) {
		if len(data) < 16 {
			return nil, fmt.Errorf("%w: old header cut short", ErrFormat)
		}
		n := binary.LittleEndian.Uint32(data[12:16])
		end := 16 + uint64(n)*entryOld
		// The new table follows, aligned as struct cache_file_new is.
		end = (end + 7) &^ 7
		if end > uint64(len(data)) {
			return nil, fmt.Errorf("%w: old table of %d entries runs past the end", ErrFormat, n)
		}
		off = int(end)
		if !bytes.HasPrefix(data[off:], []byte(magicNew)) {
			// An old-format-only cache: its string offsets are relative to
			// the string table after the entries.
			return parseOld(data, n)
		}
	}
	d := data[off:]
	if !bytes.HasPrefix(d, []byte(magicNew+versionNew)) {
		return nil, fmt.Errorf("%w: no %q header", ErrFormat, magicNew+versionNew)
	}
	if len(d) < headerNew {
		return nil, fmt.Errorf("%w: header cut short", ErrFormat)
	}
	var bo binary.ByteOrder = binary.LittleEndian
	if d[28] == 3 {
		bo = binary.BigEndian
	}
	n := bo.Uint32(d[20:24])
	if uint64(headerNew)+uint64(n)*entryNew > uint64(len(d)) {
		return nil, fmt.Errorf("%w: %d entries run past the end", ErrFormat, n)
	}
	c := &Cache{Entries: make([]Entry, 0, n)}
	for i := range int(n) {
		e := d[headerNew+i*entryNew:]
		key, err := cstring(d, bo.Uint32(e[4:8]))
		if err != nil {
			return nil, err
		}
		val, err := cstring(d, bo.Uint32(e[8:12]))
		if err != nil {
			return nil, err
		}
		c.Entries = append(c.Entries, Entry{Soname: key, Path: val, Flags: bo.Uint32(e[0:4]), HWCap: bo.Uint64(e[16:24])})
	}
	return c, nil
}

func parseOld(data []byte, n uint32) (*Cache, error) {
	strs := 16 + int(n)*entryOld
	c := &Cache{Entries: make([]Entry, 0, n)}
	for i := range int(n) {
		e := data[16+i*entryOld:]
		key, err := cstring(data[strs:], binary.LittleEndian.Uint32(e[4:8]))
		if err != nil {
			return nil, err
		}
		val, err := cstring(data[strs:], binary.LittleEndian.Uint32(e[8:12]))
		if err != nil {
			return nil, err
		}
		c.Entries = append(c.Entries, Entry{Soname: key, Path: val, Flags: binary.LittleEndian.Uint32(e[0:4])})
	}
	return c, nil
}

func cstring(d []byte, off uint32) (string, error) {
	if uint64(off) >= uint64(len(d)) {
		return "", fmt.Errorf("%w: string offset %d past the end", ErrFormat, off)
	}
	s := d[off:]
	i := bytes.IndexByte(s, 0)
	if i < 0 {
		return "", fmt.Errorf("%w: unterminated string at %d", ErrFormat, off)
	}
	return string(s[:i]), nil
}

// Write encodes entries as a new-format, little-endian cache, sorted as
// ldconfig sorts them (ld.so's binary search depends on the order).
// Entries' Flags get the libc6 type when they carry none.
func Write(entries []Entry) []byte {
	es := slices.Clone(entries)
	for i := range es {
		if es[i].Flags&0xff == 0 {
			es[i].Flags |= flagELFLibc6
		}
	}
	slices.SortStableFunc(es, func(a, b Entry) int {
		// ldconfig's compare(): names in reverse libcmp order, then flags
		// and hwcap descending.
		if c := libcmp(b.Soname, a.Soname); c != 0 {
			return c
		}
		if a.Flags != b.Flags {
			if a.Flags > b.Flags {
				return -1
			}
			return 1
		}
		switch {
		case a.HWCap > b.HWCap:
			return -1
		case a.HWCap < b.HWCap:
			return 1
		}
		return 0
	})
	strStart := headerNew + len(es)*entryNew
	var strs bytes.Buffer
	offs := map[string]uint32{}
	str := func(s string) uint32 {
		if o, ok := offs[s]; ok {
			return o
		}
		o := uint32(strStart + strs.Len())
		strs.WriteString(s)
		strs.WriteByte(0)
		offs[s] = o
		return o
	}
	out := make([]byte, strStart)
	copy(out, magicNew+versionNew)
	le := binary.LittleEndian
	le.PutUint32(out[20:], uint32(len(es)))
	out[28] = 2 // little endian
	for i, e := range es {
		b := out[headerNew+i*entryNew:]
		le.PutUint32(b[0:], e.Flags)
		le.PutUint32(b[4:], str(e.Soname))
		le.PutUint32(b[8:], str(e.Path))
		le.PutUint64(b[16:], e.HWCap)
	}
	le.PutUint32(out[24:], uint32(strs.Len()))
	return append(out, strs.Bytes()...)
}

// libcmp is glibc's _dl_cache_libcmp: runs of digits compare as numbers,
// so that libfoo.so.10 sorts after libfoo.so.9.
func libcmp(a, b string) int {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		ca, cb := a[i], b[j]
		if isDigit(ca) {
			if !isDigit(cb) {
				return 1
			}
			na, nb := 0, 0
			for i < len(a) && isDigit(a[i]) {
				na = na*10 + int(a[i]-'0')
				i++
			}
			for j < len(b) && isDigit(b[j]) {
				nb = nb*10 + int(b[j]-'0')
				j++
			}
			if na != nb {
				if na < nb {
					return -1
				}
				return 1
			}
			continue
		}
		if isDigit(cb) {
			return -1
		}
		if ca != cb {
			if ca < cb {
				return -1
			}
			return 1
		}
		i++
		j++
	}
	switch {
	case i < len(a):
		return 1
	case j < len(b):
		return -1
	}
	return 0
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
