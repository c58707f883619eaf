// Package session observes the environment GPU programs are started in
// beyond the system's configuration: the invoking user's shell start-up
// files, a running job's /proc/PID/environ, and the driver stub libraries
// that any of their LD_LIBRARY_PATH settings bring within reach of the
// loader.
//
// Shell files are read as text and only their plain assignments are
// taken (environment.ParseShell): a shell is never run, so a setting
// made by a command or a condition gpuenv cannot evaluate is missed
// rather than guessed.
package session

import (
	"bytes"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/environment"
	"github.com/gpuenv/gpuenv/providers/host"
)

// ShellFiles are the start-up files of the user's login and interactive
// shells, relative to the home directory, in the order bash reads them
// (a login shell reads the first of .bash_profile, .bash_login and
// .profile that exists; Debian's .profile then sources .bashrc). All are
// read: a setting in any of them reaches some of the user's sessions.
var ShellFiles = []string{".bash_profile", ".bash_login", ".profile", ".bashrc"}

// EnvironLimit bounds the bytes read of /proc/PID/environ. Linux caps a
// process's arguments and environment together at a quarter of its stack
// limit; a job whose environment is larger is read up to here and said
// to be truncated.
const EnvironLimit = 1 << 20

// Options name the sources besides the system's.
type Options struct {
	// Home is the invoking user's home directory inside the root; "" when
	// the user is unknown.
	Home string
	// PID is the process whose environment is read (doctor --pid); 0 for
	// none.
	PID int
	// Session holds the variables of the environment gpuenv was started
	// from, as the command line's caller gave them.
	Session []facts.Assignment
	// System are the system-wide settings (facts.Environment.Variables).
	System []facts.Assignment
	// LoaderPaths are the ld.so.conf directories
	// (facts.Environment.LoaderPaths).
	LoaderPaths []facts.LoaderPath
}

// Observe reads the sources opts names.
func Observe(h *host.Host, opts Options) (facts.Session, []facts.Warning) {
	out := facts.Session{ShellFiles: []facts.Assignment{}, StubLibraries: []facts.StubLibrary{}}
	var warns []facts.Warning
	if opts.Home != "" && path.IsAbs(opts.Home) {
		for _, f := range ShellFiles {
			p := path.Join(opts.Home, f)
			data, err := h.ReadFile(p)
			if err != nil {
				if _, serr := h.Lstat(p); serr == nil {
					warns = append(warns, facts.Warning{Path: p, Message: err.Error()})
				}
				continue
			}
			out.ShellFiles = append(out.ShellFiles, environment.ParseShell(p, data)...)
		}
	}
	if opts.PID > 0 {
		out.Process = ReadEnviron(h, opts.PID)
		if out.Process.Error != "" {
			warns = append(warns, facts.Warning{Path: out.Process.File, Message: out.Process.Error})
		}
	}
	settings := append(append([]facts.Assignment{}, opts.System...), out.ShellFiles...)
	settings = append(settings, opts.Session...)
	if out.Process != nil {
		settings = append(settings, out.Process.Variables...)
	}
	// A stubs directory in ld.so.conf reaches every program through the
	// cache; it is reported as a setting of the file that names it.
	for _, lp := range opts.LoaderPaths {
		settings = append(settings, facts.Assignment{Name: "LD_LIBRARY_PATH", Value: lp.Dir, File: lp.File})
	}
	out.StubLibraries = stubLibraries(h, settings)
	return out, warns
}

// ReadEnviron reads /proc/PID/environ inside the root, at most
// EnvironLimit bytes of it, and keeps the variables gpuenv observes.
func ReadEnviron(h *host.Host, pid int) *facts.ProcessEnvironment {
	p := &facts.ProcessEnvironment{PID: pid, File: "/proc/" + strconv.Itoa(pid) + "/environ", Variables: []facts.Assignment{}}
	f, err := h.Open(p.File)
	if err != nil {
		p.Error = fmt.Sprintf("process %d: %v", pid, err)
		return p
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, EnvironLimit+1))
	if err != nil {
		p.Error = fmt.Sprintf("process %d: %v", pid, err)
		return p
	}
	if len(data) > EnvironLimit {
		data, p.Truncated = data[:EnvironLimit], true
		// The last entry may be cut in the middle: drop it.
		if i := bytes.LastIndexByte(data, 0); i >= 0 {
			data = data[:i]
		}
	}
	p.Variables = ParseEnviron(p.File, data)
	return p
}

// ParseEnviron splits a NUL-separated environment block into the
// variables gpuenv observes. Line is the entry's position (1-based), so
// that a finding can say which entry it read.
func ParseEnviron(file string, data []byte) []facts.Assignment {
	out := []facts.Assignment{}
	for i, kv := range bytes.Split(data, []byte{0}) {
		k, v, ok := strings.Cut(string(kv), "=")
		if !ok || !environment.Interesting(k) {
			continue
		}
		out = append(out, facts.Assignment{Name: k, Value: v, File: file, Line: i + 1})
	}
	return out
}

// stubLibraries finds the driver stubs in the directories the
// LD_LIBRARY_PATH settings name. A stub is a libcuda.so* (or libnvidia-ml
// .so*) in a directory named stubs, or a link that leads into one: the
// CUDA toolkit ships them to link against where no driver is installed,
// and at run time they fail every call (CUDA_ERROR_STUB_LIBRARY).
func stubLibraries(h *host.Host, settings []facts.Assignment) []facts.StubLibrary {
	out := []facts.StubLibrary{}
	seen := map[string]bool{}
	for _, a := range settings {
		if a.Name != "LD_LIBRARY_PATH" {
			continue
		}
		for _, dir := range strings.Split(a.Value, ":") {
			dir = strings.TrimSpace(dir)
			if !path.IsAbs(dir) || strings.Contains(dir, "$") {
				continue
			}
			dir = path.Clean(dir)
			for _, name := range []string{"libcuda.so", "libcuda.so.1", "libnvidia-ml.so", "libnvidia-ml.so.1"} {
				p := path.Join(dir, name)
				key := p + "\x00" + a.File + "\x00" + strconv.Itoa(a.Line)
				if seen[key] {
					continue
				}
				if _, err := h.Lstat(p); err != nil {
					continue
				}
				real, err := h.EvalSymlinks(p)
				if err != nil {
					real = ""
				}
				if !inStubs(dir) && !inStubs(real) {
					continue
				}
				seen[key] = true
				out = append(out, facts.StubLibrary{Path: p, Real: real, Setting: a})
			}
		}
	}
	return out
}

// inStubs reports whether p lies in a directory named stubs.
func inStubs(p string) bool {
	for _, part := range strings.Split(p, "/") {
		if part == "stubs" {
			return true
		}
	}
	return false
}
