package pkgdb

import (
	"sort"
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
)

// Database files and managers.
const (
	// StatusPath is dpkg's database of installed packages.
	StatusPath = "/var/lib/dpkg/status"
	// UpdatesDir holds dpkg's journal: status paragraphs written during a
	// run and not yet merged into StatusPath. After an interrupted dpkg
	// they are the newest truth about the packages they name.
	UpdatesDir = "/var/lib/dpkg/updates"
	// VersionlockPath is the dnf versionlock plugin's list, RPM's
	// counterpart of a dpkg hold.
	VersionlockPath = "/etc/dnf/plugins/versionlock.list"

	ManagerDpkg = string(facts.DatabaseDpkg)
	ManagerRPM  = string(facts.DatabaseRPM)
)

// relevantPrefixes are the package-name prefixes gpuenv reports. The list
// is deliberately broad on NVIDIA's and CUDA's names (Debian splits the
// toolkit into dozens of libcu*/libnpp*/libnv* packages) and narrow
// elsewhere, so that a real database of thousands of packages yields a
// few dozen entries.
var relevantPrefixes = []string{
	"cuda",
	"cudnn",
	"datacenter-gpu-manager",
	"dkms",
	// dnf-automatic and unattended-upgrades upgrade packages behind the
	// spec's back: plan warns when they can move an unheld driver.
	"dnf-automatic",
	"firmware-nvidia",
	"glx-alternative-nvidia",
	"kernel-core",
	"kernel-devel",
	"kmod-nvidia",
	"libaccinj64",
	"libcublas",
	"libcuda",
	"libcudart",
	"libcudnn",
	"libcufft",
	"libcufile",
	"libcuinj64",
	"libcupti",
	"libcurand",
	"libcusolver",
	"libcusparse",
	"libnccl",
	"libnpp",
	"libnvblas",
	"libnvidia",
	"libnvinfer",
	"libnvjitlink",
	"libnvjpeg",
	"libnvrtc",
	"libnvtoolsext",
	"libnvvm",
	"libtorch",
	"linux-headers",
	"linux-image",
	"linux-modules-nvidia",
	"linux-objects-nvidia",
	"linux-signatures-nvidia",
	"nsight",
	"nvidia",
	"python3-jax",
	"python3-tensorflow",
	"python3-torch",
	"tensorrt",
	"unattended-upgrades",
	"xserver-xorg-video-nvidia",
}

// byHead indexes relevantPrefixes by their first four bytes (no prefix is
// shorter), so that deciding about one of the thousands of unrelated names
// in a database costs a map lookup and, for the few names that share a
// head with a prefix ("libc…"), a handful of comparisons.
var byHead = func() map[string][]string {
	m := make(map[string][]string)
	for _, p := range relevantPrefixes {
		m[p[:4]] = append(m[p[:4]], p)
	}
	return m
}()

// Relevant reports whether a package name belongs to the GPU stack as
// gpuenv sees it.
func Relevant(name string) bool {
	if len(name) < 4 {
		return false
	}
	for _, p := range byHead[name[:4]] {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// relevantBytes is Relevant for a name still inside the database buffer;
// the map index with a converted slice does not allocate.
func relevantBytes(name []byte) bool {
	if len(name) < 4 {
		return false
	}
	for _, p := range byHead[string(name[:4])] {
		if len(name) >= len(p) && string(name[:len(p)]) == p {
			return true
		}
	}
	return false
}

// SortPackages orders packages by name, then architecture.
func SortPackages(ps []facts.Package) {
	sort.SliceStable(ps, func(i, j int) bool {
		if ps[i].Name != ps[j].Name {
			return ps[i].Name < ps[j].Name
		}
		return ps[i].Architecture < ps[j].Architecture
	})
}

// RelevantName is Relevant for a name still inside a buffer being
// scanned, without converting it to a string.
func RelevantName(name []byte) bool { return relevantBytes(name) }

// RelevantRule names the relevance rule: it changes whenever the
// prefixes do, so that what was kept under an older rule (a cache of
// relevant stanzas) is not taken for what the current one keeps.
func RelevantRule() string { return strings.Join(relevantPrefixes, ",") }
