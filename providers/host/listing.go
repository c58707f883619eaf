package host

import (
	"bytes"
	"encoding/binary"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"
	"unsafe"
)

// direntBufs are buffers for getdents64, as large as the os package's.
var direntBufs = sync.Pool{New: func() any { b := make([]byte, 8<<10); return &b }}

// Where the fields of a getdents64 record lie.
const (
	direntIno    = unsafe.Offsetof(syscall.Dirent{}.Ino)
	direntReclen = unsafe.Offsetof(syscall.Dirent{}.Reclen)
	direntType   = unsafe.Offsetof(syscall.Dirent{}.Type)
	direntName   = unsafe.Offsetof(syscall.Dirent{}.Name)
)

// eachDirent calls fn with the name and d_type of each entry of buf,
// getdents64 records, but "." and "..". name is only valid during the
// call.
func eachDirent(buf []byte, fn func(name []byte, typ uint8)) {
	for len(buf) > int(direntName) {
		reclen := int(binary.NativeEndian.Uint16(buf[direntReclen:]))
		if reclen <= int(direntName) || reclen > len(buf) {
			return
		}
		rec := buf[:reclen]
		buf = buf[reclen:]
		if binary.NativeEndian.Uint64(rec[direntIno:]) == 0 {
			continue // deleted, as the os package skips them
		}
		name := rec[direntName:]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		if string(name) == "." || string(name) == ".." {
			continue
		}
		fn(name, rec[direntType])
	}
}

// scan calls fn with each entry of the directory p, cleaned and absolute.
// A listing that fits in one read is kept for the rest of the pass; a
// larger one is read again when asked for again: a big directory is
// listed for one pattern, and keeping it would cost more memory than
// reading it again costs time.
func (c *dirfds) scan(p string, fn func(name []byte, typ uint8)) error {
	d := c.dir(p)
	defer c.put(d)
	return c.list(d, p, fn)
}

func (c *dirfds) list(d *dirFD, p string, fn func(name []byte, typ uint8)) error {
	switch {
	case d.fd < 0:
		return &fs.PathError{Op: "open", Path: c.name(p), Err: d.err}
	case d.listErr != 0:
		return &fs.PathError{Op: "open", Path: c.name(p), Err: d.listErr}
	case d.list != nil:
		eachDirent(d.list, fn)
		return nil
	}
	if d.moved {
		if _, err := syscall.Seek(d.fd, 0, 0); err != nil {
			return &fs.PathError{Op: "seek", Path: c.name(p), Err: err}
		}
	}
	d.moved = true
	bp := direntBufs.Get().(*[]byte)
	defer direntBufs.Put(bp)
	var last []byte
	reads := 0
	for {
		n, err := syscall.ReadDirent(d.fd, *bp)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return &fs.PathError{Op: "readdirent", Path: c.name(p), Err: err}
		}
		if n <= 0 {
			break
		}
		reads++
		last = (*bp)[:n]
		eachDirent(last, fn)
	}
	if reads <= 1 {
		// The read that returned nothing left the buffer as it was.
		d.list = append([]byte{}, last...)
	} else {
		d.big = true
	}
	return nil
}

// readDir is Host.ReadDir for p, cleaned and absolute.
func (c *dirfds) readDir(h *Host, p string) ([]fs.DirEntry, error) {
	d := c.dir(p)
	defer c.put(d)
	type entry struct {
		end  int
		mode fs.FileMode
	}
	var names strings.Builder
	var ents []entry
	var lerr error
	err := c.list(d, p, func(name []byte, typ uint8) {
		mode, ok := direntMode(typ)
		if !ok && lerr == nil {
			// The file system does not say: ask, as os.ReadDir does.
			var st syscall.Stat_t
			switch err := fstatat(d.fd, string(name), &st); err {
			case nil:
				mode = fileMode(st.Mode).Type()
			case syscall.ENOENT:
				return // gone since it was listed
			default:
				lerr = &fs.PathError{Op: "lstat", Path: c.name(path.Join(p, string(name))), Err: err}
			}
		}
		names.Write(name)
		ents = append(ents, entry{names.Len(), mode})
	})
	if err == nil {
		err = lerr
	}
	if err != nil {
		return nil, err
	}
	all := names.String()
	entries := make([]dirEntry, len(ents))
	out := make([]fs.DirEntry, len(ents))
	start := 0
	for i, e := range ents {
		entries[i] = dirEntry{h: h, dir: p, name: all[start:e.end], mode: e.mode}
		out[i] = &entries[i]
		start = e.end
	}
	slices.SortFunc(out, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return out, nil
}

// dirEntry is an entry of an observation handle's directory listing.
type dirEntry struct {
	h    *Host
	dir  string
	name string
	mode fs.FileMode // type bits only
}

func (e *dirEntry) Name() string               { return e.name }
func (e *dirEntry) IsDir() bool                { return e.mode.IsDir() }
func (e *dirEntry) Type() fs.FileMode          { return e.mode }
func (e *dirEntry) Info() (fs.FileInfo, error) { return e.h.Lstat(path.Join(e.dir, e.name)) }
func (e *dirEntry) String() string             { return fs.FormatDirEntry(e) }

// appendMatches appends to matches the paths of the entries of the
// directory p that match pattern, a valid path.Match pattern without
// "/". Only names that could match become strings: a large directory
// searched for a few names (libnvidia-ml.so.* among a thousand
// libraries) costs no allocation per entry.
func (c *dirfds) appendMatches(matches []string, p, pattern string) []string {
	prefix, suffix := literalEnds(pattern)
	c.scan(p, func(name []byte, _ uint8) {
		if len(name) < len(prefix)+len(suffix) || !bytes.HasPrefix(name, []byte(prefix)) || !bytes.HasSuffix(name, []byte(suffix)) {
			return
		}
		if ok, _ := path.Match(pattern, string(name)); ok {
			matches = append(matches, join(p, string(name)))
		}
	})
	return matches
}

// literalEnds returns what every name pattern matches starts and ends
// with: the text before its first special character and after its last.
func literalEnds(pattern string) (prefix, suffix string) {
	const special = `*?[]\`
	i := strings.IndexAny(pattern, special)
	if i < 0 {
		return pattern, ""
	}
	return pattern[:i], pattern[strings.LastIndexAny(pattern, special)+1:]
}
