package planner

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpuenv/gpuenv/spec"
	"github.com/gpuenv/gpuenv/spec/lazyregexp"
)

// nvidiaRepoPath matches the two path segments that name the system a
// repository laid out as NVIDIA's CUDA repositories are is for
// (".../repos/ubuntu2204/x86_64/"), in NVIDIA's spelling; a mirror that
// keeps the layout keeps them.
var nvidiaRepoPath = lazyregexp.New(`/(ubuntu[0-9]{4}|debian[0-9]+|rhel[0-9]+|rocky[0-9]+|amzn[0-9]+|sles[0-9]+|fedora[0-9]+|opensuse[0-9]+|wsl-ubuntu)/(x86_64|sbsa|arm64|aarch64|ppc64le)(/|$)`)

// repoSystem is the system a repository URL names, as an os-release ID and
// version and as text ("Ubuntu 22.04"); ok is false when the URL names
// none.
func repoSystem(u string) (id, version, title, slug string, ok bool) {
	p, err := url.Parse(u)
	if err != nil {
		return "", "", "", "", false
	}
	m := nvidiaRepoPath.FindStringSubmatch(p.Path)
	if m == nil {
		return "", "", "", "", false
	}
	slug = m[1] + "/" + m[2]
	name := m[1]
	digits := strings.TrimLeft(name, "abcdefghijklmnopqrstuvwxyz-")
	word := strings.TrimSuffix(name, digits)
	switch word {
	case "ubuntu":
		version = digits[:2] + "." + digits[2:]
		return "ubuntu", version, "Ubuntu " + version, slug, true
	case "debian":
		return "debian", digits, "Debian " + digits, slug, true
	case "rhel", "rocky":
		// Rocky's repositories are RHEL's rebuilds, and gpuenv's tables
		// name RHEL-family systems as RHEL.
		return "rhel", digits, "RHEL " + digits, slug, true
	case "amzn":
		return "amzn", digits, "Amazon Linux " + digits, slug, true
	case "sles":
		return "sles", digits, "SLES " + digits, slug, true
	case "fedora":
		return "fedora", digits, "Fedora " + digits, slug, true
	case "opensuse":
		return "opensuse-leap", digits, "openSUSE Leap " + digits, slug, true
	case "wsl-ubuntu":
		return "wsl-ubuntu", "", "WSL-Ubuntu", slug, true
	}
	return "", "", "", "", false
}

// otherSystem says, for an error about packages the tables do not name
// on this host, that the spec was written for another system: one of its
// repositories is NVIDIA's (or a mirror laid out as NVIDIA's) for another
// operating system or release than the host's. Empty when none is.
func (r *resolver) otherSystem() string {
	for _, rp := range r.spec.Repositories {
		if rp.IsAbsent() || !rp.URL.Set {
			continue
		}
		id, ver, title, slug, ok := repoSystem(rp.URL.Value)
		if !ok || id == r.os.ID && ver == r.os.Version {
			continue
		}
		article := "a"
		if strings.ContainsRune("AEIOUaeiou", rune(title[0])) {
			article = "an"
		}
		return fmt.Sprintf("This spec names %s packages; the host is %s: the repository %q (%s) is laid out as NVIDIA's repository for %s. Plan this spec on %s %s host, or write it for %s (NVIDIA's repository for it, and the sources and versions it has) and plan again.",
			title, r.os.Title, rp.Name, at(rp.DefRange), slug, article, title, r.os.Title)
	}
	return ""
}

// packagesUnknown reports packages the tables do not name for this host,
// saying first when the spec was written for another system.
func (r *resolver) packagesUnknown(b spec.Attr[spec.Source], def hcl.Range, what, detail string) {
	if other := r.otherSystem(); other != "" {
		r.errorf(b.RangeOr(def), "Packages for another operating system", "%s %s", other, detail)
		return
	}
	r.errorf(b.RangeOr(def), what+" packages unknown", "%s", detail)
}
