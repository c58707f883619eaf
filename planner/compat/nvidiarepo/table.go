// Package nvidiarepo holds NVIDIA's package repositories as facts: where
// each CUDA repository is for a distribution, release and architecture,
// the file its signing key is published as, the key's full fingerprint and
// the keyring package NVIDIA's guides install; and the libnvidia-container
// repository of the container toolkit. Every row names its source. A key
// whose fingerprint no source confirms is kept with Confirmed false, so
// that gpuenv names it but never trusts it on its own.
//
// It imports nothing of gpuenv's, so that any package (the planner, init)
// can look a repository up.
package nvidiarepo

import (
	"fmt"
	"slices"
	"strings"
)

// Key is a repository's signing key.
type Key struct {
	// File is the key's file name beside the repository's index
	// ("3bf863cc.pub"), or its full URL when it lives elsewhere.
	File string
	// Fingerprint is the primary key's full fingerprint, 40 upper-case
	// hex digits for a version 4 key; empty when no source states it.
	Fingerprint string
	// Confirmed is true when a source gpuenv trusts for it states the
	// whole fingerprint: NVIDIA's own documents, or public projects that
	// derived it from the published key file independently of each other.
	Confirmed bool
	// Source says where the fingerprint comes from, or why it is not
	// confirmed.
	Source string
}

// Repository is one of NVIDIA's package repositories.
type Repository struct {
	// Name is gpuenv's name for it: "cuda-ubuntu2204-x86_64".
	Name string
	// Dir is NVIDIA's directory name for the distribution and release
	// ("ubuntu2204", "rhel9", "wsl-ubuntu"); empty for the toolkit's.
	Dir string
	// OS is the os-release ID it serves ("ubuntu", "rhel", "amzn",
	// "sles"); Release the VERSION_ID, whole for Ubuntu ("22.04"), the
	// major release elsewhere ("9").
	OS, Release string
	// Arch is the machine name uname -m gives ("x86_64", "aarch64").
	Arch string
	// Family is the package family: "deb" or "rpm".
	Family string
	// URL is the repository's base, ending in "/": a flat repository
	// (suite "/") for apt, the baseurl for dnf.
	URL string
	Key Key
	// KeyringPackage is the package NVIDIA's guides install the key with
	// on apt hosts; empty where the guides import the key file instead.
	KeyringPackage string
	// PinPriority is the priority NVIDIA's own pin file gives the
	// repository's packages (cuda-<dir>.pin, installed as
	// /etc/apt/preferences.d/cuda-repository-pin-600); 0 where NVIDIA
	// publishes none.
	PinPriority int
	// SignedMetadata is set for a dnf repository whose metadata is
	// signed and whose packages are not: its .repo file checks the one
	// (repo_gpgcheck=1) and not the other (gpgcheck=0), as NVIDIA's own
	// nvidia-container-toolkit.repo does.
	SignedMetadata bool
	// Source is where the repository's URL and layout are stated.
	Source string
}

// KeyURL is the URL the repository's key is fetched from.
func (r Repository) KeyURL() string {
	if strings.Contains(r.Key.File, "://") {
		return r.Key.File
	}
	return r.URL + r.Key.File
}

// Usable says why gpuenv may not add the repository on its own; nil when
// it may.
func (r Repository) Usable() error {
	if r.Key.Fingerprint == "" || !r.Key.Confirmed {
		return fmt.Errorf("gpuenv's table has no confirmed fingerprint for its signing key %s (%s), and gpuenv trusts no key it cannot check", r.Key.File, r.Key.Source)
	}
	return nil
}

// Sources of the facts below.
const (
	// srcSignatures is NVIDIA's cuda-repo-management SIGNATURES.md, which
	// shows gpg and dnf printing both keys' full fingerprints.
	srcSignatures = "NVIDIA/cuda-repo-management SIGNATURES.md (gpg: \"Primary key fingerprint: EB69 3B30 35CD 5710 E231 E123 A4B4 6996 3BF8 63CC\"; dnf: \"Importing GPG key 0xD42D0685 … Fingerprint: 610C 7B14 E068 A878 070D A4E9 9CD0 A493 D42D 0685\")"
	// srcKeys is NVIDIA's driver installation guide, "GPG Keys Used to
	// Sign the Packages": d42d0685 for RPM distributions, 3bf863cc for
	// Debian ones; and cuda-repo-management's README table of the active
	// key per distribution (amzn2023 D42D0685, debian12 3bf863cc,
	// debian13 8793F200).
	srcKeys = "docs.nvidia.com/datacenter/tesla/driver-installation-guide, \"GPG Keys Used to Sign the Packages\"; NVIDIA/cuda-repo-management README \"GPG keys\""
	// srcGuide is NVIDIA's CUDA installation guide for Linux, network
	// repository sections (cuda-keyring_1.1-1_all.deb on apt hosts,
	// cuda-<distro>.repo on dnf hosts, the pin file on Ubuntu).
	srcGuide = "docs.nvidia.com/cuda/cuda-installation-guide-linux, network repository installation"
	// srcImages is the nvidia/cuda images, whose RHEL-family Dockerfiles
	// fetch …/rhel{8,9}/${NVARCH}/D42D0685.pub and check its sha256
	// (d0664fbbdb8c32356d45de36c5984617217b2d0bef41b93ccecd326ba3b80c87),
	// NVARCH being x86_64 or sbsa.
	srcImages = "nvidia/cuda image Dockerfiles (NVIDIA_GPGKEY_SUM, D42D0685.pub under rhel8/rhel9 ${NVARCH})"
)

const (
	keyDeb = "3bf863cc.pub"
	keyRPM = "D42D0685.pub"
	fprDeb = "EB693B3035CD5710E231E123A4B469963BF863CC"
	fprRPM = "610C7B14E068A878070DA4E99CD0A493D42D0685"
	// KeyringPackage is the keyring package of NVIDIA's apt
	// repositories; version 1.0-1 and the apt-key key 7fa2af80 before it
	// are retired.
	KeyringPackage = "cuda-keyring_1.1-1_all.deb"
	cudaBase       = "https://developer.download.nvidia.com/compute/cuda/repos/"
)

var debKey = Key{File: keyDeb, Fingerprint: fprDeb, Confirmed: true, Source: srcSignatures + "; " + srcKeys}
var rpmKey = Key{File: keyRPM, Fingerprint: fprRPM, Confirmed: true, Source: srcSignatures + "; " + srcKeys}

// cuda makes one CUDA repository row; nvArch is NVIDIA's directory name
// for the machine ("x86_64", "sbsa").
func cuda(dir, os, release, nvArch, family string, key Key, pin int, source string) Repository {
	arch := nvArch
	if nvArch == "sbsa" {
		arch = "aarch64"
	}
	r := Repository{Name: "cuda-" + dir + "-" + nvArch, Dir: dir, OS: os, Release: release, Arch: arch, Family: family,
		URL: cudaBase + dir + "/" + nvArch + "/", Key: key, PinPriority: pin, Source: source}
	if family == "deb" {
		r.KeyringPackage = KeyringPackage
	}
	return r
}

// cudaRepos are NVIDIA's CUDA repositories. sbsa is NVIDIA's tree for
// Arm64 servers (Grace, Arm hosts with discrete GPUs); Jetson's integrated
// GPUs have repositories of their own, which gpuenv does not add.
var cudaRepos = []Repository{
	// Ubuntu: cuda-keyring, and the pin file of NVIDIA's guide.
	cuda("ubuntu2004", "ubuntu", "20.04", "x86_64", "deb", debKey, 600, srcGuide+" (ubuntu2004/x86_64)"),
	cuda("ubuntu2004", "ubuntu", "20.04", "sbsa", "deb", debKey, 600, srcGuide+" (ubuntu2004/sbsa: cuda-ubuntu2004.pin, cuda-keyring_1.1-1_all.deb)"),
	cuda("ubuntu2204", "ubuntu", "22.04", "x86_64", "deb", debKey, 600, srcGuide+" (ubuntu2204/x86_64); compat-facts.md §7"),
	cuda("ubuntu2204", "ubuntu", "22.04", "sbsa", "deb", debKey, 600, srcGuide+" (ubuntu2204/sbsa)"),
	cuda("ubuntu2404", "ubuntu", "24.04", "x86_64", "deb", debKey, 600, srcGuide+" (ubuntu2404/x86_64); compat-facts.md §7"),
	cuda("ubuntu2404", "ubuntu", "24.04", "sbsa", "deb", debKey, 600, srcGuide+" (ubuntu2404/sbsa/cuda-keyring_1.1-1_all.deb, pinned with key EB693B30… by public provisioning scripts)"),
	// WSL: Ubuntu's userland without the driver, which Windows provides.
	cuda("wsl-ubuntu", "ubuntu", "", "x86_64", "deb", debKey, 600, srcGuide+"; CUDA on WSL user guide (wsl-ubuntu/x86_64/cuda-keyring_1.1-1_all.deb, cuda-wsl-ubuntu.pin)"),
	// Debian: cuda-keyring; NVIDIA publishes no pin file for Debian.
	cuda("debian11", "debian", "11", "x86_64", "deb", debKey, 0, srcGuide+" (debian11/x86_64)"),
	cuda("debian12", "debian", "12", "x86_64", "deb", debKey, 0, srcGuide+" (debian12/x86_64); cuda-repo-management README (debian12 3bf863cc)"),
	cuda("debian12", "debian", "12", "sbsa", "deb", debKey, 0, srcGuide+" (debian12/sbsa, key file 3bf863cc.pub there)"),
	cuda("debian13", "debian", "13", "x86_64", "deb", Key{File: "8793F200.pub", Fingerprint: "02182E60104FCDC26EAE1B8597A5D4CB8793F200",
		Source: "cuda-repo-management README names 8793F200 for debian13; the full fingerprint is stated by one public project only, not by NVIDIA"}, 0, "NVIDIA/cuda-repo-management README \"GPG keys\" (debian13)"),
	// RHEL and its rebuilds (Rocky, Alma) share the rhel trees.
	cuda("rhel8", "rhel", "8", "x86_64", "rpm", rpmKey, 0, srcGuide+" (cuda-rhel8.repo); "+srcImages),
	cuda("rhel8", "rhel", "8", "sbsa", "rpm", rpmKey, 0, srcGuide+" (rhel8/sbsa/cuda-rhel8.repo); "+srcImages),
	cuda("rhel9", "rhel", "9", "x86_64", "rpm", rpmKey, 0, srcGuide+" (cuda-rhel9.repo); "+srcImages+"; compat-facts.md §7"),
	cuda("rhel9", "rhel", "9", "sbsa", "rpm", rpmKey, 0, srcGuide+" (rhel9/sbsa/cuda-rhel9.repo); "+srcImages),
	cuda("rhel10", "rhel", "10", "x86_64", "rpm", Key{File: "CDF6BA43.pub",
		Source: "public cuda-rhel10.repo copies name gpgkey=…/rhel10/x86_64/CDF6BA43.pub, a key other than D42D0685; no source states its full fingerprint"}, 0, srcGuide+" (cuda-rhel10.repo)"),
	cuda("rhel10", "rhel", "10", "sbsa", "rpm", Key{File: "CDF6BA43.pub",
		Source: "public cuda-rhel10.repo copies name gpgkey=…/rhel10/sbsa/CDF6BA43.pub; no source states its full fingerprint"}, 0, srcGuide+" (rhel10/sbsa/cuda-rhel10.repo)"),
	// Amazon Linux 2023.
	cuda("amzn2023", "amzn", "2023", "x86_64", "rpm", rpmKey, 0, srcGuide+" (cuda-amzn2023.repo); cuda-repo-management README (amzn2023 D42D0685)"),
	cuda("amzn2023", "amzn", "2023", "sbsa", "rpm", rpmKey, 0, srcGuide+" (amzn2023/sbsa/cuda-amzn2023.repo)"),
	// SUSE Linux Enterprise 15: zypper's repository, same RPM key.
	cuda("sles15", "sles", "15", "x86_64", "rpm", rpmKey, 0, srcGuide+" (sles15/x86_64, zypper addrepo)"),
	cuda("sles15", "sles", "15", "sbsa", "rpm", rpmKey, 0, srcGuide+" (sles15/sbsa with key D42D0685.pub, as SUSE's and others' repository definitions name it)"),
}

// containerKey is the libnvidia-container repository's key. NVIDIA's
// install guide fetches it from the URL but does not print the
// fingerprint; public provisioning scripts and Puppet/Ansible roles that
// extracted it from the key file with gpg agree on it.
var containerKey = Key{File: "https://nvidia.github.io/libnvidia-container/gpgkey", Fingerprint: "C95B321B61E88C1809C4F759DDCAE044F796ECB0", Confirmed: true,
	Source: "fingerprint as several independent public projects pin it after extracting it from https://nvidia.github.io/libnvidia-container/gpgkey with gpg (apt::key ids, gpg --show-keys checks); NVIDIA's guide itself names the URL only"}

// srcToolkit is NVIDIA's container toolkit install guide: the stable
// list (…/stable/deb/nvidia-container-toolkit.list: "deb
// https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH) /") and
// repo file (…/stable/rpm/nvidia-container-toolkit.repo, baseurl
// …/stable/rpm/$basearch).
const srcToolkit = "docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html; its nvidia-container-toolkit.repo (repo_gpgcheck=1, gpgcheck=0) as public copies quote it"

// containerRepos are the container toolkit's stable repositories, one per
// family and architecture (the URL has the architecture as apt's
// $(ARCH) and dnf's $basearch expand it).
var containerRepos = []Repository{
	{Name: "nvidia-container-toolkit-deb-amd64", Arch: "x86_64", Family: "deb", URL: "https://nvidia.github.io/libnvidia-container/stable/deb/amd64/", Key: containerKey, Source: srcToolkit},
	{Name: "nvidia-container-toolkit-deb-arm64", Arch: "aarch64", Family: "deb", URL: "https://nvidia.github.io/libnvidia-container/stable/deb/arm64/", Key: containerKey, Source: srcToolkit},
	{Name: "nvidia-container-toolkit-rpm-x86_64", Arch: "x86_64", Family: "rpm", URL: "https://nvidia.github.io/libnvidia-container/stable/rpm/x86_64/", Key: containerKey, SignedMetadata: true, Source: srcToolkit},
	{Name: "nvidia-container-toolkit-rpm-aarch64", Arch: "aarch64", Family: "rpm", URL: "https://nvidia.github.io/libnvidia-container/stable/rpm/aarch64/", Key: containerKey, SignedMetadata: true, Source: srcToolkit},
}

// All returns every repository of the table: the CUDA repositories, then
// the container toolkit's.
func All() []Repository {
	return append(slices.Clone(cudaRepos), containerRepos...)
}

// Host names the system a repository is looked up for, as os-release and
// uname -m say it.
type Host struct {
	ID        string   // "ubuntu", "rocky"
	IDLike    []string // "rhel centos fedora"
	VersionID string   // "22.04", "9.4"
	Arch      string   // "x86_64", "aarch64"
	// WSL is set on Windows' Subsystem for Linux, whose CUDA repository
	// is wsl-ubuntu whatever the Ubuntu release.
	WSL bool
}

// family is the os-release ID the table names a host by, and the release
// as the table writes it.
func (h Host) key() (id, release string) {
	id, release = h.ID, h.VersionID
	major, _, _ := strings.Cut(release, ".")
	switch {
	case id == "rhel" || id == "rocky" || id == "almalinux" || id == "centos" || slices.Contains(h.IDLike, "rhel"):
		return "rhel", major
	case id == "sles" || id == "sles_sap" || id == "sle_hpc":
		return "sles", major
	case id == "amzn":
		return "amzn", major
	case id == "debian":
		return "debian", major
	}
	return id, release
}

// CUDA returns NVIDIA's CUDA repository for the host, or an error that
// says what NVIDIA publishes instead.
func CUDA(h Host) (Repository, error) {
	id, release := h.key()
	arch := h.Arch
	if arch == "" {
		return Repository{}, fmt.Errorf("the host's architecture is unknown, so gpuenv cannot tell which of NVIDIA's CUDA repositories serves it")
	}
	if arch == "arm64" {
		arch = "aarch64"
	} else if arch == "amd64" {
		arch = "x86_64"
	}
	var releases []string
	for _, r := range testRows(cudaRepos) {
		match := r.OS == id && r.Release == release
		if h.WSL {
			match = r.Dir == "wsl-ubuntu" && id == "ubuntu"
		} else if r.Dir == "wsl-ubuntu" {
			match = false
		}
		if !match {
			continue
		}
		if r.Arch == arch {
			return r, nil
		}
		releases = append(releases, r.Arch)
	}
	if len(releases) > 0 {
		return Repository{}, fmt.Errorf("NVIDIA publishes its CUDA repository for %s %s on %s only, not on %s", id, release, strings.Join(releases, " and "), arch)
	}
	var known []string
	for _, r := range cudaRepos {
		if !slices.Contains(known, r.Dir) {
			known = append(known, r.Dir)
		}
	}
	return Repository{}, fmt.Errorf("NVIDIA publishes no CUDA repository for %s %s in gpuenv's table (it has %s)", h.ID, h.VersionID, strings.Join(known, ", "))
}

// ContainerToolkit returns the container toolkit's stable repository for
// a package family ("deb", "rpm") and machine.
func ContainerToolkit(family, arch string) (Repository, bool) {
	if arch == "amd64" {
		arch = "x86_64"
	} else if arch == "arm64" {
		arch = "aarch64"
	}
	for _, r := range containerRepos {
		if r.Family == family && r.Arch == arch {
			return r, true
		}
	}
	return Repository{}, false
}

// Files are the files gpuenv writes for a repository it adds itself
// (named apart from those of a spec's repository blocks, which are
// gpuenv-<name>.*), and the address of the step that writes them.
type Files struct {
	Address                                                 string
	AptSources, AptPreferences, AptKeyring, DnfRepo, DnfKey string
}

func filesFor(name string) Files {
	return Files{
		Address:        "repository." + name,
		AptSources:     "/etc/apt/sources.list.d/gpuenv-" + name + ".sources",
		AptPreferences: "/etc/apt/preferences.d/gpuenv-" + name + ".pref",
		AptKeyring:     "/etc/apt/keyrings/gpuenv-" + name + ".gpg",
		DnfRepo:        "/etc/yum.repos.d/gpuenv-" + name + ".repo",
		DnfKey:         "/etc/pki/rpm-gpg/RPM-GPG-KEY-gpuenv-" + name,
	}
}

var (
	// CUDAFiles are those of NVIDIA's CUDA repository.
	CUDAFiles = filesFor("nvidia-cuda")
	// ToolkitFiles are those of the container toolkit's repository.
	ToolkitFiles = filesFor("nvidia-container-toolkit")
)

// The CUDA repository's, by their names elsewhere in gpuenv.
var (
	Address            = CUDAFiles.Address
	AptSourcesFile     = CUDAFiles.AptSources
	AptPreferencesFile = CUDAFiles.AptPreferences
	AptKeyring         = CUDAFiles.AptKeyring
	DnfRepoFile        = CUDAFiles.DnfRepo
	DnfKey             = CUDAFiles.DnfKey
)

// Keyrings are the keyrings gpuenv writes a fetched key to.
func Keyrings() []string {
	return []string{CUDAFiles.AptKeyring, CUDAFiles.DnfKey, ToolkitFiles.AptKeyring, ToolkitFiles.DnfKey}
}

// OwnFile reports whether p is one of the files gpuenv writes for a
// repository it adds.
func OwnFile(p string) bool {
	for _, f := range []Files{CUDAFiles, ToolkitFiles} {
		if slices.Contains([]string{f.AptSources, f.AptPreferences, f.AptKeyring, f.DnfRepo, f.DnfKey}, p) {
			return true
		}
	}
	return false
}
