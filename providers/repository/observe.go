package repository

import (
	"errors"
	"io/fs"
	"path"
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
)

// Observe lists the enabled package sources of the root: apt's on a
// Debian-family host, dnf's on an RPM-based one. Plans decide from them
// whether an archive component or a repository is there already, and a
// saved plan that configures one is stale once they change.
func Observe(h *host.Host, family string) ([]facts.Repository, []facts.Warning) {
	switch family {
	case "deb":
		return observeApt(h)
	case "rpm":
		return observeDnf(h)
	}
	return nil, nil
}

func observeApt(h *host.Host) ([]facts.Repository, []facts.Warning) {
	var out []facts.Repository
	var warns []facts.Warning
	add := func(entries []SourceEntry) {
		for _, e := range entries {
			out = append(out, facts.Repository{File: e.File, URIs: orNil(e.URIs), Suites: orNil(e.Suites), Components: orNil(e.Components)})
		}
	}
	data, err := h.ReadFile(SourcesList)
	switch {
	case err == nil:
		add(ParseSourcesList(SourcesList, data))
	case !errors.Is(err, fs.ErrNotExist):
		warns = append(warns, facts.Warning{Path: SourcesList, Message: err.Error()})
	}
	entries, err := h.ReadDir(SourcesDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		warns = append(warns, facts.Warning{Path: SourcesDir, Message: err.Error()})
	}
	for _, e := range entries {
		// apt reads only these two kinds, and ignores the rest
		// (.save, .distUpgrade, .dpkg-old) without a word.
		parse := ParseSourcesList
		switch {
		case strings.HasSuffix(e.Name(), ".list"):
		case strings.HasSuffix(e.Name(), ".sources"):
			parse = ParseDeb822
		default:
			continue
		}
		f := path.Join(SourcesDir, e.Name())
		data, err := h.ReadFile(f)
		if err != nil {
			warns = append(warns, facts.Warning{Path: f, Message: err.Error()})
			continue
		}
		add(parse(f, data))
	}
	return out, warns
}

func observeDnf(h *host.Host) ([]facts.Repository, []facts.Warning) {
	var out []facts.Repository
	var warns []facts.Warning
	entries, err := h.ReadDir(YumReposDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		warns = append(warns, facts.Warning{Path: YumReposDir, Message: err.Error()})
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".repo") {
			continue
		}
		f := path.Join(YumReposDir, e.Name())
		data, err := h.ReadFile(f)
		if err != nil {
			warns = append(warns, facts.Warning{Path: f, Message: err.Error()})
			continue
		}
		out = append(out, ParseRepoFile(f, data)...)
	}
	return out, warns
}

// ParseRepoFile reads the enabled repositories of a dnf .repo file, an
// INI file with a section per repository. A repository is enabled unless
// it says enabled=0; where it has no baseurl, its metalink or mirrorlist
// stands for where its packages come from.
func ParseRepoFile(file string, data []byte) []facts.Repository {
	var out []facts.Repository
	var cur map[string]string
	var id, last string
	flush := func() {
		if cur == nil || cur["enabled"] == "0" {
			return
		}
		uris := strings.FieldsFunc(cur["baseurl"], func(r rune) bool { return r == ',' || r == ' ' || r == '\t' })
		for _, k := range []string{"metalink", "mirrorlist"} {
			if len(uris) == 0 && cur[k] != "" {
				uris = []string{cur[k]}
			}
		}
		out = append(out, facts.Repository{File: file, ID: id, URIs: orNil(uris)})
	}
	for _, line := range strings.Split(string(data), "\n") {
		t := strings.TrimSpace(line)
		switch {
		case t == "" || t[0] == '#' || t[0] == ';':
			continue
		case t[0] == '[' && strings.HasSuffix(t, "]"):
			flush()
			id, cur, last = strings.TrimSpace(t[1:len(t)-1]), map[string]string{}, ""
		case cur == nil:
			// Keys before any section belong to none.
		case (line[0] == ' ' || line[0] == '\t') && last != "":
			// A continuation line, as baseurl's further URLs are written.
			cur[last] += " " + t
		default:
			k, v, ok := strings.Cut(t, "=")
			if !ok {
				continue
			}
			last = strings.ToLower(strings.TrimSpace(k))
			cur[last] = strings.TrimSpace(v)
		}
	}
	flush()
	return out
}

// orNil gives an empty list as nil, as a decoded observation has it.
func orNil(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}
