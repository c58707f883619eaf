package host

import (
	"errors"
	"io/fs"
	"syscall"
	"time"
)

// KmsgPath is the kernel's log buffer as a device: each read returns one
// record, "prio,seq,usec,flags;text".
const KmsgPath = "/dev/kmsg"

// ErrNotLive is returned for what only the running system has.
var ErrNotLive = errors.New("the root is not the running system")

// ReadKmsg hands each record of the kernel's log buffer to fn, oldest
// first, and returns at the newest, without waiting for more: the device
// is opened non-blocking and a read that would block (EAGAIN) ends it.
// Records the kernel overwrote while they were read (EPIPE) are passed
// over. It stops after maxRecords records or once deadline passes, and
// reports whether it stopped early. Only a live root has the running
// kernel's buffer; with dmesg_restrict set, reading needs CAP_SYSLOG.
func (h *Host) ReadKmsg(maxRecords int, deadline time.Time, fn func(rec []byte)) (stopped bool, err error) {
	if !h.Live() {
		return false, ErrNotLive
	}
	fd, err := open(KmsgPath, syscall.O_NONBLOCK)
	if err != nil {
		return false, err
	}
	defer syscall.Close(fd)
	// A record is at most 8 KiB of text (the kernel's own buffer for
	// one record, escaped) plus its dictionary.
	buf := make([]byte, 16<<10)
	for n := 0; ; n++ {
		if n >= maxRecords || n&255 == 0 && time.Now().After(deadline) {
			return true, nil
		}
		m, err := read(fd, buf)
		switch {
		case err == syscall.EAGAIN:
			return false, nil
		case err == syscall.EPIPE:
			continue
		case err != nil:
			return false, &fs.PathError{Op: "read", Path: KmsgPath, Err: err}
		case m == 0:
			return false, nil
		}
		fn(buf[:m])
	}
}
