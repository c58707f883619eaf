package pkgindex

import (
	"bytes"
	"fmt"
	"math"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host/pkgdb"
)

// Where apt reads its preferences and configuration.
const (
	PreferencesFile = "/etc/apt/preferences"
	PreferencesDir  = "/etc/apt/preferences.d"
	AptConfFile     = "/etc/apt/apt.conf"
	AptConfDir      = "/etc/apt/apt.conf.d"
)

// neverPriority is "Pin-Priority: never", below every number apt accepts
// (apt-pkg/policy.cc, NEVER_PIN).
const neverPriority = math.MinInt16

// prefName is the name apt reads in preferences.d (apt_preferences(5):
// "either no or "pref" as filename extension and only contain
// alphanumeric, hyphen (-), underscore (_) and period (.) characters").
var prefName = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// preferenceFile reports whether apt reads name in preferences.d.
func preferenceFile(name string) bool {
	if !prefName.MatchString(name) {
		return false
	}
	ext := path.Ext(name)
	return ext == "" || ext == ".pref"
}

// pinKind is what a pin matches, as its Pin field's first word says.
type pinKind int

const (
	pinVersion pinKind = iota + 1
	pinSourceVersion
	pinRelease
	pinOrigin
)

// pin is a parsed preferences record.
type pin struct {
	facts.Pin
	kind pinKind
	// names are the record's package names and patterns; none for a
	// general pin ("Package: *").
	names []string
	data  string // the Pin field after its first word
	rel   releaseMatch
}

// general reports whether the pin applies to indexes rather than to
// named packages.
func (p *pin) general() bool { return len(p.names) == 0 }

// parsePreferences reads one preferences file. Records apt rejects stop
// apt altogether; they are returned as errors, and those apt only warns
// about (an unknown pin type) are skipped.
func parsePreferences(file string, data []byte) ([]pin, []error) {
	var out []pin
	var errs []error
	paras, err := pkgdb.Paragraphs(stripComments(data))
	if err != nil {
		return nil, []error{err}
	}
	for i, p := range paras {
		rec := i + 1
		name, ok := p.Values["Package"]
		if !ok {
			errs = append(errs, fmt.Errorf("record %d has no Package field", rec))
			continue
		}
		pinField, ok := p.Values["Pin"]
		if !ok {
			continue
		}
		word, rest, _ := strings.Cut(strings.TrimSpace(pinField), " ")
		rest = strings.TrimSpace(rest)
		general := strings.TrimSpace(name) == "*"
		var kind pinKind
		switch strings.ToLower(word) {
		case "version":
			kind = pinVersion
		case "source-version":
			kind = pinSourceVersion
		case "release":
			kind = pinRelease
		case "origin":
			kind = pinOrigin
		default:
			continue
		}
		if general && (kind == pinVersion || kind == pinSourceVersion) {
			// apt reads a version pin for every package as one of an
			// unknown type, and skips it.
			continue
		}
		raw := strings.TrimSpace(p.Values["Pin-Priority"])
		prio := 0
		if raw == "never" {
			if !general {
				errs = append(errs, fmt.Errorf("record %d: Pin-Priority: never is only for Package: *", rec))
				continue
			}
			prio = neverPriority
		} else {
			n, err := strconv.Atoi(raw)
			if err != nil || n < math.MinInt16 || n > math.MaxInt16 || n == 0 {
				errs = append(errs, fmt.Errorf("record %d: Pin-Priority %q is not a priority apt accepts", rec, raw))
				continue
			}
			prio = max(n, neverPriority+1)
		}
		pn := pin{Pin: facts.Pin{File: file, Record: rec, Package: strings.Join(strings.Fields(name), " "), Pin: word + " " + rest, Priority: prio}, kind: kind, data: rest}
		if !general {
			pn.names = strings.Fields(name)
		}
		if kind == pinRelease {
			pn.rel = parseReleaseMatch(rest)
		}
		out = append(out, pn)
	}
	return out, errs
}

// stripComments removes the comment lines apt allows in a preferences
// file (pkgTagFile::SUPPORT_COMMENTS), which the deb822 parser would
// read as fields.
func stripComments(data []byte) []byte {
	if !bytes.Contains(data, []byte("#")) {
		return data
	}
	var out []byte
	for line := range bytes.Lines(data) {
		if bytes.HasPrefix(bytes.TrimLeft(line, " \t"), []byte("#")) {
			continue
		}
		out = append(out, line...)
	}
	return out
}

// releaseMatch is a "Pin: release" specification (apt-pkg/versionmatch.cc):
// "*" for every index, a bare archive, codename or (leading digit)
// version, or comma-separated a=, n=, v=, o=, l=, c=, b= conditions, all
// of which must hold.
type releaseMatch struct {
	all                                                       bool
	release                                                   string // a bare archive or codename
	version                                                   string
	versionPrefix                                             bool
	origin, archive, codename, label, component, architecture string
}

func parseReleaseMatch(s string) releaseMatch {
	var m releaseMatch
	if s == "*" {
		m.all = true
		return m
	}
	if !strings.Contains(s, "=") {
		if s != "" && s[0] >= '0' && s[0] <= '9' {
			m.version = s
		} else {
			m.release = s
		}
	} else {
		for _, f := range strings.Split(s, ",") {
			f = strings.TrimSpace(f)
			if len(f) < 3 || f[1] != '=' {
				continue
			}
			v := f[2:]
			switch f[0] | 0x20 {
			case 'v':
				m.version = v
			case 'o':
				m.origin = v
			case 'a':
				m.archive = v
			case 'n':
				m.codename = v
			case 'l':
				m.label = v
			case 'c':
				m.component = v
			case 'b':
				m.architecture = v
			}
		}
	}
	if v, ok := strings.CutSuffix(m.version, "*"); ok {
		m.version, m.versionPrefix = v, true
	}
	return m
}

// matchIndex reports whether the specification holds for an index
// (pkgVersionMatch::FileMatch).
func (m releaseMatch) matchIndex(ix *facts.PackageIndex) bool {
	if m.all {
		return true
	}
	if m == (releaseMatch{}) {
		return false
	}
	var r facts.ReleaseData
	if ix.Release != nil {
		r = *ix.Release
	}
	switch {
	case m.version != "" && !matchVersion(r.Version, m.version, m.versionPrefix):
		return false
	case m.origin != "" && !expressionMatches(m.origin, r.Origin):
		return false
	case m.archive != "" && !expressionMatches(m.archive, r.Suite):
		return false
	case m.codename != "" && !expressionMatches(m.codename, r.Codename):
		return false
	case m.release != "" && !expressionMatches(m.release, r.Suite) && !expressionMatches(m.release, r.Codename):
		return false
	case m.label != "" && !expressionMatches(m.label, r.Label):
		return false
	case m.component != "" && !expressionMatches(m.component, ix.Source.Component):
		return false
	case m.architecture != "" && !expressionMatches(m.architecture, ix.Architecture):
		return false
	}
	return true
}

// matchStatus is matchIndex for dpkg's status file, which has no Release
// file: apt names its archive "now", and conditions on what only a
// Release file says do not hold.
func (m releaseMatch) matchStatus() bool {
	if m.all {
		return true
	}
	if m.origin != "" || m.label != "" || m.version != "" || m.codename != "" || m == (releaseMatch{}) {
		return false
	}
	if m.archive != "" && !expressionMatches(m.archive, "now") || m.release != "" && !expressionMatches(m.release, "now") {
		return false
	}
	return m.component == "" || expressionMatches(m.component, "now")
}

// matchVersion is apt's MatchVer: equal, or a prefix when the pattern
// ended in "*", ignoring case; failing that, the pattern as a glob.
func matchVersion(v, pattern string, prefix bool) bool {
	if prefix && len(v) >= len(pattern) && strings.EqualFold(v[:len(pattern)], pattern) || !prefix && strings.EqualFold(v, pattern) {
		return true
	}
	if prefix {
		return expressionMatches(pattern+"*", v)
	}
	return expressionMatches(pattern, v)
}

// expressionMatches is apt's ExpressionMatches: a /regex/ (extended,
// ignoring case) when the pattern is slashed, else an fnmatch glob
// ignoring case.
func expressionMatches(pattern, s string) bool {
	if len(pattern) >= 2 && pattern[0] == '/' && pattern[len(pattern)-1] == '/' {
		re, err := regexp.Compile("(?i)" + pattern[1:len(pattern)-1])
		return err == nil && re.MatchString(s)
	}
	ok, err := path.Match(strings.ToLower(pattern), strings.ToLower(s))
	return err == nil && ok
}

// isPattern reports whether a pin's package name is a glob or regex that
// apt expands over every package name (policy.cc, CreatePin).
func isPattern(name string) bool {
	return len(name) >= 2 && name[0] == '/' && name[len(name)-1] == '/' || strings.ContainsAny(name, "*[?")
}

// matchesName reports whether one of the pin's names names pkg (with its
// source package src, for "src:" names). A name may carry an
// architecture ("name:amd64"), which must be arch or "any".
func (p *pin) matchesName(pkg, src, arch string) bool {
	for _, n := range p.names {
		want := pkg
		if s, ok := strings.CutPrefix(n, "src:"); ok {
			n, want = s, src
		}
		if i := strings.LastIndexByte(n, ':'); i >= 0 && !strings.HasPrefix(n, "/") {
			a := n[i+1:]
			n = n[:i]
			if a != arch && a != "any" {
				continue
			}
		}
		if n == want || isPattern(n) && expressionMatches(n, want) {
			return true
		}
	}
	return false
}

// aptConfig is what gpuenv reads of apt's configuration.
type aptConfig struct {
	defaultRelease string
	architecture   string
}

// parseAptConf reads APT::Default-Release and APT::Architecture from an
// apt.conf(5) file: "APT::Default-Release "stable";", or the same key
// inside "APT { … };" scopes, in any nesting; //, # and /* */ comments.
// A later setting replaces an earlier one, as apt reads them.
func parseAptConf(data []byte, cfg *aptConfig) {
	toks := aptConfTokens(stripConfComments(data))
	var scope []string
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		switch {
		case t == "}":
			if len(scope) > 0 {
				scope = scope[:len(scope)-1]
			}
		case t == ";" || t == "{":
		case i+1 < len(toks) && toks[i+1] == "{":
			scope = append(scope, t)
			i++
		default:
			key := strings.ToLower(strings.Join(append(append([]string(nil), scope...), t), "::"))
			if i+1 < len(toks) && toks[i+1] != ";" && toks[i+1] != "{" && toks[i+1] != "}" {
				i++
				switch key {
				case "apt::default-release":
					cfg.defaultRelease = unquote(toks[i])
				case "apt::architecture":
					cfg.architecture = unquote(toks[i])
				}
			}
		}
	}
}

// stripConfComments removes apt.conf comments, outside quoted values.
func stripConfComments(data []byte) []byte {
	var out []byte
	inQuote := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch {
		case c == '"':
			inQuote = !inQuote
		case inQuote:
		case c == '#' || c == '/' && i+1 < len(data) && data[i+1] == '/':
			for i < len(data) && data[i] != '\n' {
				i++
			}
			out = append(out, '\n')
			continue
		case c == '/' && i+1 < len(data) && data[i+1] == '*':
			end := bytes.Index(data[i+2:], []byte("*/"))
			if end < 0 {
				return out
			}
			i += end + 3
			out = append(out, ' ')
			continue
		}
		out = append(out, c)
	}
	return out
}

// aptConfTokens splits apt.conf text into words, quoted values (quotes
// kept), and the punctuation { } ;.
func aptConfTokens(data []byte) []string {
	var toks []string
	for i := 0; i < len(data); {
		c := data[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '{' || c == '}' || c == ';':
			toks = append(toks, string(c))
			i++
		case c == '"':
			end := bytes.IndexByte(data[i+1:], '"')
			if end < 0 {
				return append(toks, string(data[i:]))
			}
			toks = append(toks, string(data[i:i+end+2]))
			i += end + 2
		default:
			j := i
			for j < len(data) && !bytes.ContainsRune([]byte(" \t\n\r{};\""), rune(data[j])) {
				j++
			}
			toks = append(toks, string(data[i:j]))
			i = j
		}
	}
	return toks
}

func unquote(s string) string { return strings.Trim(s, `"`) }
