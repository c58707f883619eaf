package host

import (
	"io/fs"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// dirfds is an observation pass that leaves path resolution to the
// kernel. On a root other than "/", openat2 resolves each path against a
// descriptor of the root with RESOLVE_IN_ROOT, which reads absolute
// symlinks and ".." as chroot(2) would and never leaves the root: one
// system call where resolving component by component costs one per
// component. On "/" paths are resolved as they are. Either way,
// directories looked in more than once are opened and kept for the pass,
// so that looking up many names in one directory (device nodes, cuDNN's
// library probes) costs one fstatat each, a directory that is missing
// answers for everything below it without another call, and a small
// directory's listing is read once.
type dirfds struct {
	// root is the root on this machine, for the paths errors name.
	root string
	live bool
	// rootFD is the root directory, which openat2 resolves against; -1 on
	// a live root, whose paths the kernel resolves as they are.
	rootFD int

	// mu is held across every lookup, so that Close cannot close a
	// descriptor another goroutine is using.
	mu     sync.Mutex
	closed bool
	dirs   map[string]*dirFD // by path inside the root, cleaned
	held   int               // descriptors in dirs
	st     syscall.Stat_t    // for lookups whose answer is only yes or no
}

// dirFD is one directory of the pass.
type dirFD struct {
	fd int // -1 while it is not open
	// err is why it could not be opened. Only errors that hold for the
	// whole pass (ENOENT, ENOTDIR) are remembered.
	err syscall.Errno
	// listErr is why it cannot be listed: it could be searched but not
	// read, and fd was opened with O_PATH.
	listErr syscall.Errno
	// list is its getdents64 records, when they fitted in one read; big
	// is set when they did not.
	list []byte
	// misses counts the names it turned out not to have.
	misses int32
	big    bool
	// moved is set once the descriptor's offset left the start.
	moved bool
	// temp is set when the pass holds too many descriptors to keep this
	// one: put closes it.
	temp bool
}

// maxHeld bounds the descriptors a pass keeps, far below what a process
// may open. An observation uses a few dozen.
var maxHeld = 256

// resolveInRoot is how openat2 resolves: inside the root, and through no
// /proc/self/fd-style link, which could lead anywhere.
const resolveInRoot = unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS

// forceWalker makes observation handles resolve paths component by
// component, as they do where openat2 is missing; tests set it.
var forceWalker bool

// openDirfds starts a pass over root. It returns nil where the kernel
// cannot resolve paths inside the root: no openat2 (before Linux 5.6),
// or a seccomp filter that refuses it.
func openDirfds(root string) *dirfds {
	c := &dirfds{root: root, live: root == "/", rootFD: -1, dirs: make(map[string]*dirFD)}
	if c.live {
		return c
	}
	if forceWalker {
		return nil
	}
	// Opening the root with openat2 itself tells whether the kernel has
	// it, at no extra cost.
	d := &dirFD{}
	fd, err := openat2(unix.AT_FDCWD, root, syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err == syscall.EACCES {
		d.listErr = syscall.EACCES
		fd, err = openat2(unix.AT_FDCWD, root, unix.O_PATH|syscall.O_DIRECTORY, 0)
	}
	if err != nil {
		return nil
	}
	d.fd = fd
	c.rootFD = fd
	c.dirs["/"] = d
	c.held++
	return c
}

func openat2(dirfd int, p string, flags int, resolve uint64) (int, error) {
	how := unix.OpenHow{Flags: uint64(flags | syscall.O_CLOEXEC), Resolve: resolve}
	for retries := 0; ; retries++ {
		fd, err := unix.Openat2(dirfd, p, &how)
		// EAGAIN: a rename raced with resolving "..", and the kernel
		// asks to try again rather than risk a wrong answer.
		if err == syscall.EINTR || err == syscall.EAGAIN && retries < 10 {
			continue
		}
		return fd, err
	}
}

// lock returns the pass, locked, or nil when there is none or it is
// closed.
func (c *dirfds) lock() *dirfds {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	return c
}

func (c *dirfds) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	for _, d := range c.dirs {
		if d.fd >= 0 {
			syscall.Close(d.fd)
		}
	}
	c.dirs = nil
}

// name is where p, a cleaned path inside the root, lives on this machine,
// as errors name it.
func (c *dirfds) name(p string) string {
	switch {
	case c.live:
		return p
	case p == "/":
		return c.root
	}
	return c.root + p
}

// openPath opens p, a cleaned path inside the root, following symlinks.
func (c *dirfds) openPath(p string, flags int) (int, error) {
	if !c.live {
		return openat2(c.rootFD, p, flags, resolveInRoot)
	}
	for {
		fd, err := syscall.Open(p, flags|syscall.O_CLOEXEC, 0)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}

// seenOnce stands in dirs for a directory one name was looked up in, by
// its whole path: it is opened when a second one is. It is never changed.
var seenOnce = &dirFD{fd: -1}

// dir returns the directory p opened, or with err set; put hands it back.
func (c *dirfds) dir(p string) *dirFD {
	d, ok := c.dirs[p]
	if !ok || d == seenOnce {
		d = &dirFD{fd: -1}
		c.dirs[p] = d
	}
	if d.fd >= 0 || d.err != 0 {
		return d
	}
	fd, err := c.openPath(p, syscall.O_RDONLY|syscall.O_DIRECTORY)
	if err == syscall.EACCES {
		// Searchable but not readable: enough to look names up in.
		d.listErr = syscall.EACCES
		fd, err = c.openPath(p, unix.O_PATH|syscall.O_DIRECTORY)
	}
	switch {
	case err == nil:
		d.fd = fd
		if c.held >= maxHeld {
			d.temp = true
		} else {
			c.held++
		}
	case err == syscall.ENOENT || err == syscall.ENOTDIR:
		d.err = err.(syscall.Errno)
	default:
		// Not known to hold for the pass: answer with it, forget it.
		return &dirFD{fd: -1, err: errno(err)}
	}
	return d
}

// errno is err as the kernel gave it; the calls made here return nothing
// else.
func errno(err error) syscall.Errno {
	if e, ok := err.(syscall.Errno); ok {
		return e
	}
	return syscall.EIO
}

func openat(dirfd int, name string, flags int) (int, error) {
	for {
		fd, err := syscall.Openat(dirfd, name, flags|syscall.O_CLOEXEC, 0)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}

func (c *dirfds) put(d *dirFD) {
	if d.temp {
		syscall.Close(d.fd)
		d.fd, d.temp, d.moved = -1, false, false
	}
}

// absent reports whether the listing the pass keeps of d shows that it
// has no entry base. A directory that can be read but not searched
// (mode r--) answers ENOENT here where looking the name up would say
// EACCES; either way the name cannot be used.
func (d *dirFD) absent(base string) bool {
	if d.list == nil {
		return false
	}
	found := false
	eachDirent(d.list, func(name []byte, _ uint8) {
		found = found || string(name) == base
	})
	return !found
}

// split cuts p, cleaned and absolute, into its directory and last
// element; the last element of "/" is "".
func split(p string) (dir, base string) {
	i := strings.LastIndexByte(p, '/')
	if i == 0 {
		return "/", p[1:]
	}
	return p[:i], p[i+1:]
}

// find is lstat(2) of p, cleaned and absolute, or stat(2) with follow;
// st may be nil when only success matters. The first name looked up in
// a directory is looked up by its whole path; from the second on, the
// directory is opened and kept and names are looked up in it, and once
// two of them turned out missing it is listed too, if small, so that
// names it lacks (most of what cuDNN's and the driver's probes look for)
// cost nothing more.
func (c *dirfds) find(p string, st *syscall.Stat_t, follow bool) error {
	dir, base := split(p)
	if base == "" {
		d := c.dir("/")
		defer c.put(d)
		if d.fd < 0 {
			return d.err
		}
		return fstat(d.fd, c.scratch(st))
	}
	d, ok := c.dirs[dir]
	switch {
	case !ok:
		c.dirs[dir] = seenOnce
		return c.findPath(p, st, follow)
	case d.err != 0:
		return d.err
	case d.absent(base):
		return syscall.ENOENT
	}
	d = c.dir(dir)
	defer c.put(d)
	if d.fd < 0 {
		return d.err
	}
	err := fstatat(d.fd, base, c.scratch(st))
	switch {
	case err == syscall.ENOENT:
		if d.misses++; d.misses == 2 && d.list == nil && !d.big && d.listErr == 0 {
			c.list(d, dir, func([]byte, uint8) {})
		}
	case err == nil && follow && c.scratch(st).Mode&syscall.S_IFMT == syscall.S_IFLNK:
		// Only a symlink needs the whole path resolved.
		err = c.findPath(p, st, true)
	}
	return err
}

// fstatat is lstat(2) of name in the directory dirfd.
func fstatat(dirfd int, name string, st *syscall.Stat_t) error {
	for {
		// unix.Stat_t and syscall.Stat_t both spell the kernel's struct
		// stat; FileInfo.Sys must be the latter, as os gives it.
		err := unix.Fstatat(dirfd, name, (*unix.Stat_t)(unsafe.Pointer(st)), unix.AT_SYMLINK_NOFOLLOW)
		if err != syscall.EINTR {
			return err
		}
	}
}

// scratch is st, or somewhere to put what the caller does not want.
func (c *dirfds) scratch(st *syscall.Stat_t) *syscall.Stat_t {
	if st == nil {
		return &c.st
	}
	return st
}

// findPath is find by the whole path.
func (c *dirfds) findPath(p string, st *syscall.Stat_t, follow bool) error {
	if c.live {
		for {
			var err error
			if follow {
				err = syscall.Stat(p, c.scratch(st))
			} else {
				err = syscall.Lstat(p, c.scratch(st))
			}
			if err != syscall.EINTR {
				return err
			}
		}
	}
	flags := unix.O_PATH
	if !follow {
		// O_PATH|O_NOFOLLOW opens a symlink itself.
		flags |= syscall.O_NOFOLLOW
	}
	fd, err := c.openPath(p, flags)
	if err != nil {
		return err
	}
	if st != nil {
		err = fstat(fd, st)
	}
	syscall.Close(fd)
	return err
}

// stat is Host.Lstat, or Host.Stat with follow, for p, cleaned and
// absolute.
func (c *dirfds) stat(p string, follow bool) (*fileInfo, error) {
	_, base := split(p)
	fi := &fileInfo{name: base}
	if base == "" {
		fi.name = "/"
	}
	if err := c.find(p, &fi.sys, follow); err != nil {
		op := "lstat"
		if follow {
			op = "stat"
		}
		return nil, &fs.PathError{Op: op, Path: c.name(p), Err: err}
	}
	return fi, nil
}

// mode is the st_mode lstat(2) gives p, cleaned and absolute.
func (c *dirfds) mode(p string) (uint32, error) {
	if err := c.find(p, &c.st, false); err != nil {
		return 0, &fs.PathError{Op: "lstat", Path: c.name(p), Err: err}
	}
	return c.st.Mode, nil
}

func (c *dirfds) exists(p string) bool {
	return c.find(p, nil, false) == nil
}

// readlink is Host.Readlink for p, cleaned and absolute.
func (c *dirfds) readlink(p string) (string, error) {
	dir, base := split(p)
	if base == "" {
		// The root is a directory.
		return "", &fs.PathError{Op: "readlink", Path: c.name(p), Err: syscall.EINVAL}
	}
	d := c.dir(dir)
	defer c.put(d)
	if d.fd < 0 || d.absent(base) {
		err := d.err
		if err == 0 {
			err = syscall.ENOENT
		}
		return "", &fs.PathError{Op: "readlink", Path: c.name(p), Err: err}
	}
	for n := 128; ; n *= 2 {
		b := make([]byte, n)
		got, err := unix.Readlinkat(d.fd, base, b)
		switch {
		case err == syscall.EINTR:
		case err != nil:
			return "", &fs.PathError{Op: "readlink", Path: c.name(p), Err: err}
		case got < n:
			return string(b[:got]), nil
		}
	}
}

// open opens p, cleaned and absolute, for reading, and returns the name
// errors give it. In a directory the pass already holds, the file is
// opened relative to it without following a symlink; a symlink (ELOOP)
// is then resolved from the root.
func (c *dirfds) open(p string) (int, string, error) {
	name := c.name(p)
	dir, base := split(p)
	if d, ok := c.dirs[dir]; ok && base != "" {
		switch {
		case d.err != 0:
			return -1, name, &fs.PathError{Op: "open", Path: name, Err: d.err}
		case d.absent(base):
			return -1, name, &fs.PathError{Op: "open", Path: name, Err: syscall.ENOENT}
		case d.fd >= 0:
			fd, err := openat(d.fd, base, readFlags|syscall.O_NOFOLLOW)
			if err == nil {
				return fd, name, nil
			}
			if err != syscall.ELOOP {
				return -1, name, &fs.PathError{Op: "open", Path: name, Err: err}
			}
		}
	}
	fd, err := c.openPath(p, readFlags)
	if err != nil {
		return -1, name, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return fd, name, nil
}
