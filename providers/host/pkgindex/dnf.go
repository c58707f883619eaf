package pkgindex

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/pkgdb"
)

// DnfCacheDir is dnf 4's metadata cache: a directory per repository,
// named "<repo id>-<hash of its URLs>", each with repodata/repomd.xml and
// the primary metadata it names. dnf 5 keeps its cache in
// /var/cache/libdnf5 and is not read.
const DnfCacheDir = "/var/cache/dnf"

// dnfDefaultPriority is a repository's priority when its file sets none
// (dnf.conf(5)).
const dnfDefaultPriority = 99

// repomd is the part of repomd.xml the facts need.
type repomd struct {
	Revision string `xml:"revision"`
	Data     []struct {
		Type     string `xml:"type,attr"`
		Location struct {
			Href string `xml:"href,attr"`
		} `xml:"location"`
		Timestamp string `xml:"timestamp"`
	} `xml:"data"`
}

func readDnf(h *host.Host, opts Options) (facts.PackageIndexes, []facts.Warning) {
	r := &reader{h: h, opts: opts, offers: map[string][]offer{}}
	r.out = facts.PackageIndexes{Manager: "dnf", Indexes: []facts.PackageIndex{}, Packages: []facts.IndexedPackage{}}
	readDnfIndexes(r)
	r.out.Packages = dnfPackages(r)
	return r.out, r.warns
}

// dnfPackage is the part of a primary.xml package element the facts keep.
type dnfPackage struct {
	Name    string `xml:"name"`
	Arch    string `xml:"arch"`
	Version struct {
		Epoch string `xml:"epoch,attr"`
		Ver   string `xml:"ver,attr"`
		Rel   string `xml:"rel,attr"`
	} `xml:"version"`
	Checksum struct {
		Type  string `xml:"type,attr"`
		Value string `xml:",chardata"`
	} `xml:"checksum"`
	Size struct {
		Package int64 `xml:"package,attr"`
	} `xml:"size"`
	Location struct {
		Href string `xml:"href,attr"`
	} `xml:"location"`
	Format struct {
		SourceRPM string `xml:"sourcerpm"`
	} `xml:"format"`
}

var (
	packageStart = []byte("<package ")
	packageEnd   = []byte("</package>")
	nameStart    = []byte("<name>")
)

// scanPrimary reads dnf's primary metadata from rd, keeping the
// packages of relevant names. Like a Packages list, it is scanned: each
// package element is found with a byte search and its name read in
// place, and only the relevant ones go to encoding/xml. What is kept is
// written as deb822 stanzas (Package, Version as [epoch:]version-release,
// Architecture, Source, Filename, Size, SHA256), so that the cache and
// the parser are those of apt's lists.
func scanPrimary(src source, relevant func([]byte) bool) (scanned, error) {
	var s scanned
	err := scanSource(src, packageEnd, func(data []byte) error { return s.scanPackages(data, relevant) })
	return s, err
}

func (s *scanned) scanPackages(data []byte, relevant func([]byte) bool) error {
	for pos := 0; ; {
		i := bytes.Index(data[pos:], packageStart)
		if i < 0 {
			return nil
		}
		start := pos + i
		end := bytes.Index(data[start:], packageEnd)
		if end < 0 {
			return fmt.Errorf("a package element without its end")
		}
		end += start + len(packageEnd)
		pos = end
		s.total++
		el := data[start:end]
		j := bytes.Index(el, nameStart)
		if j < 0 {
			continue
		}
		name := el[j+len(nameStart):]
		if k := bytes.IndexByte(name, '<'); k >= 0 {
			name = name[:k]
		}
		if !relevant(name) {
			continue
		}
		var p dnfPackage
		if err := xml.Unmarshal(el, &p); err != nil {
			return fmt.Errorf("package %s: %w", name, err)
		}
		v := p.Version.Ver + "-" + p.Version.Rel
		if p.Version.Epoch != "" && p.Version.Epoch != "0" {
			v = p.Version.Epoch + ":" + v
		}
		fmt.Fprintf((*appender)(&s.stanzas), "Package: %s\nVersion: %s\nArchitecture: %s\n", p.Name, v, p.Arch)
		if src := sourceName(p.Format.SourceRPM); src != "" {
			fmt.Fprintf((*appender)(&s.stanzas), "Source: %s\n", src)
		}
		fmt.Fprintf((*appender)(&s.stanzas), "Filename: %s\nSize: %d\n", p.Location.Href, p.Size.Package)
		if p.Checksum.Type == "sha256" {
			fmt.Fprintf((*appender)(&s.stanzas), "SHA256: %s\n", strings.TrimSpace(p.Checksum.Value))
		}
		s.stanzas = append(s.stanzas, '\n')
	}
}

// appender is an io.Writer that appends to a byte slice.
type appender []byte

func (a *appender) Write(p []byte) (int, error) { *a = append(*a, p...); return len(p), nil }

// sourceName is the source package of a source RPM's file name
// ("nvidia-driver-550.54.15-1.el9.src.rpm" gives "nvidia-driver").
func sourceName(srpm string) string {
	s := strings.TrimSuffix(srpm, ".src.rpm")
	for range 2 {
		i := strings.LastIndexByte(s, '-')
		if i < 0 {
			return ""
		}
		s = s[:i]
	}
	return s
}

// dnfRepoDir finds the cache directory of repository id among the cache's
// entries: "<id>-<16 hex digits>"; where several are (the repository's
// URL changed), the one whose repomd.xml is newest.
func (r *reader) dnfRepoDir(id string, dirs []fs.DirEntry) string {
	best, bestTime := "", int64(-1)
	for _, d := range dirs {
		rest, ok := strings.CutPrefix(d.Name(), id+"-")
		if !ok || len(rest) != 16 || strings.Trim(rest, "0123456789abcdef") != "" || !d.IsDir() {
			continue
		}
		p := path.Join(DnfCacheDir, d.Name())
		if id, err := identity(r.h, path.Join(p, "repodata", "repomd.xml")); err == nil && id.MTime > bestTime {
			best, bestTime = p, id.MTime
		}
	}
	return best
}

func readDnfIndexes(r *reader) {
	dirs, err := r.h.ReadDir(DnfCacheDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		r.warn(DnfCacheDir, "reading dnf's cache: %v", err)
	}
	for _, repo := range r.opts.Repositories {
		if repo.ID == "" {
			continue
		}
		src := facts.IndexSource{File: repo.File, Repo: repo.ID}
		if len(repo.URIs) > 0 {
			src.URI = repo.URIs[0]
		}
		dir := r.dnfRepoDir(repo.ID, dirs)
		if dir == "" {
			r.out.Missing = append(r.out.Missing, src)
			continue
		}
		mdPath := path.Join(dir, "repodata", "repomd.xml")
		mdID, _ := identity(r.h, mdPath)
		data, err := r.h.ReadFile(mdPath)
		var md repomd
		if err == nil {
			err = xml.Unmarshal(data, &md)
		}
		if err != nil {
			r.warn(mdPath, "reading dnf's repository metadata: %v", err)
			r.out.Missing = append(r.out.Missing, src)
			continue
		}
		primary := ""
		for _, d := range md.Data {
			if d.Type == "primary" {
				primary = path.Join(dir, path.Base(d.Location.Href))
			}
		}
		if primary == "" {
			r.warn(mdPath, "no primary metadata is listed")
			r.out.Missing = append(r.out.Missing, src)
			continue
		}
		id, err := identity(r.h, primary)
		if err != nil {
			// dnf keeps it under repodata/ beside repomd.xml.
			primary = path.Join(dir, "repodata", path.Base(primary))
			id, err = identity(r.h, primary)
		}
		if err != nil {
			r.warn(primary, "reading dnf's primary metadata: %v", err)
			r.out.Missing = append(r.out.Missing, src)
			continue
		}
		if path.Ext(primary) == ".zck" {
			r.warn(primary, "zchunk metadata is not read")
			r.out.Missing = append(r.out.Missing, src)
			continue
		}
		s, err := r.scan(primary, id, scanPrimary)
		if err != nil {
			r.warn(primary, "reading dnf's primary metadata: %v", err)
			continue
		}
		prio := repo.Priority
		from := fmt.Sprintf("priority=%d in %s", prio, repo.File)
		if prio == 0 {
			prio, from = dnfDefaultPriority, "dnf's default priority"
		}
		n := len(r.out.Indexes)
		r.out.Indexes = append(r.out.Indexes, facts.PackageIndex{
			Path: primary, Identity: id, Source: src, Stanzas: s.total, Priority: prio, PriorityFrom: from,
			Release: &facts.ReleaseData{Path: mdPath, Identity: mdID, Version: md.Revision},
		})
		paras, err := pkgdb.Paragraphs(s.stanzas)
		if err != nil {
			r.warn(primary, "parsing the kept packages: %v", err)
		}
		for _, p := range paras {
			v := p.Values
			o := offer{index: n, name: v["Package"], version: v["Version"], arch: v["Architecture"], source: v["Source"], filename: v["Filename"], sha256: v["SHA256"]}
			o.size, _ = strconv.ParseInt(v["Size"], 10, 64)
			if o.arch == "src" {
				continue
			}
			r.offers[o.name] = append(r.offers[o.name], o)
		}
	}
}

// dnfPackages builds the packages with dnf's choice: among the
// repositories that offer a name, only those of the best (lowest)
// priority count, and of their versions the newest, never older than the
// installed one.
func dnfPackages(r *reader) []facts.IndexedPackage {
	installed := map[string]string{}
	for _, p := range r.opts.Installed {
		installed[p.Name] = p.Version
	}
	if len(r.out.Indexes) == 0 {
		return []facts.IndexedPackage{}
	}
	names := map[string]bool{}
	for n := range r.offers {
		names[n] = true
	}
	for n := range installed {
		names[n] = true
	}
	var out []facts.IndexedPackage
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range names {
			if !yield(n) {
				return
			}
		}
	}) {
		var vs []facts.IndexedVersion
		at := map[string]int{}
		for _, o := range r.offers[name] {
			i, seen := at[o.version]
			ix := &r.out.Indexes[o.index]
			if !seen {
				i = len(vs)
				at[o.version] = i
				vs = append(vs, facts.IndexedVersion{Version: o.version, Architecture: o.arch, Source: o.source, Filename: o.filename, Size: o.size, SHA256: o.sha256,
					Priority: ix.Priority, PriorityFrom: ix.PriorityFrom, Origins: []string{}})
			}
			vs[i].Origins = append(vs[i].Origins, ix.Path)
			if ix.Priority < vs[i].Priority {
				vs[i].Priority, vs[i].PriorityFrom = ix.Priority, ix.PriorityFrom
			}
		}
		inst := installed[name]
		if inst != "" {
			if i, seen := at[inst]; seen {
				vs[i].Installed = true
			} else {
				vs = append(vs, facts.IndexedVersion{Version: inst, Installed: true, Origins: []string{}, PriorityFrom: "installed"})
			}
		}
		slices.SortStableFunc(vs, func(a, b facts.IndexedVersion) int { return pkgdb.Compare("dnf", b.Version, a.Version) })
		best := 0
		for _, v := range vs {
			if len(v.Origins) > 0 && (best == 0 || v.Priority < best) {
				best = v.Priority
			}
		}
		cand, why := "", ""
		for _, v := range vs {
			if len(v.Origins) == 0 || v.Priority != best {
				continue
			}
			cand, why = v.Version, fmt.Sprintf("the newest version of the repositories of the best priority, %d (%s)", v.Priority, v.PriorityFrom)
			break
		}
		if cand != "" && inst != "" && pkgdb.Compare("dnf", cand, inst) < 0 {
			cand, why = inst, "the installed version: dnf does not downgrade"
		}
		out = append(out, facts.IndexedPackage{Name: name, Installed: inst, Candidate: cand, CandidateFrom: why, Versions: vs})
	}
	return out
}
