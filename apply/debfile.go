package apply

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// checkDebFile makes sure a package file saved for rollback is whole
// before the transaction that needs it runs, and makes it durable. A
// download or a rebuild that ran out of disk can leave an empty or cut
// file while the tool still exits 0; found only at rollback, it would
// leave nothing to restore from. A .deb is an ar archive whose members are
// debian-binary, control.tar.* and data.tar.*: each member's header must
// be intact and its data present to the last byte.
func checkDebFile(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	bad := func(why string) error { return fmt.Errorf("%s is not a whole package file: %s", p, why) }
	magic := make([]byte, 8)
	if _, err := io.ReadFull(f, magic); err != nil || string(magic) != "!<arch>\n" {
		return bad(fmt.Sprintf("no ar archive header (%d bytes)", fi.Size()))
	}
	off := int64(8)
	var members []string
	hdr := make([]byte, 60)
	for off < fi.Size() {
		if _, err := f.ReadAt(hdr, off); err != nil {
			return bad(fmt.Sprintf("member %d's header is cut", len(members)+1))
		}
		if !bytes.Equal(hdr[58:60], []byte("`\n")) {
			return bad(fmt.Sprintf("member %d's header is damaged", len(members)+1))
		}
		size, err := strconv.ParseInt(strings.TrimSpace(string(hdr[48:58])), 10, 64)
		if err != nil || size < 0 {
			return bad(fmt.Sprintf("member %d's size is unreadable", len(members)+1))
		}
		name := strings.TrimSuffix(strings.TrimSpace(string(hdr[0:16])), "/")
		members = append(members, name)
		off += 60 + size
		if off > fi.Size() {
			return bad(fmt.Sprintf("member %s is cut: %d of its %d bytes are missing", name, off-fi.Size(), size))
		}
		off += size % 2
	}
	if len(members) < 3 || members[0] != "debian-binary" || !strings.HasPrefix(members[1], "control.tar") || !strings.HasPrefix(members[2], "data.tar") {
		return bad(fmt.Sprintf("members %v, want debian-binary, control.tar.*, data.tar.*", members))
	}
	if err := f.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return fmt.Errorf("syncing %s: %w", p, err)
	}
	return nil
}
