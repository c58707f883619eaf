package spec

import (
	"fmt"
	"net/url"
	"path"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/gpuenv/gpuenv/spec/lazyregexp"
)

// The checks below return "" for a good value and otherwise a sentence that
// says what is wrong, which becomes a diagnostic's Detail. Values in a spec
// end up in command lines (package pins, gpasswd, pip, python -m venv) and in
// files that shells and other programs parse (/etc/profile.d, ld.so.conf, APT
// sources), so they are checked here, before anything runs: no value may
// start with "-" where it becomes an argument, and none may carry control
// characters.

// maxNameLen is shadow-utils' default limit on user and group names.
const maxNameLen = 32

var posixName = lazyregexp.New(`^[a-z_][a-z0-9_-]*\$?$`)

func checkAccountName(kind, s string) string {
	switch {
	case s == "":
		return fmt.Sprintf("A %s name must not be empty.", kind)
	case len(s) > maxNameLen:
		return fmt.Sprintf("The %s name %q is %d characters long; the limit is %d.", kind, s, len(s), maxNameLen)
	case !posixName.MatchString(s):
		return fmt.Sprintf("The %s name %q is not valid: %s names start with a lowercase letter or an underscore, followed by lowercase letters, digits, underscores or hyphens, optionally ending in $.", kind, s, kind)
	}
	return ""
}

// pathChars are the characters a path may use. Whitespace, quotes, $, ; and
// : are left out because paths are written into ld.so.conf (which splits on
// whitespace), PATH (which splits on ":") and shell profile files.
var pathChars = lazyregexp.New(`^[A-Za-z0-9._+@,=/-]*$`)

func checkPath(s string) string {
	switch {
	case s == "":
		return "A path must not be empty."
	case hasControl(s):
		return fmt.Sprintf("The path %q contains a control character.", s)
	case !strings.HasPrefix(s, "/"):
		return fmt.Sprintf("The path %q is relative. Paths in a spec are absolute paths inside the root (--root), such as %q.", s, "/"+strings.TrimLeft(s, "./"))
	case !pathChars.MatchString(s):
		return fmt.Sprintf("The path %q contains characters that are not allowed: a path may use letters, digits and . _ + @ , = - /, since it is written into PATH, ld.so.conf and shell profile files.", s)
	}
	for _, elem := range strings.Split(s, "/") {
		if elem == ".." {
			return fmt.Sprintf("The path %q contains \"..\". Write the path without \"..\" so that it is plain where it points, such as %q.", s, path.Clean(s))
		}
	}
	return ""
}

// cleanPath is applied to paths that passed checkPath.
func cleanPath(s string) string {
	return path.Clean(s)
}

// checkURL checks a URL whose scheme must be one of schemes. A file URL must
// name an absolute local path.
func checkURL(s string, schemes ...string) string {
	if s == "" {
		return "A URL must not be empty."
	}
	if hasControl(s) || strings.ContainsFunc(s, unicode.IsSpace) {
		return fmt.Sprintf("The URL %q contains whitespace or a control character.", s)
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Sprintf("The URL %q cannot be parsed: %s.", s, strings.TrimPrefix(err.Error(), "parse "+strconv.Quote(s)+": "))
	}
	ok := false
	for _, scheme := range schemes {
		if u.Scheme == scheme {
			ok = true
		}
	}
	if !ok {
		return fmt.Sprintf("The URL %q must start with %s.", s, orList(schemeList(schemes)))
	}
	if u.Opaque != "" {
		return fmt.Sprintf("The URL %q is not valid: write %s:// followed by a host or, for file URLs, an absolute path.", s, u.Scheme)
	}
	if u.User != nil {
		return fmt.Sprintf("The URL %q contains credentials. Credentials do not belong in a spec: put them in /etc/apt/auth.conf.d or pip's configuration on the host.", s)
	}
	if u.Scheme == "file" {
		if u.Host != "" && u.Host != "localhost" {
			return fmt.Sprintf("The file URL %q names the host %q. A file URL names an absolute path on this host, such as file:///srv/mirror.", s, u.Host)
		}
		if u.RawQuery != "" || u.Fragment != "" {
			return fmt.Sprintf("The file URL %q must not have a query or fragment.", s)
		}
		if p := checkPath(u.Path); p != "" {
			return fmt.Sprintf("The file URL %q does not name a usable path. %s", s, p)
		}
		return ""
	}
	if u.Host == "" {
		return fmt.Sprintf("The URL %q has no host.", s)
	}
	return ""
}

func schemeList(schemes []string) []string {
	out := make([]string, len(schemes))
	for i, s := range schemes {
		out[i] = s + "://"
	}
	return out
}

func hasControl(s string) bool {
	if !utf8.ValidString(s) {
		return true
	}
	return strings.ContainsFunc(s, unicode.IsControl)
}

// checkWord checks a value that becomes one command-line argument or one
// word in a configuration file.
func checkWord(what, s string) string {
	switch {
	case s == "":
		return fmt.Sprintf("The %s must not be empty.", what)
	case hasControl(s) || strings.ContainsFunc(s, unicode.IsSpace):
		return fmt.Sprintf("The %s %q contains whitespace or a control character.", what, s)
	case strings.HasPrefix(s, "-"):
		return fmt.Sprintf("The %s %q starts with \"-\", which a command would read as an option.", what, s)
	}
	return ""
}

// checkVersionText guards version and constraint strings before they are
// parsed: they become parts of package pins such as name=version.
func checkVersionText(s string) string {
	switch {
	case strings.TrimSpace(s) == "":
		return "A version must not be empty."
	case hasControl(s):
		return fmt.Sprintf("The version %q contains a control character.", s)
	case strings.HasPrefix(strings.TrimSpace(s), "-"):
		return fmt.Sprintf("The version %q starts with \"-\".", s)
	}
	return ""
}

var (
	repoName = lazyregexp.New(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
	// Debian archive words: suite and component names.
	debianWord = lazyregexp.New(`^[A-Za-z0-9][A-Za-z0-9._+~-]*$`)
	// A flat repository's suite is a directory relative to the URL, ending in "/".
	flatSuite  = lazyregexp.New(`^(\./|/|([A-Za-z0-9][A-Za-z0-9._+~-]*/)+)$`)
	pipExtra   = lazyregexp.New(`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`)
	envVarName = lazyregexp.New(`^[A-Za-z_][A-Za-z0-9_]*$`)
	deviceIdx  = lazyregexp.New(`^[0-9]+$`)
	hexDigits  = lazyregexp.New(`^[0-9A-F]+$`)
	uuidPart   = `[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`
	gpuUUID    = lazyregexp.New(`^GPU-` + uuidPart + `$`)
	migUUID    = lazyregexp.New(`^MIG-` + uuidPart + `$`)
	// MIG identifiers before driver R470 named the parent GPU and the GPU
	// and compute instance: MIG-GPU-<uuid>/<gi>/<ci>.
	migOld = lazyregexp.New(`^MIG-GPU-` + uuidPart + `/[0-9]+/[0-9]+$`)
)

const maxRepoName = 64

func checkRepositoryName(s string) string {
	if len(s) > maxRepoName || !repoName.MatchString(s) {
		return fmt.Sprintf("The repository name %q is not valid: it names a file under /etc/apt, so it starts with a letter or digit, is followed by letters, digits, underscores, hyphens or dots, and is at most %d characters long.", s, maxRepoName)
	}
	return ""
}

// checkFingerprint returns an OpenPGP key fingerprint as gpuenv compares
// it (upper-case hex, no spaces), accepting gpg's groups of four and
// lower case; or the problem with it. A key ID, short or long, is not a
// fingerprint: other keys share it.
func checkFingerprint(s string) (string, string) {
	norm := strings.ToUpper(strings.Join(strings.Fields(s), ""))
	if (len(norm) == 40 || len(norm) == 64) && hexDigits.MatchString(norm) {
		return norm, ""
	}
	want := "A fingerprint is 40 hexadecimal digits for an OpenPGP version 4 key, as gpg --fingerprint prints it (spaces allowed), or 64 for versions 5 and 6."
	if len(norm) == 8 || len(norm) == 16 {
		return "", fmt.Sprintf("The key fingerprint %q is a key ID, which other keys can share. %s", s, want)
	}
	return "", fmt.Sprintf("The key fingerprint %q is not a fingerprint. %s", s, want)
}

func checkSuite(s string) string {
	if flatSuite.MatchString(s) && !strings.Contains(s, "../") {
		return ""
	}
	return matching(debianWord, s, "The suite %q is not valid: a suite is a distribution name such as \"bookworm\" or \"jammy-updates\", or, for a flat repository such as NVIDIA's CUDA repository, a directory ending in \"/\" such as \"/\".")
}

func checkComponent(s string) string {
	return matching(debianWord, s, "The component %q is not valid: a component is an archive area such as \"main\", \"contrib\" or \"non-free-firmware\".")
}

func checkExtra(s string) string {
	return matching(pipExtra, s, "The extra %q is not a valid Python package extra name, such as \"and-cuda\" or \"cuda12\".")
}

func checkEnvName(s string) string {
	return matching(envVarName, s, "The environment variable name %q is not valid: it starts with a letter or underscore, followed by letters, digits or underscores.")
}

// matching returns "" when re matches s, else the message format says
// about s.
func matching(re *lazyregexp.Regexp, s, format string) string {
	if re.MatchString(s) {
		return ""
	}
	return fmt.Sprintf(format, s)
}

func checkEnvValue(name, s string) string {
	if hasControl(s) {
		return fmt.Sprintf("The value of %s contains a control character such as a newline, which cannot be written into /etc/profile.d or a systemd setting.", name)
	}
	return ""
}

// deviceID classifies a CUDA device identifier and returns a key under which
// two spellings of the same device compare equal ("" when s is not one).
func deviceID(s string, allowMIG bool) (key string) {
	switch {
	case deviceIdx.MatchString(s):
		n, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return ""
		}
		return strconv.FormatUint(n, 10)
	case gpuUUID.MatchString(s):
		return strings.ToLower(s)
	case allowMIG && (migUUID.MatchString(s) || migOld.MatchString(s)):
		return strings.ToLower(s)
	}
	return ""
}

func orList(words []string) string {
	return joinList(words, "or")
}

func joinList(words []string, conj string) string {
	switch len(words) {
	case 0:
		return ""
	case 1:
		return words[0]
	}
	return strings.Join(words[:len(words)-1], ", ") + " " + conj + " " + words[len(words)-1]
}

func quoteAll(words []string) []string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = strconv.Quote(w)
	}
	return out
}
