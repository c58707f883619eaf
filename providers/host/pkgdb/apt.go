package pkgdb

import (
	"bufio"
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuenv/gpuenv/spec/version"
)

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
