package pkgkit

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/gpuenv/gpuenv/internal/childproc"
	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/pkgdb"
	"github.com/gpuenv/gpuenv/spec/lazyregexp"
	"github.com/gpuenv/gpuenv/spec/version"
)

// Candidates answers which versions of a package the root's package
// managers can install: from the package indexes on disk where the plan's
// observation holds them (UseIndexes), which starts no process;
// otherwise, where the lists were never fetched or for a package the
// observation does not keep, by asking apt through apt-cache policy and
// dnf through dnf --showduplicates list. Each command runs inside the root (host.Run),
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
	expected map[plan.Manager][]string
	// runs counts the commands started (Runs), so that "a converged host
	// starts no process" can be checked.
	runs int
	// indexes are the package indexes on disk (UseIndexes), which answer
	// instead of a command wherever they hold the manager's.
	indexes *facts.PackageIndexes
}

var _ planner.Candidates = (*Candidates)(nil)

// NewCandidates returns a Candidates for h.
func NewCandidates(h *host.Host) *Candidates {
	return &Candidates{host: h, cache: map[string][]string{}, expected: map[plan.Manager][]string{}}
}

// NewFactsCandidates returns a Candidates for a host known only by a saved
// observation (plan --facts): it answers from the observation's package
// indexes alone, and a question they cannot answer is an error naming
// the fact the observation lacks. It never starts a process: the package
// manager of the machine planning is not the host's.
func NewFactsCandidates() *Candidates {
	return NewCandidates(nil)
}

// Expect registers names that providers may ask about, without starting
// anything: the first Versions call for that manager asks about them
// too.
func (c *Candidates) Expect(manager plan.Manager, names ...string) {
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
func (c *Candidates) Versions(ctx context.Context, manager plan.Manager, name string) ([]string, error) {
	key := string(manager) + "\x00" + name
	c.mu.Lock()
	if v, ok := c.cache[key]; ok {
		c.mu.Unlock()
		return v, nil
	}
	batch := []string{name}
	for _, n := range c.expected[manager] {
		if _, done := c.cache[string(manager)+"\x00"+n]; !done && n != name && validName(manager, n) {
			batch = append(batch, n)
		}
	}
	c.mu.Unlock()
	if !validName(manager, name) {
		return nil, fmt.Errorf("%q is not a package name %s accepts", name, manager)
	}
	if v, ok := c.fromIndexes(manager, name); ok {
		return v, nil
	}
	if c.host == nil {
		return nil, c.unobserved(manager, name)
	}
	var argv []string
	switch manager {
	case plan.ManagerApt:
		argv = append([]string{"apt-cache", "policy"}, batch...)
	case plan.ManagerDnf:
		argv = append([]string{"dnf", "--quiet", "--showduplicates", "list"}, batch...)
	default:
		return nil, fmt.Errorf("unknown package manager %q", manager)
	}
	var out bytes.Buffer
	var errb childproc.Tail
	c.mu.Lock()
	c.runs++
	c.mu.Unlock()
	err := c.host.Run(ctx, host.Command{Argv: argv, Env: []string{"LC_ALL=C"}, Stdout: &out, Stderr: &errb})
	found := map[string][]string{}
	switch manager {
	case plan.ManagerApt:
		if err != nil {
			return nil, fmt.Errorf("asking apt about %s: %w: %s", strings.Join(batch, " "), err, errb.Text(0))
		}
		pols, perr := pkgdb.ParseAptPolicy(out.Bytes())
		if perr != nil {
			return nil, fmt.Errorf("reading apt-cache policy %s: %w", strings.Join(batch, " "), perr)
		}
		for _, p := range pols {
			found[p.Name] = p.Installable()
		}
	case plan.ManagerDnf:
		// dnf exits 1 with "No matching Packages to list" when it knows
		// none of the names, which is an answer, not a failure.
		if err != nil && !strings.Contains(string(errb.Bytes())+out.String(), "No matching Packages") {
			return nil, fmt.Errorf("asking dnf about %s: %w: %s", strings.Join(batch, " "), err, errb.Text(0))
		}
		for _, p := range ParseDnfList(out.Bytes()) {
			if !p.Installed && !slices.Contains(found[p.Name], p.Version) {
				found[p.Name] = append(found[p.Name], p.Version)
			}
		}
		for n := range found {
			slices.SortFunc(found[n], func(a, b string) int { return version.CompareRPM(b, a) })
		}
	}
	c.mu.Lock()
	for _, n := range batch {
		c.cache[string(manager)+"\x00"+n] = found[n]
	}
	c.mu.Unlock()
	return found[name], nil
}

// validName checks a package name before it goes on a command line.
func validName(manager plan.Manager, name string) bool {
	switch manager {
	case plan.ManagerApt:
		return debName.MatchString(name)
	case plan.ManagerDnf:
		return rpmName.MatchString(name)
	}
	return false
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
