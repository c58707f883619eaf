package pkgindex

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/pierrec/lz4/v4"
)

// lz4Frame decodes an LZ4 frame (the LZ4 Frame Format Description,
// lz4_Frame_format.md) block by block straight into the scan's buffer.
// apt's lz4 lists are written with linked 64 KiB blocks, each of which
// may refer to the 64 KiB decoded before it: decoding in place, with those
// bytes kept in front of the block (scanList keeps them), spares the copy
// a general reader makes of every block from its own window into the
// caller's buffer, a quarter of the time a list of the Debian archive
// takes. Checksums are skipped: apt checked the file against its
// Release file when it fetched it, and a damaged block fails to decode.
type lz4Frame struct {
	r       io.Reader
	in      []byte // compressed bytes read, in[off:] not used yet
	off     int
	eof     bool
	started bool // a frame header was read
	ended   bool // the last frame's end mark was read
	// From the frame descriptor.
	blockMax      int
	blockChecksum bool
	contentCheck  bool
}

const (
	lz4Magic        = 0x184D2204
	lz4SkippableLow = 0x184D2A50
	lz4History      = 64 << 10
)

// need makes at least n unread compressed bytes available, or reports
// that the input ended first.
func (f *lz4Frame) need(n int) error {
	for len(f.in)-f.off < n {
		if f.eof {
			return io.ErrUnexpectedEOF
		}
		if f.off > 0 {
			f.in = f.in[:copy(f.in, f.in[f.off:])]
			f.off = 0
		}
		if cap(f.in)-len(f.in) < n {
			grown := make([]byte, len(f.in), max(2*cap(f.in), n+len(f.in), 256<<10))
			copy(grown, f.in)
			f.in = grown
		}
		m, err := f.r.Read(f.in[len(f.in):cap(f.in)])
		f.in = f.in[:len(f.in)+m]
		if errors.Is(err, io.EOF) {
			f.eof = true
		} else if err != nil {
			return err
		}
	}
	return nil
}

// header reads a frame header, skipping skippable frames; io.EOF when
// the input ends between frames.
func (f *lz4Frame) header() error {
	for {
		if err := f.need(4); err != nil {
			if len(f.in) == f.off && f.started {
				return io.EOF
			}
			return fmt.Errorf("lz4: %w", err)
		}
		magic := binary.LittleEndian.Uint32(f.in[f.off:])
		f.off += 4
		if magic&0xFFFFFFF0 == lz4SkippableLow {
			if err := f.need(4); err != nil {
				return err
			}
			n := int(binary.LittleEndian.Uint32(f.in[f.off:]))
			f.off += 4
			if err := f.need(n); err != nil {
				return err
			}
			f.off += n
			continue
		}
		if magic != lz4Magic {
			return errors.New("lz4: not an lz4 frame")
		}
		if err := f.need(2); err != nil {
			return err
		}
		flg, bd := f.in[f.off], f.in[f.off+1]
		f.off += 2
		if flg>>6 != 1 {
			return fmt.Errorf("lz4: frame version %d", flg>>6)
		}
		f.blockChecksum = flg&0x10 != 0
		f.contentCheck = flg&0x04 != 0
		rest := 1 // the header checksum
		if flg&0x08 != 0 {
			rest += 8 // content size
		}
		if flg&0x01 != 0 {
			rest += 4 // dictionary id
		}
		if err := f.need(rest); err != nil {
			return err
		}
		f.off += rest
		switch (bd >> 4) & 7 {
		case 4:
			f.blockMax = 64 << 10
		case 5:
			f.blockMax = 256 << 10
		case 6:
			f.blockMax = 1 << 20
		case 7:
			f.blockMax = 4 << 20
		default:
			return errors.New("lz4: invalid block size")
		}
		f.started, f.ended = true, false
		return nil
	}
}

// fill decodes blocks into buf[at:] while a whole block fits, buf[:at]
// being what was decoded before (its last 64 KiB at least, where that
// many were). It returns how many bytes it decoded, and io.EOF once the
// input is done.
func (f *lz4Frame) fill(buf []byte, at int) (int, error) {
	n := 0
	for {
		if !f.started || f.ended {
			if err := f.header(); err != nil {
				return n, err
			}
		}
		if len(buf)-at-n < f.blockMax {
			return n, nil
		}
		if err := f.need(4); err != nil {
			return n, err
		}
		size := binary.LittleEndian.Uint32(f.in[f.off:])
		f.off += 4
		if size == 0 {
			f.ended = true
			if f.contentCheck {
				if err := f.need(4); err != nil {
					return n, err
				}
				f.off += 4
			}
			continue
		}
		raw := size&0x80000000 != 0
		size &= 0x7FFFFFFF
		if int(size) > f.blockMax {
			return n, errors.New("lz4: block larger than the frame's block size")
		}
		extra := 0
		if f.blockChecksum {
			extra = 4
		}
		if err := f.need(int(size) + extra); err != nil {
			return n, err
		}
		src := f.in[f.off : f.off+int(size)]
		f.off += int(size) + extra
		pos := at + n
		if raw {
			n += copy(buf[pos:], src)
			continue
		}
		m, err := lz4.UncompressBlockWithDict(src, buf[pos:pos+f.blockMax], buf[max(0, pos-lz4History):pos])
		if err != nil {
			return n, fmt.Errorf("lz4: %w", err)
		}
		n += m
	}
}
