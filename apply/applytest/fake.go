// Package applytest is the fake-host tier of apply's tests: programs that
// stand in for apt-get, apt-cache, apt-mark, dpkg, dpkg-deb, groupadd,
// groupdel, gpasswd, systemctl, ldconfig, python/pip and chroot, changing
// a fixture root the way the real tools change a real one; fixtures
// (package archives, wheels); and the "same host" comparison.
//
// The fakes are Go functions. Tests of package apply run them in-process
// through Runner, a host.Runner; the CLI's testscript tests register them
// as commands with Main. Either way, the command gpuenv runs inside a
// fixture root arrives as "chroot ROOT argv…", exactly as on a real host,
// and the fake chroot hands argv to the fake program with the root known.
//
// A fake fails on demand: the environment variable GPUENV_FAKE_FAIL lists
// "program" or "program:subcommand" entries (comma-separated); the first
// call an entry matches exits non-zero before changing anything, or, with
// the suffix "@half" on apt-get install, after installing and leaving the
// last package half-configured, as an interrupted dpkg does. Later calls
// succeed, so that the revert after the failure can be checked; an entry
// listed twice fails two calls.
package applytest

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gpuenv/gpuenv/providers/host"
)

// Environment variables the fakes read.
const (
	// EnvRoot is the fixture root a fake acts on; the fake chroot sets it.
	EnvRoot = "GPUENV_FAKE_ROOT"
	// EnvDir is the working directory inside the root (env -C).
	EnvDir = "GPUENV_FAKE_DIR"
	// EnvArchive is the directory of fake .deb files apt-get installs
	// and downloads from.
	EnvArchive = "GPUENV_FAKE_ARCHIVE"
	// EnvFail names the calls that fail (see the package comment).
	EnvFail = "GPUENV_FAKE_FAIL"
	// EnvCalls, when set, is a file on this machine to which every call
	// is appended as one line, for tests that check what ran.
	EnvCalls = "GPUENV_FAKE_CALLS"
)

// Call is one run of a fake program.
type Call struct {
	Name string
	// Argv0 is the program as called (a venv's /opt/venv/bin/python).
	Argv0  string
	Args   []string
	Root   string // on this machine
	Dir    string // working directory inside the root
	Env    func(string) string
	Stdout io.Writer
	Stderr io.Writer
	// Files are the descriptors from 3 on that the command was given
	// (host.Command's ExtraFiles), for a fake run in-process; a fake run
	// as a process of its own (Main) has them as its own descriptors.
	Files     []*os.File
	inProcess bool
	h         *host.Host
}

// Programs are the fakes by name.
var Programs = map[string]func(*Call) int{}

func init() {
	Programs["chroot"] = fakeChroot
	Programs["env"] = fakeEnv
	Programs["apt-get"] = fakeAptGet
	Programs["apt-mark"] = fakeAptMark
	Programs["apt-cache"] = fakeAptCache
	Programs["dpkg"] = fakeDpkg
	Programs["dpkg-deb"] = fakeDpkgDeb
	Programs["groupadd"] = fakeGroupadd
	Programs["groupdel"] = fakeGroupdel
	Programs["gpasswd"] = fakeGpasswd
	Programs["systemctl"] = fakeSystemctl
	Programs["ldconfig"] = fakeLdconfig
	Programs["python"] = fakePython
	Programs["python3"] = fakePython
}

// lookup finds the fake for argv[0]: by name, or by the base name of a
// path (a venv's /opt/venv/bin/python).
func lookup(argv0 string) (func(*Call) int, string) {
	base := path.Base(argv0)
	if f, ok := Programs[base]; ok {
		return f, base
	}
	if strings.HasPrefix(base, "python") {
		return fakePython, base
	}
	return nil, base
}

// Dispatch runs argv as the fake it names.
func Dispatch(c *Call, argv []string) int {
	if len(argv) == 0 {
		fmt.Fprintln(c.Stderr, "fake: empty command")
		return 2
	}
	f, base := lookup(argv[0])
	if f == nil {
		fmt.Fprintf(c.Stderr, "fake: %s: command not found in the fake host\n", argv[0])
		return 127
	}
	next := *c
	next.Name = base
	next.Argv0 = argv[0]
	next.Args = argv[1:]
	if next.Root == "" {
		next.Root = "/"
	}
	if next.Dir == "" {
		next.Dir = "/"
	}
	h, err := host.New(next.Root)
	if err != nil {
		fmt.Fprintln(c.Stderr, err)
		return 2
	}
	next.h = h
	if p := next.Env(EnvCalls); p != "" {
		if f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644); err == nil {
			fmt.Fprintf(f, "%s %s\n", base, strings.Join(argv[1:], " "))
			f.Close()
		}
	}
	if next.Name != "chroot" && next.Name != "env" {
		if code, fail := next.shouldFail(""); fail {
			return code
		}
	}
	return f(&next)
}

// shouldFail reports whether EnvFail lists this call: "name" or
// "name:sub", where sub is the first argument that is not an option.
// mode "" asks about failing before any change; "half" about failing
// after.
func (c *Call) shouldFail(mode string) (int, bool) {
	sub := ""
	for i := 0; i < len(c.Args); i++ {
		a := c.Args[i]
		if a == "-o" || a == "-C" {
			i++
			continue
		}
		if !strings.HasPrefix(a, "-") {
			sub = a
			break
		}
		if strings.HasPrefix(c.Name, "python") && a == "-m" && i+1 < len(c.Args) {
			// "python -m venv" is python:venv; "python -m pip install"
			// is pip:install.
			sub = c.Args[i+1]
			if sub == "pip" && i+2 < len(c.Args) {
				sub = c.Args[i+2]
			}
			break
		}
		if c.Name == "dpkg" {
			sub = strings.TrimLeft(a, "-")
			break
		}
	}
	for i, e := range strings.Split(c.Env(EnvFail), ",") {
		e = strings.TrimSpace(e)
		name, m, _ := strings.Cut(e, "@")
		if m != mode {
			continue
		}
		py := strings.HasPrefix(c.Name, "python")
		if name == c.Name || name == c.Name+":"+sub || (py && (name == "pip:"+sub || name == "python:"+sub)) {
			// Each entry fails once, as a flaky mirror or a full disk
			// does; the revert that follows then works. The record of
			// it is kept beside the root, outside it.
			marker := fmt.Sprintf("%s.fake-failed-%d", filepath.Clean(c.Root), i)
			if _, err := os.Stat(marker); err == nil {
				continue
			}
			os.WriteFile(marker, nil, 0o644)
			fmt.Fprintf(c.Stderr, "fake %s: failing on demand (%s=%s)\n", c.Name, EnvFail, e)
			return 100, true
		}
	}
	return 0, false
}

// fd is file descriptor n of the command, as a program writes to the
// descriptor its caller names (apt's APT::Status-Fd=N, dpkg's
// --status-fd N); nil when the command was not given one.
func (c *Call) fd(n int) *os.File {
	if !c.inProcess {
		f := os.NewFile(uintptr(n), fmt.Sprintf("fd %d", n))
		if _, err := f.Stat(); err != nil {
			return nil
		}
		return f
	}
	if n < 3 || n-3 >= len(c.Files) {
		return nil
	}
	return c.Files[n-3]
}

func (c *Call) errorf(code int, format string, args ...any) int {
	fmt.Fprintf(c.Stderr, format+"\n", args...)
	return code
}

// path is where p, inside the root, is on this machine; a relative p is
// relative to the working directory.
func (c *Call) path(p string) string {
	if !path.IsAbs(p) {
		p = path.Join(c.Dir, p)
	}
	rp, err := c.h.Resolve(p)
	if err != nil {
		return filepath.Join(c.Root, p)
	}
	return rp
}

// lpath is path without following a symlink in the last component: the
// entry itself, to remove or to Lstat.
func (c *Call) lpath(p string) string {
	if !path.IsAbs(p) {
		p = path.Join(c.Dir, p)
	}
	return filepath.Join(c.path(path.Dir(p)), path.Base(p))
}

func (c *Call) readFile(p string) ([]byte, error) { return os.ReadFile(c.path(p)) }

func (c *Call) writeFile(p string, data []byte, mode os.FileMode) error {
	rp := c.path(p)
	if err := os.MkdirAll(filepath.Dir(rp), 0o755); err != nil {
		return err
	}
	tmp := rp + ".fake-tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return err
	}
	return os.Rename(tmp, rp)
}

// fakeChroot runs "chroot ROOT argv…": the rest of argv as a fake, acting
// on ROOT.
func fakeChroot(c *Call) int {
	if len(c.Args) < 2 {
		return c.errorf(125, "chroot: missing operand")
	}
	next := *c
	next.Root = c.Args[0]
	next.Dir = "/"
	return Dispatch(&next, c.Args[1:])
}

// fakeEnv supports the one form gpuenv uses: env -C DIR argv…
func fakeEnv(c *Call) int {
	args := c.Args
	next := *c
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		switch {
		case args[0] == "-C" && len(args) > 1:
			next.Dir = args[1]
			args = args[2:]
		case strings.HasPrefix(args[0], "--chdir="):
			next.Dir = strings.TrimPrefix(args[0], "--chdir=")
			args = args[1:]
		default:
			return c.errorf(125, "env: unsupported option %s", args[0])
		}
	}
	if fi, err := os.Stat(next.path(next.Dir)); err != nil || !fi.IsDir() {
		return c.errorf(125, "env: cannot change directory to '%s': No such file or directory", next.Dir)
	}
	return Dispatch(&next, args)
}

// Runner is a host.Runner that runs commands as the fakes, in-process.
type Runner struct {
	// Env is added to this process's environment for every call, after
	// which each command's own Env is added.
	Env []string
}

// Run implements host.Runner.
func (r *Runner) Run(ctx context.Context, cmd host.Command) error {
	env := slices.Concat(os.Environ(), r.Env, cmd.Env)
	get := func(k string) string {
		for i := len(env) - 1; i >= 0; i-- {
			if kk, v, ok := strings.Cut(env[i], "="); ok && kk == k {
				return v
			}
		}
		return ""
	}
	stdout, stderr := cmd.Stdout, cmd.Stderr
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	c := &Call{Root: "/", Dir: "/", Env: get, Stdout: stdout, Stderr: stderr, Files: cmd.ExtraFiles, inProcess: true}
	if code := Dispatch(c, cmd.Argv); code != 0 {
		return fmt.Errorf("%s: exit status %d", strings.Join(cmd.Argv, " "), code)
	}
	return nil
}

var _ host.Runner = (*Runner)(nil)

// Main is the entry point of a fake registered as a testscript command:
// it runs the fake named name with this process's arguments and
// environment, and exits with its status.
func Main(name string) func() {
	return func() {
		c := &Call{Root: "/", Dir: "/", Env: os.Getenv, Stdout: os.Stdout, Stderr: os.Stderr}
		if r := os.Getenv(EnvRoot); r != "" {
			c.Root = r
		}
		os.Exit(Dispatch(c, append([]string{name}, os.Args[1:]...)))
	}
}
