// Package environment observes the environment a host sets up system-wide
// for GPU programs: the CUDA_*, NVIDIA_*, PATH and LD_LIBRARY_PATH
// assignments of /etc/environment, /etc/profile.d and systemd's
// DefaultEnvironment=, the dynamic loader's search path from
// /etc/ld.so.conf, which of gpuenv's own files exist, and the teams'
// CUDA_VISIBLE_DEVICES in /etc/gpuenv/teams.
//
// Shell scripts are not run: only the simple assignment lines that such
// files are made of ("export X=...", "X=...") are read, with their line,
// so that a plan can point at the line that sets a variable.
package environment

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
)

// Files read, and gpuenv's own files.
const (
	EnvironmentPath = "/etc/environment"
	ProfileDir      = "/etc/profile.d"
	SystemConf      = "/etc/systemd/system.conf"
	LdSoConf        = "/etc/ld.so.conf"
	LdSoConfDir     = "/etc/ld.so.conf.d"

	ManagedProfile   = "/etc/profile.d/gpuenv.sh"
	ManagedLdSoConf  = "/etc/ld.so.conf.d/gpuenv.conf"
	ManagedSystemd   = "/etc/systemd/system.conf.d/gpuenv.conf"
	ManagedBlacklist = "/etc/modprobe.d/gpuenv-blacklist-nouveau.conf"
)

// ManagedFiles are the files gpuenv writes, in the order Observe reports
// them.
var ManagedFiles = []string{ManagedBlacklist, ManagedLdSoConf, ManagedProfile, ManagedSystemd}

// systemdDropIns are the directories whose *.conf files extend
// system.conf, highest precedence first as systemd.syntax(7) lists them;
// Observe reads them in the order systemd applies them (lowest first).
var systemdDropIns = []string{
	"/etc/systemd/system.conf.d",
	"/run/systemd/system.conf.d",
	"/usr/local/lib/systemd/system.conf.d",
	"/usr/lib/systemd/system.conf.d",
}

// Interesting reports whether a variable is one gpuenv observes.
func Interesting(name string) bool {
	switch name {
	case "PATH", "LD_LIBRARY_PATH":
		return true
	}
	return strings.HasPrefix(name, "CUDA_") || strings.HasPrefix(name, "NVIDIA_")
}

// Observe reads the system-wide environment of h. Assignments are listed
// in the order the system applies them: /etc/environment (pam_env, at
// login), /etc/profile.d/*.sh in name order (login shells), then systemd's
// system.conf and its drop-ins (services). Loader paths are listed in
// ldconfig's order. Unreadable files are warnings naming them; missing
// ones are simply absent.
func Observe(h *host.Host) (facts.Environment, []facts.Warning) {
	out := facts.Environment{Variables: []facts.Assignment{}, LoaderPaths: []facts.LoaderPath{}}
	var warns []facts.Warning
	read := func(p string) ([]byte, bool) {
		data, err := h.ReadFile(p)
		if err != nil {
			if _, serr := h.Lstat(p); serr == nil {
				warns = append(warns, facts.Warning{Path: p, Message: err.Error()})
			}
			return nil, false
		}
		return data, true
	}

	if data, ok := read(EnvironmentPath); ok {
		as, problems := ParseEnvironmentFile(EnvironmentPath, data)
		out.Variables = append(out.Variables, as...)
		for _, p := range problems {
			warns = append(warns, facts.Warning{Path: EnvironmentPath, Message: p})
		}
	}

	scripts, _ := h.Glob(path.Join(ProfileDir, "*.sh"))
	for _, s := range scripts {
		if data, ok := read(s); ok {
			out.Variables = append(out.Variables, ParseShell(s, data)...)
		}
	}

	confs := []string{SystemConf}
	// Drop-ins with the same name override one another (highest
	// precedence wins); all are applied in name order after system.conf.
	byName := make(map[string]string)
	for i := len(systemdDropIns) - 1; i >= 0; i-- {
		files, _ := h.Glob(path.Join(systemdDropIns[i], "*.conf"))
		for _, f := range files {
			byName[path.Base(f)] = f
		}
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		confs = append(confs, byName[n])
	}
	for _, c := range confs {
		if data, ok := read(c); ok {
			out.Variables = append(out.Variables, ParseSystemd(c, data)...)
		}
	}

	loader, lw := observeLoader(h, read)
	out.LoaderPaths = append(out.LoaderPaths, loader...)
	warns = append(warns, lw...)

	for _, m := range ManagedFiles {
		if _, err := h.Lstat(m); err == nil {
			out.Managed = append(out.Managed, m)
			// The digest is "" for a file that cannot be read, which
			// then differs from any content the planner wants.
			sum, _ := h.SHA256(m)
			out.ManagedDigests = append(out.ManagedDigests, facts.FileDigest{Path: m, SHA256: sum})
		}
	}
	warns = append(warns, observeTeams(h, read, &out)...)
	return out, warns
}

// ParseEnvironmentFile reads pam_env's /etc/environment: "NAME=value"
// lines, the value optionally quoted, an optional "export " before.
func ParseEnvironmentFile(file string, data []byte) (as []facts.Assignment, problems []string) {
	for n, line := range lines(data) {
		t := strings.TrimSpace(line)
		if t == "" || t[0] == '#' {
			continue
		}
		name, value, ok := assignment(t)
		if !ok {
			problems = append(problems, fmt.Sprintf("line %d is not NAME=value: %.60q", n+1, t))
			continue
		}
		if Interesting(name) {
			as = append(as, facts.Assignment{Name: name, Value: value, File: file, Line: n + 1})
		}
	}
	return as, problems
}

// ParseShell reads the simple assignments of a profile script. Anything
// else (conditionals, functions, commands) is shell the system runs and
// gpuenv does not: it is passed over, and assignments inside an if block
// are still seen, indented as they are.
func ParseShell(file string, data []byte) []facts.Assignment {
	var as []facts.Assignment
	for n, line := range lines(data) {
		t := strings.TrimSpace(line)
		if t == "" || t[0] == '#' {
			continue
		}
		name, value, ok := assignment(t)
		if !ok {
			name, value, ok = pathIdiom(t)
		}
		if ok && Interesting(name) {
			as = append(as, facts.Assignment{Name: name, Value: value, File: file, Line: n + 1})
		}
	}
	return as
}

// assignment splits "export NAME=value", "NAME=value", "NAME="value"".
// A value is unquoted when one pair of quotes encloses it all, or when it
// is one shell word of quoted and unquoted parts ('/opt/x'"/bin:$PATH").
func assignment(t string) (name, value string, ok bool) {
	t = strings.TrimPrefix(t, "export ")
	t = strings.TrimLeft(t, " \t")
	name, value, ok = strings.Cut(t, "=")
	if !ok || !isName(name) {
		return "", "", false
	}
	value = strings.TrimSpace(value)
	if w, ok := shellWord(value); ok {
		return name, w, true
	}
	return name, unquote(value), true
}

// pathIdiom reads the line that adds a directory to PATH once, as
// gpuenv's profile script and many others write it:
//
//	case ":$PATH:" in *:/opt/x/bin:*) ;; *) export PATH='/opt/x'"/bin:$PATH" ;; esac
//
// as the assignment it makes where the directory is not there yet.
func pathIdiom(t string) (name, value string, ok bool) {
	rest, ok := strings.CutPrefix(t, `case ":$PATH:" in `)
	if !ok || !strings.HasSuffix(t, "esac") {
		return "", "", false
	}
	_, branch, ok := strings.Cut(rest, ";; *) ")
	if !ok {
		return "", "", false
	}
	branch, _, ok = strings.Cut(branch, " ;;")
	if !ok {
		return "", "", false
	}
	name, value, ok = assignment(branch)
	if !ok || name != "PATH" {
		return "", "", false
	}
	return name, value, true
}

// shellWord is the text of one shell word made of unquoted, '…' and "…"
// parts, with no expansion: "$PATH" stays as written; a backslash outside
// quotes escapes the next character. It is false for anything else (a
// space or an operator outside quotes, an unclosed quote).
func shellWord(v string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(v); {
		switch c := v[i]; c {
		case '\'':
			j := strings.IndexByte(v[i+1:], '\'')
			if j < 0 {
				return "", false
			}
			b.WriteString(v[i+1 : i+1+j])
			i += j + 2
		case '"':
			i++
			for {
				if i >= len(v) {
					return "", false
				}
				if v[i] == '"' {
					i++
					break
				}
				if v[i] == '\\' && i+1 < len(v) && strings.IndexByte("\"\\$`", v[i+1]) >= 0 {
					i++
				}
				b.WriteByte(v[i])
				i++
			}
		case '\\':
			if i+1 >= len(v) {
				return "", false
			}
			b.WriteByte(v[i+1])
			i += 2
		case ' ', '\t', ';', '&', '|', '(', ')', '<', '>', '`':
			return "", false
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String(), true
}

func isName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

func unquote(v string) string {
	if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] && !strings.ContainsRune(v[1:len(v)-1], rune(v[0])) {
		return v[1 : len(v)-1]
	}
	return v
}

// ParseSystemd reads DefaultEnvironment= settings of the [Manager] section
// of a systemd system.conf file. Each setting is a space-separated list of
// NAME=value words, a word optionally quoted ("NAME=a b").
func ParseSystemd(file string, data []byte) []facts.Assignment {
	var as []facts.Assignment
	section := ""
	for n, line := range lines(data) {
		t := strings.TrimSpace(line)
		if t == "" || t[0] == '#' || t[0] == ';' {
			continue
		}
		if t[0] == '[' {
			section = strings.Trim(t, "[]")
			continue
		}
		if section != "Manager" {
			continue
		}
		k, v, ok := strings.Cut(t, "=")
		if !ok || strings.TrimSpace(k) != "DefaultEnvironment" {
			continue
		}
		for _, word := range words(v) {
			name, value, ok := strings.Cut(word, "=")
			if ok && isName(name) && Interesting(name) {
				as = append(as, facts.Assignment{Name: name, Value: value, File: file, Line: n + 1})
			}
		}
	}
	return as
}

// words splits a systemd value into words, honouring double and single
// quotes and backslash escapes as systemd's extract_first_word does for
// environment lists.
func words(s string) []string {
	var out []string
	var cur strings.Builder
	in := false
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote == 0 && (c == '"' || c == '\''):
			quote, in = c, true
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			in = true
		case quote == 0 && (c == ' ' || c == '\t'):
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}

// observeLoader follows /etc/ld.so.conf and its include directives as
// ldconfig does.
func observeLoader(h *host.Host, read func(string) ([]byte, bool)) ([]facts.LoaderPath, []facts.Warning) {
	var out []facts.LoaderPath
	var warns []facts.Warning
	visited := make(map[string]bool)
	var walk func(file string)
	walk = func(file string) {
		if visited[file] {
			return
		}
		visited[file] = true
		data, ok := read(file)
		if !ok {
			return
		}
		for _, line := range lines(data) {
			if i := strings.IndexByte(line, '#'); i >= 0 {
				line = line[:i]
			}
			f := strings.Fields(line)
			if len(f) == 0 {
				continue
			}
			switch f[0] {
			case "include":
				for _, pat := range f[1:] {
					if !path.IsAbs(pat) {
						pat = path.Join(path.Dir(file), pat)
					}
					matches, err := h.Glob(pat)
					if err != nil {
						warns = append(warns, facts.Warning{Path: file, Message: err.Error()})
						continue
					}
					for _, m := range matches {
						walk(m)
					}
				}
			case "hwcap":
				// An obsolete directive of old glibc; it names no directory.
			default:
				for _, d := range loaderDirs(line) {
					out = append(out, facts.LoaderPath{Dir: d, File: file})
				}
			}
		}
	}
	if _, err := h.Lstat(LdSoConf); err != nil {
		if confs, _ := h.Glob(path.Join(LdSoConfDir, "*.conf")); len(confs) > 0 {
			warns = append(warns, facts.Warning{Path: LdSoConf, Message: "missing: ldconfig reads only this file, so the files in " + LdSoConfDir + " are not used"})
		}
		return out, warns
	}
	walk(LdSoConf)
	return out, warns
}

// loaderDirs are the directories a line of the loader's configuration
// names (comments and directives aside): ldconfig splits them at blanks,
// colons and commas.
func loaderDirs(line string) []string {
	if i := strings.IndexByte(line, '#'); i >= 0 {
		line = line[:i]
	}
	return strings.FieldsFunc(line, func(r rune) bool {
		return r == ' ' || r == '\t' || r == ':' || r == ','
	})
}

func lines(data []byte) []string {
	s := strings.ReplaceAll(string(data), "\r\n", "\n")
	return strings.Split(s, "\n")
}
