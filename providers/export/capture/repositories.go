package capture

import (
	"fmt"
	"net/url"
	"path"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/repository"
	"github.com/gpuenv/gpuenv/spec"
	"github.com/gpuenv/gpuenv/spec/lazyregexp"
)

// Where a distribution's own archive is: a fresh host of the same OS
// enables it already, so init captures no repository block for it.
var (
	// distroKeyring matches the keyrings of Debian's and Ubuntu's
	// archives (debian-archive-keyring, ubuntu-keyring).
	distroKeyring = lazyregexp.New(`^(debian-archive-.*|ubuntu-archive-.*|ubuntu-cloudimage-.*)\.gpg$`)
	// distroHost matches the hosts of Debian's and Ubuntu's archives
	// and of their country mirrors (ftp.de.debian.org, de.archive.ubuntu.com).
	distroHost = lazyregexp.New(`^(deb\.debian\.org|security\.debian\.org|archive\.debian\.org|ftp(\.[a-z]{2})?\.debian\.org|([a-z]{2}\.)?archive\.ubuntu\.com|security\.ubuntu\.com|ports\.ubuntu\.com|[a-z0-9-]+\.clouds\.archive\.ubuntu\.com)$`)
	// distroRepoFile matches the .repo files the RPM distributions
	// install with their release package.
	distroRepoFile = lazyregexp.New(`^(redhat|ubi|rocky.*|almalinux.*|centos.*|oracle-linux.*|uek-.*|fedora.*|amazonlinux.*|rhel.*)\.repo$`)
	// distroRPMKey matches the distributions' own keys in /etc/pki/rpm-gpg.
	distroRPMKey = lazyregexp.New(`^RPM-GPG-KEY-(redhat|rockyofficial|Rocky|AlmaLinux|centos|CentOS|fedora|oracle|amazon-linux)`)
)

// distroArchive tells whether a source is the distribution's own archive
// or one of its mirrors.
func distroArchive(family string, s facts.Repository) bool {
	if family == "rpm" {
		if distroRepoFile.MatchString(path.Base(s.File)) {
			return true
		}
		return slices.ContainsFunc(s.Keys, func(k string) bool { return distroRPMKey.MatchString(path.Base(k)) })
	}
	if slices.ContainsFunc(s.Keys, func(k string) bool { return distroKeyring.MatchString(path.Base(k)) }) {
		return true
	}
	return slices.ContainsFunc(s.URIs, func(u string) bool {
		p, err := url.Parse(u)
		return err == nil && distroHost.MatchString(p.Hostname())
	})
}

// nvidiaHost is where NVIDIA publishes its CUDA repositories; a driver or
// toolkit installed from there has source = "nvidia".
const nvidiaHost = "developer.download.nvidia.com"

// repoBlock is a repository block as init writes it.
type repoBlock struct {
	name           string
	url            string
	suites         []string
	components     []string
	keyring        string
	keyFingerprint string
	priority       int
	// notes are what the comment above the block says besides where
	// the source is configured.
	notes []string
}

// repositories captures the package sources the host enables beyond its
// distribution's archive, each with the keyring that signs it and that
// keyring's key, so that a fresh host of the same OS gets the same
// versions from the same places.
func (w *writer) repositories(obs *facts.Observation) {
	family := obs.OS.Family
	// The sources gpuenv wrote keep their blocks' names, which name
	// their files; the others are named around them.
	used := map[string]bool{}
	own := map[int]string{}
	for i, s := range obs.Repositories {
		if strings.HasPrefix(path.Base(s.File), "gpuenv-") || strings.HasPrefix(s.ID, "gpuenv-") {
			own[i] = uniqueName(repoName(s), used)
		}
	}
	for i, s := range obs.Repositories {
		if s.File == repository.ComponentsFile || distroArchive(family, s) {
			continue
		}
		where := s.File
		if s.ID != "" {
			where += " [" + s.ID + "]"
		}
		b, why := captureRepository(obs, s)
		if why != "" {
			w.comment(fmt.Sprintf("The repository %s in %s is not captured: %s", strings.Join(s.URIs, " "), where, why))
			continue
		}
		b.name = own[i]
		if b.name == "" {
			b.name = uniqueName(repoName(s), used)
		}
		if problem := validRepository(b); problem != "" {
			w.comment(fmt.Sprintf("The repository %s in %s is not captured: a repository block cannot state it as it is (%s).", s.URIs[0], where, problem))
			continue
		}
		body := w.block("repository", []string{b.name}, append([]string{"Configured in " + where + "."}, b.notes...)...)
		b.write(body)
	}
	// A repository block pins the whole repository; apt's pins of single
	// packages have no block.
	var pins []string
	for _, p := range obs.PackageIndexes.Pins {
		if p.Package != "*" && !strings.HasPrefix(path.Base(p.File), "gpuenv-") {
			pins = append(pins, fmt.Sprintf("%s (%s: %s %d)", p.File, p.Package, p.Pin, p.Priority))
		}
	}
	if len(pins) > 0 {
		w.comment("apt's pins of single packages are not captured (a repository block's priority pins a whole repository): " + strings.Join(pins, "; ") + ".")
	}
}

func (b *repoBlock) write(body *hclwrite.Body) {
	body.SetAttributeValue("url", cty.StringVal(b.url))
	if len(b.suites) > 0 && !slices.Equal(b.suites, spec.DefaultSuites) {
		body.SetAttributeValue("suites", strings2cty(b.suites))
	}
	if len(b.components) > 0 {
		body.SetAttributeValue("components", strings2cty(b.components))
	}
	if b.keyring != "" {
		body.SetAttributeValue("keyring", cty.StringVal(b.keyring))
	}
	if b.keyFingerprint != "" {
		body.SetAttributeValue("key_fingerprint", cty.StringVal(b.keyFingerprint))
	}
	if b.priority != 0 {
		body.SetAttributeValue("priority", cty.NumberIntVal(int64(b.priority)))
	}
}

func strings2cty(list []string) cty.Value {
	vals := make([]cty.Value, len(list))
	for i, s := range list {
		vals[i] = cty.StringVal(s)
	}
	return cty.ListVal(vals)
}

// validRepository loads the block alone as gpuenv would read it, so that
// a source the spec language cannot state (a URL scheme it does not
// take, a suite with a variable) becomes a comment rather than a spec
// that does not load; "" when it loads.
func validRepository(b repoBlock) string {
	f := hclwrite.NewEmptyFile()
	b.write(f.Body().AppendNewBlock("repository", []string{b.name}).Body())
	const name = "repository.hcl"
	_, diags := spec.Load(name, spec.LoadOptions{Saved: &spec.Sources{Files: []spec.SourceFile{{Name: name, Bytes: f.Bytes()}}}})
	for _, d := range diags {
		if d.Severity == hcl.DiagError {
			detail := strings.TrimSuffix(d.Detail, ".")
			return strings.ToLower(detail[:1]) + detail[1:]
		}
	}
	return ""
}

// captureRepository describes one source as a block; why says what keeps
// it from being one that plans no change on this host.
func captureRepository(obs *facts.Observation, s facts.Repository) (b repoBlock, why string) {
	if len(s.URIs) != 1 {
		return b, fmt.Sprintf("it names %d URLs, and a repository block names one.", len(s.URIs))
	}
	b.url = s.URIs[0]
	if obs.OS.Family == "rpm" {
		return captureDnf(obs, s, b)
	}
	b.suites, b.components = s.Suites, s.Components
	if len(s.Options) > 0 {
		b.notes = append(b.notes, fmt.Sprintf("Its options (%s) are not captured: a repository block has none of them, and the source gpuenv writes on another host goes without.", strings.Join(s.Options, ", ")))
	}
	switch {
	case len(s.Keys) == 0:
		b.notes = append(b.notes, "It names no keyring (no Signed-By), so apt trusts it with every key in /etc/apt/trusted.gpg.d; the block names none either.")
	case len(s.Keys) > 1:
		return b, fmt.Sprintf("its Signed-By names %d keys, and a repository block names one keyring.", len(s.Keys))
	case !strings.HasPrefix(s.Keys[0], "/"):
		return b, "its Signed-By names a key by fingerprint or holds the key itself, and a repository block names a keyring file."
	default:
		b.keyring = path.Clean(s.Keys[0])
		b.keyFingerprint, b.notes = keyOf(obs, b.keyring, b.notes)
	}
	if p, ok := ownPin(obs, s); ok {
		// gpuenv's own pin file says the block's priority whether or
		// not the lists are fetched.
		b.priority = p
		return b, ""
	}
	b.priority, b.notes = priorityOf(obs, s, b.notes)
	return b, ""
}

// ownPin is the priority of the pin file gpuenv wrote with its own
// sources file s, as repository.Provider writes them in pairs.
func ownPin(obs *facts.Observation, s facts.Repository) (int, bool) {
	base := path.Base(s.File)
	if !strings.HasPrefix(base, "gpuenv-") || !strings.HasSuffix(base, ".sources") {
		return 0, false
	}
	pref := path.Join(repository.PreferencesDir, strings.TrimSuffix(base, ".sources")+".pref")
	for _, p := range obs.PackageIndexes.Pins {
		if p.File == pref && p.Package == "*" {
			return p.Priority, true
		}
	}
	return 0, false
}

func captureDnf(obs *facts.Observation, s facts.Repository, b repoBlock) (repoBlock, string) {
	if s.URIsFrom != "" {
		return b, fmt.Sprintf("it lists its mirrors with a %s, and a repository block names one base URL.", s.URIsFrom)
	}
	switch {
	case len(s.Keys) > 1:
		return b, fmt.Sprintf("its gpgkey names %d keys, and a repository block names one.", len(s.Keys))
	case len(s.Keys) == 1 && !s.GPGCheck:
		return b, "it names a key but does not check packages' signatures (no gpgcheck=1), and the .repo file gpuenv writes for a keyring checks them."
	case len(s.Keys) == 1:
		k := s.Keys[0]
		if strings.HasPrefix(k, "file://") {
			b.keyring = path.Clean(strings.TrimPrefix(k, "file://"))
			b.keyFingerprint, b.notes = keyOf(obs, b.keyring, b.notes)
		} else {
			b.keyring = k
			b.notes = append(b.notes, "dnf fetches its key from "+k+" and asks before trusting it; gpuenv does not fetch keys, so the block names no key_fingerprint.")
		}
	default:
		b.notes = append(b.notes, "It names no key (no gpgkey), and the block names none either.")
	}
	if s.Priority != 0 {
		b.notes = append(b.notes, fmt.Sprintf("Its priority=%d is not captured: the .repo file gpuenv writes sets none.", s.Priority))
	}
	return b, ""
}

// keyOf is the fingerprint of the one key in the keyring at p, with a
// note when there is none to state.
func keyOf(obs *facts.Observation, p string, notes []string) (string, []string) {
	for _, kr := range obs.RepositoryFiles.Keyrings {
		if kr.Path != p {
			continue
		}
		switch {
		case kr.KeyError != "":
			return "", append(notes, fmt.Sprintf("Its keyring %s is not one gpuenv can read the key of (%s), so the block names no key_fingerprint.", p, kr.KeyError))
		case len(kr.Fingerprints) > 1:
			return "", append(notes, fmt.Sprintf("Its keyring %s holds %d keys (%s); key_fingerprint names one key, so the block names none.", p, len(kr.Fingerprints), strings.Join(kr.Fingerprints, ", ")))
		case len(kr.Fingerprints) == 1:
			note := fmt.Sprintf("The key in %s has the fingerprint key_fingerprint states; another host needs that key there before apply", p)
			if obs.OS.Family != "rpm" {
				note += " (for NVIDIA's repositories, the cuda-keyring package puts it there)"
			}
			return kr.Fingerprints[0], append(notes, note+".")
		}
	}
	return "", append(notes, fmt.Sprintf("Its keyring %s is missing on this host, so the block names no key_fingerprint.", p))
}

// priorityOf is the pin priority apt gives the source's indexes when it
// is not apt's default, as the package indexes show it.
func priorityOf(obs *facts.Observation, s facts.Repository, notes []string) (int, []string) {
	var prios []int
	for _, i := range obs.PackageIndexes.Indexes {
		if i.Source.File == s.File && slices.Contains(s.URIs, i.Source.URI) && !slices.Contains(prios, i.Priority) {
			prios = append(prios, i.Priority)
		}
	}
	switch {
	case len(prios) == 0:
		for _, m := range obs.PackageIndexes.Missing {
			if m.File == s.File && slices.Contains(s.URIs, m.URI) {
				return 0, append(notes, "Its lists are not on disk (apt-get update has not fetched them), so its pin priority is not known and not captured.")
			}
		}
		return 0, notes
	case len(prios) > 1:
		return 0, append(notes, fmt.Sprintf("apt gives its indexes different priorities (%s), and priority states one, so it is not captured.", joinInts(prios)))
	case prios[0] == spec.DefaultPriority:
		return 0, notes
	}
	return prios[0], notes
}

func joinInts(list []int) string {
	s := make([]string, len(list))
	for i, n := range list {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ", ")
}

// repoName names a repository block after the file it is configured in
// (a dnf repository after its id), as the file gpuenv writes for it is
// named after the block; one gpuenv wrote keeps its block's name.
func repoName(s facts.Repository) string {
	base := path.Base(s.File)
	switch {
	case s.ID != "":
		base = s.ID
	case s.File == repository.SourcesList:
		base = "sources-list"
	default:
		base = strings.TrimSuffix(strings.TrimSuffix(base, ".list"), ".sources")
	}
	base = strings.TrimPrefix(base, "gpuenv-")
	var b strings.Builder
	for _, r := range base {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '.', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	name := strings.TrimLeft(b.String(), "_.-")
	if name == "" {
		name = "repository"
	}
	return name[:min(len(name), 56)]
}

// uniqueName numbers a name taken already.
func uniqueName(name string, used map[string]bool) string {
	out := name
	for n := 2; used[out]; n++ {
		out = fmt.Sprintf("%s-%d", name, n)
	}
	used[out] = true
	return out
}

// origin says where the installed version of a package came from, as the
// package indexes list it: "distro" for the distribution's archive,
// "nvidia" for NVIDIA's repository, "other" for another source, "" when
// no index lists the installed version.
func origin(obs *facts.Observation, name string) string {
	for _, p := range obs.PackageIndexes.Packages {
		if p.Name != name {
			continue
		}
		for _, v := range p.Versions {
			if !v.Installed {
				continue
			}
			for _, o := range v.Origins {
				for _, i := range obs.PackageIndexes.Indexes {
					if i.Path != o {
						continue
					}
					src := facts.Repository{File: i.Source.File, URIs: []string{i.Source.URI}}
					for _, r := range obs.Repositories {
						if r.File == i.Source.File && slices.Contains(r.URIs, i.Source.URI) {
							src = r
							break
						}
					}
					switch {
					case distroArchive(obs.OS.Family, src):
						return "distro"
					case strings.Contains(i.Source.URI, nvidiaHost):
						return "nvidia"
					}
					return "other"
				}
			}
		}
	}
	return ""
}
