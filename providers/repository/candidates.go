package repository

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/spec/lazyregexp"
	"github.com/gpuenv/gpuenv/spec/version"
)

// Candidates asks the root's package managers which versions of a package
// they can install: apt through apt-cache policy, dnf through dnf
// --showduplicates list. Each command runs inside the root (host.Run),
// as an argv slice with names checked first, under LC_ALL=C so that the
// output is the one the parsers read. apt-cache reads the lists files
// itself, compressed or not. Answers are cached for the life of the value,
// which is one plan.
type Candidates struct {
	host *host.Host

	mu    sync.Mutex
	cache map[string][]string
	// expected are names a provider may ask about, by manager: the first
	// question asks about them all in the same command, since apt-cache
	// reads every lists file on each start (seconds where the image
	// dropped its package cache).
	expected map[string][]string
	// runs counts the commands started (Runs), so that "a converged host
	// starts no process" can be checked.
	runs int
}

var _ planner.Candidates = (*Candidates)(nil)

// NewCandidates returns a Candidates for h.
func NewCandidates(h *host.Host) *Candidates {
	return &Candidates{host: h, cache: map[string][]string{}, expected: map[string][]string{}}
}

// Expect registers names that providers may ask about, without starting
// anything: the first Versions call for that manager asks about them
// too.
func (c *Candidates) Expect(manager string, names ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range names {
		if !slices.Contains(c.expected[manager], n) {
			c.expected[manager] = append(c.expected[manager], n)
		}
	}
}

// Runs reports how many package-manager commands were started.
func (c *Candidates) Runs() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs
}

// debName is a Debian package name (Debian Policy 5.6.1), optionally with
// an architecture; rpmName is what RPM allows in a name.
var (
	debName = lazyregexp.New(`^[a-z0-9][a-z0-9+.-]+(:[a-z0-9-]+)?$`)
	rpmName = lazyregexp.New(`^[A-Za-z0-9][A-Za-z0-9+._-]*$`)
)

// Versions lists the versions of name that manager can install, newest
// first. A version only in the package database (installed, no longer in
// any archive) is not installable and not listed.
func (c *Candidates) Versions(ctx context.Context, manager, name string) ([]string, error) {
	key := manager + "\x00" + name
	c.mu.Lock()
	if v, ok := c.cache[key]; ok {
		c.mu.Unlock()
		return v, nil
	}
	batch := []string{name}
	for _, n := range c.expected[manager] {
		if _, done := c.cache[manager+"\x00"+n]; !done && n != name && validName(manager, n) {
			batch = append(batch, n)
		}
	}
	c.mu.Unlock()
	if !validName(manager, name) {
		return nil, fmt.Errorf("%q is not a package name %s accepts", name, manager)
	}
	var argv []string
	switch manager {
	case "apt":
		argv = append([]string{"apt-cache", "policy"}, batch...)
	case "dnf":
		argv = append([]string{"dnf", "--quiet", "--showduplicates", "list"}, batch...)
	default:
		return nil, fmt.Errorf("unknown package manager %q", manager)
	}
	var out, errb bytes.Buffer
	c.mu.Lock()
	c.runs++
	c.mu.Unlock()
	err := c.host.Run(ctx, host.Command{Argv: argv, Env: []string{"LC_ALL=C"}, Stdout: &out, Stderr: &errb})
	found := map[string][]string{}
	switch manager {
	case "apt":
		if err != nil {
			return nil, fmt.Errorf("asking apt about %s: %w: %s", strings.Join(batch, " "), err, strings.TrimSpace(errb.String()))
		}
		pols, perr := ParseAptPolicy(out.Bytes())
		if perr != nil {
			return nil, fmt.Errorf("reading apt-cache policy %s: %w", strings.Join(batch, " "), perr)
		}
		for _, p := range pols {
			found[p.Name] = p.Installable()
		}
	case "dnf":
		// dnf exits 1 with "No matching Packages to list" when it knows
		// none of the names, which is an answer, not a failure.
		if err != nil && !strings.Contains(errb.String()+out.String(), "No matching Packages") {
			return nil, fmt.Errorf("asking dnf about %s: %w: %s", strings.Join(batch, " "), err, strings.TrimSpace(errb.String()))
		}
		for _, p := range ParseDnfList(out.Bytes()) {
			if !p.Installed && !slices.Contains(found[p.Name], p.Version) {
				found[p.Name] = append(found[p.Name], p.Version)
			}
		}
		for n := range found {
			slices.SortFunc(found[n], func(a, b string) int { return CompareRPM(b, a) })
		}
	}
	c.mu.Lock()
	for _, n := range batch {
		c.cache[manager+"\x00"+n] = found[n]
	}
	c.mu.Unlock()
	return found[name], nil
}

// validName checks a package name before it goes on a command line.
func validName(manager, name string) bool {
	switch manager {
	case "apt":
		return debName.MatchString(name)
	case "dnf":
		return rpmName.MatchString(name)
	}
	return false
}

// AptPolicy is one package of apt-cache policy's output.
type AptPolicy struct {
	Name      string
	Installed string // "" for "(none)"
	Candidate string // "" for "(none)"
	Versions  []AptVersion
}

// AptVersion is one line of a version table and the sources under it.
type AptVersion struct {
	Version   string
	Priority  int
	Installed bool // marked "***"
	Sources   []AptSource
}

// AptSource is where a version comes from: an archive ("500
// http://deb.debian.org/debian bookworm/non-free amd64 Packages") or the
// package database ("100 /var/lib/dpkg/status").
type AptSource struct {
	Priority int
	Where    string
}

// StatusFile is the package database as apt-cache names it among sources.
const StatusFile = "/var/lib/dpkg/status"

// Archive reports whether the version is in an archive rather than only in
// the package database.
func (v AptVersion) Archive() bool {
	return slices.ContainsFunc(v.Sources, func(s AptSource) bool { return s.Where != StatusFile })
}

// Suites lists the archive suites and components ("bookworm/non-free")
// the version is in.
func (v AptVersion) Suites() []string {
	var out []string
	for _, s := range v.Sources {
		f := strings.Fields(s.Where)
		if len(f) >= 2 && s.Where != StatusFile {
			out = append(out, f[1])
		}
	}
	return out
}

// Installable lists the versions some archive has, newest first.
func (p AptPolicy) Installable() []string {
	var out []string
	for _, v := range p.Versions {
		if v.Archive() && !slices.Contains(out, v.Version) {
			out = append(out, v.Version)
		}
	}
	slices.SortStableFunc(out, func(a, b string) int {
		c, err := version.CompareDebian(b, a)
		if err != nil {
			return strings.Compare(b, a)
		}
		return c
	})
	return out
}

// ParseAptPolicy reads apt-cache policy's output for one or more packages
// (LC_ALL=C). A name apt does not know prints nothing and is absent from
// the result; a virtual package has no versions.
func ParseAptPolicy(data []byte) ([]AptPolicy, error) {
	var out []AptPolicy
	var cur *AptPolicy
	var ver *AptVersion
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	line := 0
	for sc.Scan() {
		line++
		s := sc.Text()
		trimmed := strings.TrimSpace(s)
		switch {
		case trimmed == "":
			continue
		case !strings.HasPrefix(s, " ") && strings.HasSuffix(s, ":"):
			out = append(out, AptPolicy{Name: strings.TrimSuffix(s, ":")})
			cur, ver = &out[len(out)-1], nil
			continue
		case cur == nil:
			return nil, fmt.Errorf("line %d: %q outside a package", line, s)
		}
		if k, v, ok := strings.Cut(trimmed, ":"); ok && !strings.HasPrefix(s, "    ") {
			val := strings.TrimSpace(v)
			if val == "(none)" {
				val = ""
			}
			switch k {
			case "Installed":
				cur.Installed = val
			case "Candidate":
				cur.Candidate = val
			}
			// "Version table:" and "Package pin:" need nothing more.
			continue
		}
		f := strings.Fields(trimmed)
		installed := false
		if f[0] == "***" {
			installed, f = true, f[1:]
		}
		// A version line has the version and its priority; a source line
		// starts with the priority and is indented deeper.
		if len(f) >= 2 && (installed || !isNumber(f[0])) {
			prio, err := strconv.Atoi(f[len(f)-1])
			if err != nil {
				return nil, fmt.Errorf("line %d: priority %q: %w", line, f[len(f)-1], err)
			}
			cur.Versions = append(cur.Versions, AptVersion{Version: f[0], Priority: prio, Installed: installed})
			ver = &cur.Versions[len(cur.Versions)-1]
			continue
		}
		if len(f) >= 2 && ver != nil {
			prio, _ := strconv.Atoi(f[0])
			ver.Sources = append(ver.Sources, AptSource{Priority: prio, Where: strings.Join(f[1:], " ")})
			continue
		}
		return nil, fmt.Errorf("line %d: unexpected %q", line, s)
	}
	return out, sc.Err()
}

func isNumber(s string) bool {
	_, err := strconv.Atoi(s)
	return err == nil
}

// MadisonLine is one line of apt-cache madison.
type MadisonLine struct {
	Name, Version, Source string
}

// ParseMadison reads apt-cache madison's "name | version | source" lines.
func ParseMadison(data []byte) ([]MadisonLine, error) {
	var out []MadisonLine
	for i, l := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		f := strings.Split(l, "|")
		if len(f) != 3 {
			return nil, fmt.Errorf("line %d: %q is not name | version | source", i+1, l)
		}
		out = append(out, MadisonLine{Name: strings.TrimSpace(f[0]), Version: strings.TrimSpace(f[1]), Source: strings.TrimSpace(f[2])})
	}
	return out, nil
}

// DnfPackage is one package line of dnf list.
type DnfPackage struct {
	Name, Arch string
	// Version is [epoch:]version-release, as dnf prints it.
	Version   string
	Repo      string
	Installed bool
}

// ParseDnfList reads dnf list --showduplicates output (dnf 4 and 5): the
// "Installed Packages" and "Available Packages" sections, each line
// "name.arch version-release repo", where a long name.arch goes on a line
// of its own and the rest follows on the next.
func ParseDnfList(data []byte) []DnfPackage {
	var out []DnfPackage
	installed := false
	var pending []string
	for _, l := range strings.Split(string(data), "\n") {
		t := strings.TrimSpace(l)
		low := strings.ToLower(t)
		switch {
		case t == "":
			continue
		case strings.HasPrefix(low, "installed packages"):
			installed, pending = true, nil
			continue
		case strings.HasPrefix(low, "available packages"):
			installed, pending = false, nil
			continue
		case strings.HasPrefix(low, "last metadata expiration"), strings.HasPrefix(low, "updating and loading"), strings.HasPrefix(low, "repositories loaded"):
			continue
		}
		f := append(pending, strings.Fields(t)...)
		pending = nil
		if len(f) < 3 {
			pending = f
			continue
		}
		name, arch, ok := strings.Cut(f[0], ".")
		if i := strings.LastIndex(f[0], "."); i > 0 {
			name, arch, ok = f[0][:i], f[0][i+1:], true
		}
		if !ok {
			continue
		}
		out = append(out, DnfPackage{Name: name, Arch: arch, Version: f[1], Repo: strings.TrimPrefix(f[2], "@"), Installed: installed || strings.HasPrefix(f[2], "@")})
	}
	return out
}

// CompareRPM orders [epoch:]version-release strings as rpm does
// (rpmvercmp on each part), returning -1, 0 or +1.
func CompareRPM(a, b string) int {
	ea, va, ra := splitEVR(a)
	eb, vb, rb := splitEVR(b)
	if c := rpmvercmp(ea, eb); c != 0 {
		return c
	}
	if c := rpmvercmp(va, vb); c != 0 {
		return c
	}
	return rpmvercmp(ra, rb)
}

func splitEVR(s string) (epoch, ver, rel string) {
	epoch = "0"
	if e, rest, ok := strings.Cut(s, ":"); ok {
		epoch, s = e, rest
	}
	if i := strings.LastIndex(s, "-"); i >= 0 {
		return epoch, s[:i], s[i+1:]
	}
	return epoch, s, ""
}

// rpmvercmp compares alternating runs of digits and letters, skipping
// other characters; "~" sorts before everything, as in rpm.
func rpmvercmp(a, b string) int {
	isAlnum := func(c byte) bool {
		return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
	}
	for len(a) > 0 || len(b) > 0 {
		for len(a) > 0 && !isAlnum(a[0]) && a[0] != '~' {
			a = a[1:]
		}
		for len(b) > 0 && !isAlnum(b[0]) && b[0] != '~' {
			b = b[1:]
		}
		if len(a) > 0 && a[0] == '~' || len(b) > 0 && b[0] == '~' {
			switch {
			case len(a) == 0 || a[0] != '~':
				return 1
			case len(b) == 0 || b[0] != '~':
				return -1
			}
			a, b = a[1:], b[1:]
			continue
		}
		if len(a) == 0 || len(b) == 0 {
			break
		}
		digit := a[0] >= '0' && a[0] <= '9'
		run := func(s string) (string, string) {
			i := 0
			for i < len(s) && isAlnum(s[i]) && (s[i] >= '0' && s[i] <= '9') == digit {
				i++
			}
			return s[:i], s[i:]
		}
		var x, y string
		x, a = run(a)
		y, b = run(b)
		if y == "" {
			// A number is newer than letters.
			if digit {
				return 1
			}
			return -1
		}
		if digit {
			x, y = strings.TrimLeft(x, "0"), strings.TrimLeft(y, "0")
			if len(x) != len(y) {
				return cmpInt(len(x), len(y))
			}
		}
		if c := strings.Compare(x, y); c != 0 {
			return c
		}
	}
	switch {
	case len(a) == 0 && len(b) == 0:
		return 0
	case len(a) == 0:
		return -1
	}
	return 1
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
