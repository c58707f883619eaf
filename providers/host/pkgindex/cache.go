package pkgindex

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/gpuenv/gpuenv/internal/safefile"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/pkgdb"
)

// CacheDir holds gpuenv's cache of the relevant stanzas of each list,
// inside the root. It is trusted only as far as a file root wrote can be:
//
//   - it is written only by a process whose effective user is root, into
//     a directory owned by root and writable by no one else (0755), as a
//     file writable by no one else, through a temporary file renamed into
//     place, so that a reader never sees half of one;
//   - it is read only when the directory and the file are owned by root
//     and writable by neither group nor others, so that a plan run by
//     another user reads the lists themselves rather than a cache that
//     user could have written;
//   - an entry is used only for the list whose identity (path, size,
//     modification time, inode) it records, under the same relevance
//     rule, and with its content's digest intact: anything else is
//     ignored, and rewritten when root plans next.
const CacheDir = "/var/cache/gpuenv"

// cacheFormat heads every cache file; a new format changes it.
const cacheFormat = "gpuenv index stanzas 2"

// geteuid is the effective user, which tests replace.
var geteuid = os.Geteuid

// cachePath is the cache file of a list.
func cachePath(list string) string { return path.Join(CacheDir, "index-"+path.Base(list)) }

// cacheKey is what a cache entry must record to stand for a list.
func cacheKey(list string, id facts.FileIdentity) string {
	rule := sha256.Sum256([]byte(pkgdb.RelevantRule()))
	return fmt.Sprintf("%s\nList: %s\nSize: %d\nMtime: %d\nInode: %d\nRule: %s\n", cacheFormat, list, id.Size, id.MTime, id.Inode, hex.EncodeToString(rule[:8]))
}

// trusted reports whether fi, of a file or directory in the cache, is
// owned by root and writable by no one else.
func trusted(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Uid == 0 && fi.Mode().Perm()&0o022 == 0
}

// readCache returns the cached scan of the list at p with identity id,
// when a trusted entry for exactly that list is there.
func readCache(h *host.Host, p string, id facts.FileIdentity) (scanned, bool) {
	dir, err := h.Lstat(CacheDir)
	if err != nil || !dir.IsDir() || !trusted(dir) {
		return scanned{}, false
	}
	name := cachePath(p)
	if fi, err := h.Lstat(name); err != nil || !fi.Mode().IsRegular() || !trusted(fi) {
		return scanned{}, false
	}
	f, err := h.Open(name)
	if err != nil {
		return scanned{}, false
	}
	defer f.Close()
	// The file opened is the one checked: a rename between the two
	// would put in place a file root wrote, as root alone can.
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || !trusted(fi) {
		return scanned{}, false
	}
	data := make([]byte, fi.Size())
	if _, err := f.ReadAt(data, 0); err != nil {
		return scanned{}, false
	}
	return parseCache(data, cacheKey(p, id))
}

// parseCache reads a cache file: the key, the stanza count and the
// body's digest, a blank line, the body.
func parseCache(data []byte, key string) (scanned, bool) {
	rest, ok := bytes.CutPrefix(data, []byte(key))
	if !ok {
		return scanned{}, false
	}
	head, body, ok := bytes.Cut(rest, []byte("\n\n"))
	if !ok {
		return scanned{}, false
	}
	var total int
	var digest string
	if _, err := fmt.Sscanf(string(head), "Stanzas: %d\nSHA256: %s", &total, &digest); err != nil {
		return scanned{}, false
	}
	sum := sha256.Sum256(body)
	if hex.EncodeToString(sum[:]) != digest {
		return scanned{}, false
	}
	return scanned{total: total, stanzas: body}, true
}

// writeCache records the scan of the list at p, when this process is
// root and the cache directory is root's alone (or can be made so).
// Failing to write is no error: the next plan reads the list again.
func writeCache(h *host.Host, p string, id facts.FileIdentity, s scanned) error {
	if geteuid() != 0 {
		return nil
	}
	parent, err := h.Resolve(path.Dir(CacheDir))
	if err != nil {
		return err
	}
	if _, err := os.Stat(parent); err != nil {
		// No /var/cache: not a root gpuenv makes directories in.
		return nil
	}
	dir := filepath.Join(parent, path.Base(CacheDir))
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() || !trusted(fi) {
		return fmt.Errorf("%s is not a directory of root's alone: the cache is not written", CacheDir)
	}
	sum := sha256.Sum256(s.stanzas)
	var b bytes.Buffer
	b.WriteString(cacheKey(p, id))
	b.WriteString("Stanzas: " + strconv.Itoa(s.total) + "\nSHA256: " + hex.EncodeToString(sum[:]) + "\n\n")
	b.Write(s.stanzas)
	return safefile.WriteFile(filepath.Join(dir, path.Base(cachePath(p))), b.Bytes(), 0o644, safefile.Options{})
}
