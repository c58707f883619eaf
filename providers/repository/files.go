package repository

import (
	"path"
	"slices"
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/pgpkey"
)

// ownFileDirs are where gpuenv writes repository files, each named
// gpuenv-*, by package family: apt's unless the family is "rpm", as the
// planner writes them.
var ownFileDirs = map[bool][]string{false: {SourcesDir, PreferencesDir}, true: {YumReposDir}}

// keyringDirs are where keyrings usually are, by package family: what
// Debian's and Ubuntu's keyring packages install, the directory apt's
// documentation gives for third-party keys and apt's trusted.gpg.d; the
// RPM distributions' key directory.
var keyringDirs = map[bool][]string{false: {"/usr/share/keyrings", "/etc/apt/keyrings", "/etc/apt/trusted.gpg.d"}, true: {"/etc/pki/rpm-gpg"}}

// KeyringDirs are every directory whose keyrings ObserveFiles reports.
var KeyringDirs = append(slices.Clone(keyringDirs[false]), keyringDirs[true]...)

// ObserveFiles digests gpuenv's own repository files and the keyrings of
// a host of the package family: those in the family's KeyringDirs, and
// any other that one of gpuenv's files or one of the enabled sources
// names (Signed-By, gpgkey=file://), with the fingerprints of the keys
// each holds. The repository planner compares the files with what the
// spec asks them to hold, checks a key_fingerprint, and warns about a
// missing keyring, from these alone. Missing directories and files are
// simply absent; the observation of sources (Observe) warns about
// unreadable directories.
func ObserveFiles(h *host.Host, family string, sources ...facts.Repository) facts.RepositoryFiles {
	rpm := family == "rpm"
	out := facts.RepositoryFiles{Files: []facts.FileDigest{}, Keyrings: []facts.FileDigest{}}
	var named []string
	for _, dir := range ownFileDirs[rpm] {
		entries, _ := h.ReadDir(dir)
		for _, e := range entries {
			if !strings.HasPrefix(e.Name(), "gpuenv-") {
				continue
			}
			f := path.Join(dir, e.Name())
			data, err := h.ReadFile(f)
			d := facts.FileDigest{Path: f}
			if err == nil {
				d.SHA256 = host.SHA256Of(data)
				named = append(named, keyringsNamed(data)...)
			}
			out.Files = append(out.Files, d)
		}
	}
	for _, s := range sources {
		for _, k := range s.Keys {
			if k = strings.TrimPrefix(k, "file://"); strings.HasPrefix(k, "/") {
				named = append(named, path.Clean(k))
			}
		}
	}
	for _, dir := range keyringDirs[rpm] {
		entries, _ := h.ReadDir(dir)
		for _, e := range entries {
			if e.IsDir() {
				continue
			}
			if d, ok := readKeyring(h, path.Join(dir, e.Name())); ok {
				out.Keyrings = append(out.Keyrings, d)
			}
		}
	}
	for _, k := range named {
		if slices.ContainsFunc(out.Keyrings, func(d facts.FileDigest) bool { return d.Path == k }) {
			continue
		}
		if d, ok := readKeyring(h, k); ok {
			out.Keyrings = append(out.Keyrings, d)
		}
	}
	slices.SortFunc(out.Keyrings, func(a, b facts.FileDigest) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// readKeyring digests a keyring and names its keys; false when there is
// no file to digest. A file too large for a keyring is digested but not
// read for keys (pgpkey.MaxKeyring).
func readKeyring(h *host.Host, p string) (facts.FileDigest, bool) {
	data, err := h.ReadFileLimit(p, pgpkey.MaxKeyring)
	if err != nil {
		sum, err := h.SHA256(p)
		if err != nil {
			return facts.FileDigest{}, false
		}
		return facts.FileDigest{Path: p, SHA256: sum, KeyError: err.Error()}, true
	}
	d := facts.FileDigest{Path: p, SHA256: host.SHA256Of(data)}
	if fps, err := pgpkey.Fingerprints(data); err != nil {
		d.KeyError = err.Error()
	} else {
		d.Fingerprints = fps
	}
	return d, true
}

// keyringsNamed returns the absolute keyring paths a deb822 sources file
// (Signed-By:) or a .repo file (gpgkey=file://) names.
func keyringsNamed(data []byte) []string {
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "Signed-By") {
			k, v, ok = strings.Cut(l, "=")
			if !ok || strings.TrimSpace(k) != "gpgkey" {
				continue
			}
		}
		for _, w := range strings.Fields(v) {
			w = strings.TrimPrefix(w, "file://")
			if strings.HasPrefix(w, "/") {
				out = append(out, path.Clean(w))
			}
		}
	}
	return out
}
