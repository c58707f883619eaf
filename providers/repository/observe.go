package repository

import (
	"bytes"
	"errors"
	"io/fs"
	"path"
	"slices"
	"strconv"
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
	data, err := h.ReadFile(SourcesList)
	switch {
	case err == nil:
		out = ParseSourcesList(SourcesList, data)
	case !errors.Is(err, fs.ErrNotExist):
		warns = append(warns, facts.Warning{Path: SourcesList, Message: err.Error()})
	}
	more, moreWarns := readDir(h, SourcesDir, func(name string) parser {
		// apt reads only these two kinds, and ignores the rest
		// (.save, .distUpgrade, .dpkg-old) without a word.
		switch {
		case strings.HasSuffix(name, ".list"):
			return ParseSourcesList
		case strings.HasSuffix(name, ".sources"):
			return ParseDeb822
		}
		return nil
	})
	return append(out, more...), append(warns, moreWarns...)
}

func observeDnf(h *host.Host) ([]facts.Repository, []facts.Warning) {
	return readDir(h, YumReposDir, func(name string) parser {
		if strings.HasSuffix(name, ".repo") {
			return ParseRepoFile
		}
		return nil
	})
}

// A parser reads the repositories a configuration file enables.
type parser func(file string, data []byte) []facts.Repository

// readDir parses the files of dir that parserFor has a parser for; a
// missing dir has none, and a file that cannot be read is a warning.
func readDir(h *host.Host, dir string, parserFor func(name string) parser) ([]facts.Repository, []facts.Warning) {
	var out []facts.Repository
	var warns []facts.Warning
	entries, err := h.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		warns = append(warns, facts.Warning{Path: dir, Message: err.Error()})
	}
	for _, e := range entries {
		parse := parserFor(e.Name())
		if parse == nil {
			continue
		}
		f := path.Join(dir, e.Name())
		data, err := h.ReadFile(f)
		if err != nil {
			warns = append(warns, facts.Warning{Path: f, Message: err.Error()})
			continue
		}
		out = append(out, parse(f, data)...)
	}
	return out, warns
}

// ParseSourcesList reads one-line sources ("deb [opts] uri suite comp…"),
// keeping "deb" lines (not deb-src, not commented out).
func ParseSourcesList(file string, data []byte) []facts.Repository {
	var out []facts.Repository
	// Every line, however long: a line scanner would stop at its buffer's
	// size without a word and drop the lines after it.
	for raw := range bytes.Lines(data) {
		line := strings.TrimSpace(string(raw))
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "deb" {
			continue
		}
		f = f[1:]
		var keys, others []string
		if strings.HasPrefix(f[0], "[") {
			var opts []string
			for len(f) > 0 && !strings.HasSuffix(f[0], "]") {
				opts = append(opts, f[0])
				f = f[1:]
			}
			if len(f) == 0 {
				continue
			}
			opts = append(opts, f[0])
			f = f[1:]
			keys, others = sourceOptions(strings.Trim(strings.Join(opts, " "), "[]"))
		}
		if len(f) < 2 {
			continue
		}
		out = append(out, facts.Repository{File: file, URIs: f[:1], Suites: f[1:2], Components: orNil(f[2:]), Keys: keys, Options: others})
	}
	return out
}

// ParseDeb822 reads deb822 .sources stanzas of Types "deb" that are not
// disabled.
func ParseDeb822(file string, data []byte) []facts.Repository {
	var out []facts.Repository
	fields := map[string]string{}
	last := ""
	flush := func() {
		if len(fields) > 0 && slices.Contains(strings.Fields(fields["types"]), "deb") && !strings.EqualFold(fields["enabled"], "no") {
			out = append(out, facts.Repository{File: file, URIs: orNil(strings.Fields(fields["uris"])), Suites: orNil(strings.Fields(fields["suites"])), Components: orNil(strings.Fields(fields["components"])), Keys: signedBy(fields["signed-by"]), Options: deb822Options(fields)})
		}
		fields, last = map[string]string{}, ""
	}
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "#") {
			continue
		}
		if strings.TrimSpace(l) == "" {
			flush()
			continue
		}
		if (l[0] == ' ' || l[0] == '\t') && last != "" {
			fields[last] += " " + strings.TrimSpace(l)
			continue
		}
		if k := setField(fields, l, ":"); k != "" {
			last = k
		}
	}
	flush()
	return out
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
		from := ""
		for _, k := range []string{"metalink", "mirrorlist"} {
			if len(uris) == 0 && cur[k] != "" {
				uris, from = []string{cur[k]}, k
			}
		}
		prio, _ := strconv.Atoi(cur["priority"])
		keys := strings.FieldsFunc(cur["gpgkey"], func(r rune) bool { return r == ',' || r == ' ' || r == '\t' })
		out = append(out, facts.Repository{File: file, ID: id, URIs: orNil(uris), Priority: prio, Keys: orNil(keys), GPGCheck: cur["gpgcheck"] == "1", URIsFrom: from})
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
			if k := setField(cur, t, "="); k != "" {
				last = k
			}
		}
	}
	flush()
	return out
}

// sourceOptions reads a one-line source's options ("arch=amd64
// signed-by=/usr/share/keyrings/x.gpg"): signed-by's comma-separated
// keys, and the other options as written.
func sourceOptions(opts string) (keys, others []string) {
	for _, o := range strings.Fields(opts) {
		if k, v, ok := strings.Cut(o, "="); ok && strings.EqualFold(k, "signed-by") {
			keys = orNil(strings.Split(v, ","))
			continue
		}
		others = append(others, o)
	}
	return keys, others
}

// deb822Known are the fields of a deb822 stanza that Repository holds.
var deb822Known = []string{"types", "uris", "suites", "components", "signed-by", "enabled"}

// deb822Options are a stanza's other fields, as "Name: value" with the
// name lower-cased as the stanza is read.
func deb822Options(fields map[string]string) []string {
	var out []string
	for k, v := range fields {
		if !slices.Contains(deb822Known, k) {
			out = append(out, k+": "+v)
		}
	}
	slices.Sort(out)
	return out
}

// signedBy reads a deb822 Signed-By field: keyring paths or fingerprints
// separated by commas or spaces. A field holding an armored key itself
// (a multi-line value) is kept as one entry, the key's text.
func signedBy(v string) []string {
	if strings.Contains(v, "BEGIN PGP") {
		return []string{v}
	}
	return orNil(strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }))
}

// setField reads a "key: value" (or, with sep "=", "key=value") line into
// m and returns its key, which is case-insensitive and so lower-cased; ""
// for a line without sep.
func setField(m map[string]string, line, sep string) string {
	k, v, ok := strings.Cut(line, sep)
	if !ok {
		return ""
	}
	k = strings.ToLower(strings.TrimSpace(k))
	m[k] = strings.TrimSpace(v)
	return k
}

// orNil gives an empty list as nil, as a decoded observation has it.
func orNil(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}
