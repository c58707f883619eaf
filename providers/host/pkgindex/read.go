package pkgindex

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"syscall"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/pkgdb"
)

// Options are what Read needs besides the root.
type Options struct {
	// Family is the package family: "deb" reads apt's indexes, "rpm"
	// dnf's; anything else reads none.
	Family string
	// Repositories are the root's enabled sources, as providers/repository
	// observes them: which lists apt fetched for which source.
	Repositories []facts.Repository
	// Installed are the root's relevant packages (facts.Packages), for
	// the installed versions.
	Installed []facts.Package
	// Arch is the machine's architecture as uname names it ("x86_64"),
	// for apt's native architecture when its configuration does not
	// name one.
	Arch string
	// NoCache reads every list, neither reading nor writing the cache
	// of relevant stanzas (CacheDir).
	NoCache bool
}

// Read observes the package indexes of the root. It never fails: what
// could not be read is a warning, and the rest stands.
func Read(h *host.Host, opts Options) (facts.PackageIndexes, []facts.Warning) {
	switch opts.Family {
	case "deb":
		return readApt(h, opts)
	case "rpm":
		return readDnf(h, opts)
	}
	return facts.PackageIndexes{Indexes: []facts.PackageIndex{}, Packages: []facts.IndexedPackage{}}, nil
}

// reader gathers one observation.
type reader struct {
	h     *host.Host
	opts  Options
	out   facts.PackageIndexes
	warns []facts.Warning
	// offers are the relevant stanzas read, by package name.
	offers map[string][]offer
	// cacheFailed is set once writing the cache failed: one warning
	// says so, not one per list.
	cacheFailed bool
}

func (r *reader) warn(p string, format string, args ...any) {
	r.warns = append(r.warns, facts.Warning{Path: p, Message: fmt.Sprintf(format, args...)})
}

func readApt(h *host.Host, opts Options) (facts.PackageIndexes, []facts.Warning) {
	r := &reader{h: h, opts: opts, offers: map[string][]offer{}}
	r.out = facts.PackageIndexes{Manager: "apt", Indexes: []facts.PackageIndex{}, Packages: []facts.IndexedPackage{}}
	cfg := r.aptConfig()
	r.out.Architecture = cmp.Or(cfg.architecture, debianArch(opts.Arch))

	names := map[string]bool{}
	entries, err := h.ReadDir(ListsDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		r.warn(ListsDir, "reading apt's lists: %v", err)
	}
	for _, e := range entries {
		if e.Type().IsRegular() {
			names[e.Name()] = true
		}
	}
	releases := map[string]*facts.ReleaseData{}
	type suiteLists struct {
		lists []listName
		rel   *facts.ReleaseData
	}
	var found []suiteLists
	var archs []string
	for _, e := range entriesOf(opts.Repositories) {
		lists := matchLists(e, names)
		if len(lists) == 0 {
			comps := e.components
			if e.flat() {
				comps = []string{""}
			}
			for _, c := range comps {
				r.out.Missing = append(r.out.Missing, facts.IndexSource{File: e.file, URI: e.uri, Suite: e.suite, Component: c})
			}
			continue
		}
		found = append(found, suiteLists{lists, r.release(e, names, releases)})
		for _, l := range lists {
			archs = append(archs, l.arch)
		}
	}
	if r.out.Architecture == "" {
		r.out.Architecture = commonArch(archs)
	}
	for _, f := range found {
		for _, l := range f.lists {
			r.readList(l, f.rel)
		}
	}
	pol := &policy{indexes: r.out.Indexes, pins: r.preferences()}
	if len(r.out.Indexes) > 0 {
		// Pins and the target release matter only with indexes to apply
		// them to; without, the facts stay empty, and a plan's
		// fingerprint does not change with a pin that decides nothing.
		r.out.DefaultRelease = r.defaultRelease(cfg.defaultRelease)
		for _, p := range pol.pins {
			r.out.Pins = append(r.out.Pins, p.Pin)
		}
	} else {
		pol.pins = nil
	}
	pol.indexPriorities(r.out.DefaultRelease)
	r.out.Packages = r.packages(pol)
	return r.out, r.warns
}

// entriesOf keeps the apt sources of repos (a dnf repository has an ID).
func entriesOf(repos []facts.Repository) []entry {
	var apt []facts.Repository
	for _, rp := range repos {
		if rp.ID == "" {
			apt = append(apt, rp)
		}
	}
	return entries(apt)
}

// release reads the InRelease (or else Release) file of e's suite, once
// per suite; nil when neither is on disk or readable.
func (r *reader) release(e entry, names map[string]bool, seen map[string]*facts.ReleaseData) *facts.ReleaseData {
	for _, name := range []string{"InRelease", "Release"} {
		file := URIToFileName(e.metaURI(name))
		if !names[file] {
			continue
		}
		p := path.Join(ListsDir, file)
		if rel, ok := seen[p]; ok {
			return rel
		}
		seen[p] = nil
		id, err := identity(r.h, p)
		if err != nil {
			r.warn(p, "reading a Release file: %v", err)
			return nil
		}
		data, err := r.h.ReadFile(p)
		if err != nil {
			r.warn(p, "reading a Release file: %v", err)
			return nil
		}
		rel, err := parseRelease(data)
		if err != nil {
			r.warn(p, "reading a Release file: %v", err)
			return nil
		}
		rel.Path, rel.Identity = p, id
		seen[p] = &rel
		return &rel
	}
	return nil
}

// readList scans one list, or takes its scan from the cache, and keeps
// its relevant stanzas.
func (r *reader) readList(l listName, rel *facts.ReleaseData) {
	p := path.Join(ListsDir, l.file)
	id, err := identity(r.h, p)
	if err != nil {
		r.warn(p, "reading a package list: %v", err)
		return
	}
	s, err := r.scan(p, id, scanList)
	if err != nil {
		r.warn(p, "reading a package list: %v", err)
		return
	}
	ix := facts.PackageIndex{
		Path: p, Identity: id, Architecture: l.arch, Site: l.entry.site(), Release: rel, Stanzas: s.total,
		Source: facts.IndexSource{File: l.entry.file, URI: l.entry.uri, Suite: l.entry.suite, Component: l.component},
	}
	n := len(r.out.Indexes)
	r.out.Indexes = append(r.out.Indexes, ix)
	paras, err := pkgdb.Paragraphs(s.stanzas)
	if err != nil {
		r.warn(p, "parsing the stanzas of relevant packages: %v", err)
	}
	native := r.out.Architecture
	for _, para := range paras {
		v := para.Values
		o := offer{index: n, name: v["Package"], version: v["Version"], arch: v["Architecture"], source: v["Source"], filename: v["Filename"], sha256: v["SHA256"]}
		o.size, _ = strconv.ParseInt(v["Size"], 10, 64)
		if o.name == "" || o.version == "" {
			continue
		}
		// Another architecture's package is name:arch to apt, which
		// gpuenv does not install.
		if native != "" && o.arch != "" && o.arch != native && o.arch != "all" {
			continue
		}
		r.offers[o.name] = append(r.offers[o.name], o)
	}
}

// scan returns the relevant stanzas of the list at p: from the cache when
// it holds them for this identity, else read with scanFn, and cached.
func (r *reader) scan(p string, id facts.FileIdentity, scanFn func(source, func([]byte) bool) (scanned, error)) (scanned, error) {
	if !r.opts.NoCache {
		if s, ok := readCache(r.h, p, id); ok {
			return s, nil
		}
	}
	f, err := r.h.Open(p)
	if err != nil {
		return scanned{}, err
	}
	defer f.Close()
	rd, done, err := decompress(p, f)
	if err != nil {
		return scanned{}, err
	}
	defer done()
	s, err := scanFn(rd, relevantName)
	if err != nil {
		return scanned{}, err
	}
	if !r.opts.NoCache && !r.cacheFailed {
		if err := writeCache(r.h, p, id, s); err != nil {
			r.cacheFailed = true
			r.warn(CacheDir, "not caching the relevant stanzas of the package lists: %v", err)
		}
	}
	return s, nil
}

// identity is a file's FileIdentity.
func identity(h *host.Host, p string) (facts.FileIdentity, error) {
	fi, err := h.Stat(p)
	if err != nil {
		return facts.FileIdentity{}, err
	}
	id := facts.FileIdentity{Size: fi.Size(), MTime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.Inode = st.Ino
		id.MTime = st.Mtim.Nano()
	}
	return id, nil
}

// aptConfig reads apt's configuration files in apt's order: the parts
// directory by name, then apt.conf (apt.conf(5)).
func (r *reader) aptConfig() aptConfig {
	var cfg aptConfig
	files, _ := r.h.ReadDir(AptConfDir)
	for _, e := range files {
		if !e.Type().IsRegular() || !prefName.MatchString(e.Name()) || (path.Ext(e.Name()) != "" && path.Ext(e.Name()) != ".conf") {
			continue
		}
		if data, err := r.h.ReadFile(path.Join(AptConfDir, e.Name())); err == nil {
			parseAptConf(data, &cfg)
		}
	}
	if data, err := r.h.ReadFile(AptConfFile); err == nil {
		parseAptConf(data, &cfg)
	}
	return cfg
}

// preferences reads apt's pins, in apt's order.
func (r *reader) preferences() []pin {
	files := []string{PreferencesFile}
	entries, err := r.h.ReadDir(PreferencesDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		r.warn(PreferencesDir, "reading apt's preferences: %v", err)
	}
	for _, e := range entries {
		if !e.IsDir() && preferenceFile(e.Name()) {
			files = append(files, path.Join(PreferencesDir, e.Name()))
		}
	}
	var out []pin
	for _, f := range files {
		data, err := r.h.ReadFile(f)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				r.warn(f, "reading apt's preferences: %v", err)
			}
			continue
		}
		pins, errs := parsePreferences(f, data)
		for _, err := range errs {
			r.warn(f, "apt refuses this preferences file: %v", err)
		}
		out = append(out, pins...)
	}
	return out
}

// defaultRelease is APT::Default-Release when some index is of that
// release; apt refuses to run with one that is not (policy.cc), which is
// a warning here, and the setting is left out.
func (r *reader) defaultRelease(rel string) string {
	if rel == "" {
		return ""
	}
	if len(rel) > 2 && rel[1] == '=' || expressionMatches(rel, "now") {
		return rel
	}
	for _, ix := range r.out.Indexes {
		if ix.Release != nil && (expressionMatches(rel, ix.Release.Suite) || expressionMatches(rel, ix.Release.Codename) || expressionMatches(rel, ix.Release.Version)) {
			return rel
		}
	}
	r.warn(AptConfFile, "APT::Default-Release %q is no release of the configured sources: apt refuses to run until it is", rel)
	return ""
}

// packages builds the facts of every package offered or installed.
func (r *reader) packages(pol *policy) []facts.IndexedPackage {
	installed := map[string]string{}
	for _, p := range r.opts.Installed {
		if p.State == facts.StateNotInstalled || p.State == facts.StateConfigFiles {
			continue
		}
		if a := r.out.Architecture; a != "" && p.Architecture != "" && p.Architecture != a && p.Architecture != "all" {
			continue
		}
		installed[p.Name] = p.Version
	}
	if len(r.out.Indexes) == 0 {
		// Nothing offers anything: the installed versions alone would
		// say nothing a plan does not have from the package database.
		return []facts.IndexedPackage{}
	}
	names := slices.Collect(func(yield func(string) bool) {
		for n := range r.offers {
			if !yield(n) {
				return
			}
		}
		for n := range installed {
			if _, offered := r.offers[n]; !offered && !yield(n) {
				return
			}
		}
	})
	slices.Sort(names)
	out := make([]facts.IndexedPackage, 0, len(names))
	for _, name := range names {
		vs := pol.versions(name, r.offers[name], installed[name])
		c, why := candidate(vs, installed[name])
		out = append(out, facts.IndexedPackage{Name: name, Installed: installed[name], Candidate: c, CandidateFrom: why, Versions: vs})
	}
	return out
}

// debianArch names a uname architecture as dpkg does.
func debianArch(uname string) string {
	switch uname {
	case "x86_64":
		return "amd64"
	case "aarch64":
		return "arm64"
	case "ppc64le":
		return "ppc64el"
	case "i686", "i386":
		return "i386"
	case "s390x", "riscv64":
		return uname
	case "armv7l":
		return "armhf"
	}
	return ""
}

// commonArch is the architecture most lists are of, for a root whose
// architecture is not known otherwise (an image root without the kernel
// arch file).
func commonArch(archs []string) string {
	count := map[string]int{}
	best := ""
	for _, a := range archs {
		if a == "" || a == "all" {
			continue
		}
		count[a]++
		if c := count[a]; c > count[best] || c == count[best] && a < best {
			best = a
		}
	}
	return best
}
