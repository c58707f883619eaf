package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gpuenv/gpuenv/internal/childproc"
)

// maxSymlinks bounds symlink resolution, as the kernel's own limit does, so
// that a loop in a root fails instead of spinning.
const maxSymlinks = 40

// Host is a machine seen through its root directory.
type Host struct {
	root   string
	runner Runner
	nvml   NVML
	// fds resolves paths through directory descriptors, in a handle made
	// by ForObservation where the kernel can; nil otherwise.
	fds *dirfds
	// links remembers how path components resolved, in a handle made by
	// ForObservation: for every lookup where fds is nil, for EvalSymlinks
	// where it is not. Nil otherwise.
	links *linkCache
	// dirs remembers directory listings, in a handle made by
	// ForObservation where fds is nil; nil otherwise.
	dirs *dirCache
	// running makes a root other than "/" stand for the running
	// system (AsRunningSystem).
	running bool
	// commandLog, when set, hears of every command Run ran
	// (WithCommandLog).
	commandLog func(argv []string, took time.Duration, err error)
}

// dirCache holds, per directory on this machine, what listing it gave.
// Several observers look in the same directories (/usr/local for
// cuda-*, each cuDNN pattern under /usr/local/cuda*), and on a real
// system some of them are large.
type dirCache struct {
	mu sync.Mutex
	m  map[string]dirListing
}

type dirListing struct {
	entries []fs.DirEntry
	err     error
}

// linkCache holds, per path inside the root, whether it is a symlink and
// where it points, or the error looking at it gave.
type linkCache struct {
	mu sync.Mutex
	m  map[string]linkInfo
}

type linkInfo struct {
	symlink bool
	target  string
	err     error
	// fi and lerr are what lstat said, kept so that Lstat, Stat and
	// EvalSymlinks on an observation handle need not ask again.
	fi   fs.FileInfo
	lerr error
}

// component looks at one path component inside the root: is it a symlink,
// and to what.
func (h *Host) component(p string) (linkInfo, error) {
	if h.links != nil {
		h.links.mu.Lock()
		li, ok := h.links.m[p]
		h.links.mu.Unlock()
		if ok {
			return li, li.err
		}
	}
	var li linkInfo
	if c := h.fds.lock(); c != nil {
		// Through the pass's directories, which other lookups share. Only
		// EvalSymlinks walks while they are open, and it needs no fi.
		var mode uint32
		mode, li.lerr = c.mode(p)
		switch {
		case li.lerr != nil:
			li.err = li.lerr
		case mode&syscall.S_IFMT == syscall.S_IFLNK:
			li.symlink = true
			li.target, li.err = c.readlink(p)
		}
		c.mu.Unlock()
	} else {
		fi, err := os.Lstat(filepath.Join(h.root, p))
		li.fi, li.lerr = fi, err
		switch {
		case err != nil:
			li.err = err
		case fi.Mode()&fs.ModeSymlink != 0:
			li.symlink = true
			li.target, li.err = os.Readlink(filepath.Join(h.root, p))
		}
	}
	if h.links != nil {
		h.links.mu.Lock()
		h.links.m[p] = li
		h.links.mu.Unlock()
	}
	return li, li.err
}

// ForObservation returns a handle on the same root, runner and NVML for
// one read-only pass, which Close ends. Observation makes hundreds of
// lookups, most of them in a few directories, and on a root other than
// "/" every symlink must be resolved inside the root. The handle keeps
// the directories it met open and has the kernel resolve paths inside
// the root (openat2 with RESOLVE_IN_ROOT); where the kernel cannot, it
// resolves them component by component and remembers how each
// component resolved. Either way it may not notice a file, symlink or
// directory that changes during the pass.
func (h *Host) ForObservation() *Host {
	c := *h
	c.nvml = h.NVML()
	c.links = &linkCache{m: make(map[string]linkInfo)}
	c.fds = openDirfds(h.root)
	if c.fds != nil {
		// A handle dropped without Close must not keep its
		// descriptors for the life of the process.
		runtime.AddCleanup(&c, (*dirfds).close, c.fds)
	} else {
		c.dirs = &dirCache{m: make(map[string]dirListing)}
	}
	return &c
}

// Close ends an observation handle's pass: it releases the directories
// the handle holds open and forgets what it learnt, so that it goes on as
// a handle from New would. On other handles it does nothing. It must not
// run concurrently with the handle's other methods.
func (h *Host) Close() error {
	if h.fds != nil {
		h.fds.close()
	}
	h.links, h.dirs = nil, nil
	return nil
}

// Option configures a Host.
type Option func(*Host)

// WithRunner replaces the runner used for commands (tests use a recorder).
func WithRunner(r Runner) Option { return func(h *Host) { h.runner = r } }

// WithCommandLog has log told of every command the host runs, with how
// long it took and how it ended, for gpuenv's debug log.
func WithCommandLog(log func(argv []string, took time.Duration, err error)) Option {
	return func(h *Host) { h.commandLog = log }
}

// New returns a Host for root, which must be an existing directory.
func New(root string, opts ...Option) (*Host, error) {
	if root == "" {
		root = "/"
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("root %s: %w", root, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("root %s: %w", root, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("root %s: not a directory", root)
	}
	h := &Host{root: abs, runner: ExecRunner{}}
	for _, o := range opts {
		o(h)
	}
	return h, nil
}

// Root is the absolute path of the root directory on this machine.
func (h *Host) Root() string { return h.root }

// Live reports whether the root is this machine's own "/": only then are
// its kernel, devices and NVML the ones this process can reach.
func (h *Host) Live() bool { return h.root == "/" }

// AsRunningSystem makes the root, whatever its path, stand for the
// running system in what concerns its kernel and services (Running):
// kernel operations and service starts run, inside the root, as they
// would on "/". It exists for tests, whose fixture roots have fake
// modprobe and systemctl changing their /proc and /sys the way the kernel
// would; no flag of gpuenv sets it, and paths and commands are handled as
// for any other root.
func AsRunningSystem() Option { return func(h *Host) { h.running = true } }

// Running reports whether the root's kernel, modules and services are
// the ones commands run in it reach: on "/", and on a root made with
// AsRunningSystem.
func (h *Host) Running() bool { return h.Live() || h.running }

// RunningByOption reports whether the root was made to stand for the
// running system (AsRunningSystem) rather than found to be it: then
// whether "/" is a chroot is not asked either, since the option answers
// it.
func (h *Host) RunningByOption() bool { return h.running }

// Resolve returns where p, an absolute path inside the root, lives on this
// machine, following symlinks in every component (the last one included)
// without leaving the root. A missing component ends resolution: the rest
// is joined as written, so that the caller's open reports "not exist".
func (h *Host) Resolve(p string) (string, error) {
	return h.resolve(p, true)
}

func (h *Host) resolve(p string, followLast bool) (string, error) {
	if !path.IsAbs(p) {
		return "", fmt.Errorf("path %q is not absolute", p)
	}
	if h.Live() {
		// The kernel resolves the real root's symlinks itself, and faster.
		return cleanPath(p), nil
	}
	cur, err := h.resolveIn(p, followLast)
	if err != nil {
		return "", err
	}
	return filepath.Join(h.root, cur), nil
}

// resolveIn resolves p, absolute and inside a root other than "/", to the
// path inside the root it leads to.
func (h *Host) resolveIn(p string, followLast bool) (string, error) {
	clean := cleanPath(p)
	if h.links == nil {
		return h.walk(p, clean, followLast)
	}
	// An observation handle resolves thousands of paths, nearly all free
	// of symlinks: walk the prefixes of the cleaned path as substrings,
	// which allocates nothing, and hand over to walk, which rebuilds the
	// path component by component, at the first symlink. The components
	// looked at so far are remembered, so walk does not look again.
	for i := 1; i < len(clean); {
		j := strings.IndexByte(clean[i:], '/')
		if j < 0 {
			j = len(clean)
		} else {
			j += i
		}
		if j == len(clean) && !followLast {
			return clean, nil
		}
		link, err := h.component(clean[:j])
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				// walk joins the rest as written: the cleaned path.
				return clean, nil
			}
			return "", err
		}
		if link.symlink {
			return h.walk(p, clean, followLast)
		}
		i = j + 1
	}
	return clean, nil
}

// walk is resolveIn component by component; clean is path.Clean(p).
func (h *Host) walk(p, clean string, followLast bool) (string, error) {
	rest := strings.Split(strings.TrimPrefix(clean, "/"), "/")
	cur := "/"
	links := 0
	for len(rest) > 0 {
		comp := rest[0]
		rest = rest[1:]
		switch comp {
		case "", ".":
			continue
		case "..":
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, comp)
		if len(rest) == 0 && !followLast {
			cur = next
			break
		}
		link, err := h.component(next)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				cur = path.Join(append([]string{next}, rest...)...)
				rest = nil
				break
			}
			return "", err
		}
		if !link.symlink {
			cur = next
			continue
		}
		links++
		if links > maxSymlinks {
			return "", &fs.PathError{Op: "resolve", Path: p, Err: syscall.ELOOP}
		}
		target := link.target
		if path.IsAbs(target) {
			cur = "/"
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	return cur, nil
}

// ReadFile reads the file at p inside the root, which must be a regular
// file of at most DefaultReadLimit bytes: a FIFO, a device or a socket is
// refused without waiting on it (NotRegularError), and a larger file
// without reading it all (TooLargeError).
func (h *Host) ReadFile(p string) ([]byte, error) {
	return h.ReadFileLimit(p, DefaultReadLimit)
}

// ReadFileLimit is ReadFile for a file of at most limit bytes: a kind of
// file that gpuenv parses, where a large one costs more than its bytes.
func (h *Host) ReadFileLimit(p string, limit int64) ([]byte, error) {
	fd, name, size, err := h.openFD(p)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	return readAll(fd, name, size, limit)
}

// readAll reads fd, a regular file opened as name whose size fstat gave,
// to its end, and refuses it once it holds more than limit bytes. Most
// files gpuenv reads are small, and sysfs and procfs report a size of
// 4096 or 0 anyway, so the file is first read into a buffer on the stack,
// and what it held copied into memory of just its size. A file that
// fills the buffer and gave its size is read into one buffer of that
// size rather than one grown, and copied, a dozen times over (the dpkg
// database is close to a megabyte).
func readAll(fd int, name string, size, limit int64) ([]byte, error) {
	if size > limit {
		return nil, &TooLargeError{Path: name, Limit: limit}
	}
	var small [512]byte
	for n := 0; n < len(small); {
		m, err := read(fd, small[n:])
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: name, Err: err}
		}
		if m == 0 {
			if int64(n) > limit {
				return nil, &TooLargeError{Path: name, Limit: limit}
			}
			return bytes.Clone(small[:n]), nil
		}
		n += m
	}
	var buf []byte
	if size >= int64(len(small)) {
		// One byte more than the size, so that a file that grew since is
		// noticed and read to its end.
		buf = make([]byte, len(small), size+1)
	} else {
		size = -1
		buf = make([]byte, len(small), 2*len(small))
	}
	copy(buf, small[:])
	for {
		if int64(len(buf)) > limit {
			return nil, &TooLargeError{Path: name, Limit: limit}
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		// Never more than one byte past the limit, however the buffer
		// grew: that byte is what tells a file over it.
		room := buf[len(buf):cap(buf)]
		if over := int64(len(buf)) + int64(len(room)) - (limit + 1); over > 0 {
			room = room[:int64(len(room))-over]
		}
		n, err := read(fd, room)
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: name, Err: err}
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
		if int64(len(buf)) == size {
			// A regular file read to the size it has: asking again
			// would only return its end. (Files of procfs and sysfs
			// report a size of 0 or 4096 whatever they hold, so they
			// are read to the end.)
			return buf, nil
		}
	}
}

func read(fd int, b []byte) (int, error) {
	for {
		n, err := syscall.Read(fd, b)
		if err != syscall.EINTR {
			if n < 0 {
				n = 0
			}
			return n, err
		}
	}
}

func fstat(fd int, st *syscall.Stat_t) error {
	for {
		if err := syscall.Fstat(fd, st); err != syscall.EINTR {
			return err
		}
	}
}

// open opens name read-only as a plain descriptor. os.Open would register
// it with the runtime's poller, which a regular file refuses, at the cost
// of four fcntl calls and an epoll_ctl a file, more than reading a small
// file costs; errors read as os.Open's.
func open(name string, flags int) (int, error) {
	for {
		fd, err := syscall.Open(name, flags|readFlags|syscall.O_CLOEXEC, 0)
		if err == nil {
			return fd, nil
		}
		if err != syscall.EINTR {
			return -1, &fs.PathError{Op: "open", Path: name, Err: err}
		}
	}
}

// Open opens the file at p inside the root for reading. Like ReadFile,
// it refuses anything but a regular file (NotRegularError); how much of
// it to read is the caller's to bound.
func (h *Host) Open(p string) (*os.File, error) {
	fd, name, _, err := h.openFD(p)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

// openFD opens the regular file at p inside the root for reading, and
// returns the descriptor, the name it was opened under on this machine
// and its size.
func (h *Host) openFD(p string) (int, string, int64, error) {
	fd, name, err := h.openAny(p)
	if err != nil {
		return -1, name, 0, err
	}
	size, err := h.checkRegular(fd, p, name)
	if err != nil {
		syscall.Close(fd)
		return -1, name, 0, err
	}
	return fd, name, size, nil
}

// openAny opens whatever p inside the root is, without waiting on it.
func (h *Host) openAny(p string) (int, string, error) {
	if path.IsAbs(p) {
		if c := h.fds.lock(); c != nil {
			defer c.mu.Unlock()
			return c.open(cleanPath(p))
		}
	}
	if !h.Live() && path.IsAbs(p) {
		// Resolve the directory, then open the last component without
		// following it: only when it turns out to be a symlink (ELOOP)
		// is it resolved inside the root. This spares a system call per
		// file, most of what reading a fixture's sysfs costs.
		clean := cleanPath(p)
		if dir, base := path.Split(clean); base != "" && base != ".." {
			if rdir, err := h.resolveIn(dir, true); err == nil {
				name := filepath.Join(h.root, rdir, base)
				fd, err := open(name, syscall.O_NOFOLLOW)
				if !errors.Is(err, syscall.ELOOP) {
					return fd, name, err
				}
			}
		}
	}
	rp, err := h.Resolve(p)
	if err != nil {
		return -1, "", err
	}
	fd, err := open(rp, 0)
	return fd, rp, err
}

// ReadDir lists the directory at p inside the root, sorted by name.
func (h *Host) ReadDir(p string) ([]fs.DirEntry, error) {
	if path.IsAbs(p) {
		if c := h.fds.lock(); c != nil {
			defer c.mu.Unlock()
			return c.readDir(h, cleanPath(p))
		}
	}
	rp, err := h.Resolve(p)
	if err != nil {
		return nil, err
	}
	if h.dirs == nil {
		return os.ReadDir(rp)
	}
	h.dirs.mu.Lock()
	l, ok := h.dirs.m[rp]
	h.dirs.mu.Unlock()
	if !ok {
		l.entries, l.err = os.ReadDir(rp)
		h.dirs.mu.Lock()
		h.dirs.m[rp] = l
		h.dirs.mu.Unlock()
	}
	// A copy, so that a caller that sorts or trims its listing does not
	// change the next caller's.
	return slices.Clone(l.entries), l.err
}

// remembers reports whether h is an observation handle that answers
// lstat from what it learnt (see ForObservation): on a root other than
// "/", or on "/" where it resolves the rest through descriptors.
func (h *Host) remembers(p string) bool {
	return h.links != nil && (!h.Live() || h.fds != nil) && path.IsAbs(p)
}

// nilIfErr keeps a nil *fileInfo from becoming a non-nil fs.FileInfo.
func nilIfErr(fi *fileInfo, err error) (fs.FileInfo, error) {
	if err != nil {
		return nil, err
	}
	return fi, nil
}

// Stat follows symlinks inside the root.
func (h *Host) Stat(p string) (fs.FileInfo, error) { return h.stat(p, true) }

// Lstat does not follow a symlink in the last component.
func (h *Host) Lstat(p string) (fs.FileInfo, error) { return h.stat(p, false) }

func (h *Host) stat(p string, followLast bool) (fs.FileInfo, error) {
	if path.IsAbs(p) {
		if c := h.fds.lock(); c != nil {
			defer c.mu.Unlock()
			return nilIfErr(c.stat(cleanPath(p), followLast))
		}
	}
	if h.remembers(p) {
		cur, err := h.resolveIn(p, followLast)
		if err != nil {
			return nil, err
		}
		// Resolution looked at the last component: when it is not a
		// symlink, stat and lstat agree. Otherwise (a dangling link, a
		// missing file) stat itself says how, in its own words.
		li, _ := h.component(cur)
		if !followLast || li.lerr == nil && !li.symlink {
			return li.fi, li.lerr
		}
		return os.Stat(filepath.Join(h.root, cur))
	}
	rp, err := h.resolve(p, followLast)
	if err != nil {
		return nil, err
	}
	if followLast {
		return os.Stat(rp)
	}
	return os.Lstat(rp)
}

// Readlink returns a symlink's target as written in the link.
func (h *Host) Readlink(p string) (string, error) {
	if path.IsAbs(p) {
		if c := h.fds.lock(); c != nil {
			defer c.mu.Unlock()
			return c.readlink(cleanPath(p))
		}
	}
	rp, err := h.resolve(p, false)
	if err != nil {
		return "", err
	}
	return os.Readlink(rp)
}

// EvalSymlinks returns the path inside the root that p leads to.
func (h *Host) EvalSymlinks(p string) (string, error) {
	if h.remembers(p) {
		cur, err := h.resolveIn(p, true)
		if err != nil {
			return "", err
		}
		if li, _ := h.component(cur); li.lerr != nil {
			return "", li.lerr
		}
		return cur, nil
	}
	rp, err := h.Resolve(p)
	if err != nil {
		return "", err
	}
	if _, err := os.Lstat(rp); err != nil {
		return "", err
	}
	if h.Live() {
		return filepath.EvalSymlinks(rp)
	}
	rel, err := filepath.Rel(h.root, rp)
	if err != nil {
		return "", err
	}
	return path.Join("/", filepath.ToSlash(rel)), nil
}

// Glob returns the paths inside the root that match pattern (path.Match
// syntax in any component), sorted. Symlinked directories on the way are
// followed inside the root.
func (h *Host) Glob(pattern string) ([]string, error) {
	if !path.IsAbs(pattern) {
		return nil, fmt.Errorf("pattern %q is not absolute", pattern)
	}
	if _, err := path.Match(pattern, ""); err != nil {
		return nil, fmt.Errorf("pattern %q: %w", pattern, err)
	}
	rest := strings.TrimPrefix(cleanPath(pattern), "/")
	matches := []string{"/"}
	for {
		end := strings.IndexByte(rest, '/')
		if end < 0 {
			end = len(rest)
		}
		if comp := rest[:end]; hasMeta(comp) {
			var next []string
			for _, dir := range matches {
				next = h.appendMatches(next, dir, comp)
			}
			matches = next
		} else {
			// A run of plain components is one lookup: the path is there
			// only if every directory on the way is. Before a pattern it
			// needs none: listing a directory that is not there finds
			// nothing either.
			for end < len(rest) {
				next := strings.IndexByte(rest[end+1:], '/')
				if next < 0 {
					next = len(rest)
				} else {
					next += end + 1
				}
				if hasMeta(rest[end+1 : next]) {
					break
				}
				end = next
			}
			run, last := rest[:end], end == len(rest)
			next := matches[:0]
			for _, dir := range matches {
				if p := join(dir, run); !last || h.exists(p) {
					next = append(next, p)
				}
			}
			matches = next
		}
		if len(matches) == 0 {
			return nil, nil
		}
		if end == len(rest) {
			break
		}
		rest = rest[end+1:]
	}
	sort.Strings(matches)
	return matches, nil
}

// join is path.Join for a cleaned absolute dir and a cleaned relative
// name, without cleaning them again.
func join(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

// appendMatches appends to matches the paths of the entries of dir whose
// names match pattern.
func (h *Host) appendMatches(matches []string, dir, pattern string) []string {
	if c := h.fds.lock(); c != nil {
		defer c.mu.Unlock()
		return c.appendMatches(matches, dir, pattern)
	}
	entries, err := h.ReadDir(dir)
	if err != nil {
		return matches
	}
	for _, e := range entries {
		if ok, _ := path.Match(pattern, e.Name()); ok {
			matches = append(matches, join(dir, e.Name()))
		}
	}
	return matches
}

// exists reports whether p names something (a dangling symlink included),
// as Lstat would, through the remembered lookups of an observation handle.
func (h *Host) exists(p string) bool {
	if c := h.fds.lock(); c != nil {
		defer c.mu.Unlock()
		return c.exists(p)
	}
	if h.Live() || h.links == nil {
		_, err := h.Lstat(p)
		return err == nil
	}
	dir, err := h.resolveIn(path.Dir(p), true)
	if err != nil {
		return false
	}
	_, err = h.component(path.Join(dir, path.Base(p)))
	return err == nil
}

func hasMeta(s string) bool { return strings.ContainsAny(s, `*?[\`) }

// Command is one program run against the host, as an argv slice: gpuenv
// never builds a shell string.
type Command struct {
	Argv   []string
	Env    []string // added to the runner's environment
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// ExtraFiles are open in the command as file descriptors 3, 4, …, as
	// exec.Cmd's are: a package manager's machine-readable progress
	// comes on one (apt's APT::Status-Fd, dpkg's --status-fd), away from
	// its output for people. chroot(8) execs the command with the
	// descriptors it was given, so the numbers hold inside a root too.
	ExtraFiles []*os.File
}

// Runner runs commands. Implementations must not interpret Argv through a
// shell.
type Runner interface {
	Run(ctx context.Context, c Command) error
}

// hostWaitDelay is how long Run waits for a command's output to close
// after it exited or was killed: a daemon a maintainer script started may
// hold it open for good.
const hostWaitDelay = 5 * time.Second

// ExecRunner runs commands as child processes.
type ExecRunner struct{}

// Run starts c.Argv[0] found on PATH and waits for it.
func (ExecRunner) Run(ctx context.Context, c Command) error {
	if len(c.Argv) == 0 {
		return errors.New("empty command")
	}
	cmd := exec.CommandContext(ctx, c.Argv[0], c.Argv[1:]...)
	cmd.Env = append(os.Environ(), c.Env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.Stdin, c.Stdout, c.Stderr
	cmd.ExtraFiles = c.ExtraFiles
	// A process group of its own: Ctrl-C on the terminal reaches gpuenv,
	// which stops between operations and reverts, and not a package
	// manager in the middle of dpkg's work. When ctx ends (an observation
	// given up) the whole group goes; apply runs its operations with a
	// context that does not end.
	childproc.Group(cmd, hostWaitDelay)
	err := cmd.Run()
	if errors.Is(err, exec.ErrWaitDelay) && cmd.ProcessState.Success() {
		// The command succeeded; what a process it left running still
		// writes is not its output.
		err = nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", strings.Join(c.Argv, " "), err)
	}
	return nil
}

// RunTool runs a program of the machine gpuenv runs on, never the root's,
// whichever the root: observation reads a root's files with the machine's
// own tools, so that looking at a root (an image, a disk being prepared)
// never starts a program that root brought. The files it reads come to it
// as descriptors gpuenv opened inside the root (c.ExtraFiles).
func (h *Host) RunTool(ctx context.Context, c Command) error {
	return h.runner.Run(ctx, c)
}

// Run runs c inside the root: as it is on a live root, under chroot(8)
// otherwise, so that a package manager changes the root and never the
// machine running gpuenv.
func (h *Host) Run(ctx context.Context, c Command) error {
	if !h.Live() {
		c.Argv = append([]string{"chroot", h.root}, c.Argv...)
	}
	if h.commandLog == nil {
		return h.runner.Run(ctx, c)
	}
	start := time.Now()
	err := h.runner.Run(ctx, c)
	h.commandLog(c.Argv, time.Since(start), err)
	return err
}

// cleanPath is path.Clean(p). Nearly every path asked for is absolute
// and clean already, which a few searches for what Clean would change
// tell faster than Clean's pass over every byte; any other path is
// cleaned.
func cleanPath(p string) string {
	if isClean(p) {
		return p
	}
	return path.Clean(p)
}

// isClean reports whether p is an absolute path that path.Clean leaves as
// it is: no empty, "." or ".." element and no trailing slash.
func isClean(p string) bool {
	if p == "/" {
		return true
	}
	if len(p) < 2 || p[0] != '/' || p[len(p)-1] == '/' {
		return false
	}
	return !strings.Contains(p, "//") && !strings.Contains(p, "/./") && !strings.Contains(p, "/../") &&
		!strings.HasSuffix(p, "/.") && !strings.HasSuffix(p, "/..")
}
