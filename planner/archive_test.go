package planner

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/spec"
)

// Index paths of the synthetic Ubuntu 22.04 archive below.
const (
	ixUpdates   = "/var/lib/apt/lists/archive.ubuntu.com_ubuntu_dists_jammy-updates_restricted_binary-amd64_Packages"
	ixBackports = "/var/lib/apt/lists/archive.ubuntu.com_ubuntu_dists_jammy-backports_restricted_binary-amd64_Packages"
	ixNVIDIA    = "/var/lib/apt/lists/developer.download.nvidia.com_compute_cuda_repos_ubuntu2204_x86%5f64_Packages"
	ixPPA       = "/var/lib/apt/lists/ppa.launchpadcontent.net_graphics-drivers_ppa_ubuntu_dists_jammy_main_binary-amd64_Packages"
	ixMirror    = "/var/lib/apt/lists/_srv_cuda-mirror_._Packages"
)

// ubuntuArchive is an Ubuntu 22.04 host with jammy-updates (500), a
// backports suite (NotAutomatic, 100), NVIDIA's repository pinned to 600
// as its keyring package does, a PPA and a local mirror; nvidia-driver-550
// 550.54.15 is installed from NVIDIA's.
func ubuntuArchive() *facts.Observation {
	obs := machine(ubuntu2204, h100)
	ver := func(v string, prio int, from string, pin int, origins ...string) facts.IndexedVersion {
		return facts.IndexedVersion{Version: v, Priority: prio, PriorityFrom: from, Pin: pin, Origins: origins}
	}
	installed := ver("550.54.15-0ubuntu1", 600, "pin /etc/apt/preferences.d/cuda-repository-pin-600 record 3", 3, ixNVIDIA)
	installed.Installed = true
	obs.Packages.Packages = []facts.Package{{Name: "nvidia-driver-550", Version: "550.54.15-0ubuntu1", State: facts.StateInstalled}}
	obs.PackageIndexes = facts.PackageIndexes{
		Manager: "apt",
		Indexes: []facts.PackageIndex{
			{Path: ixUpdates, Source: facts.IndexSource{URI: "http://archive.ubuntu.com/ubuntu/", Suite: "jammy-updates", Component: "restricted"}, Site: "archive.ubuntu.com",
				Release: &facts.ReleaseData{Origin: "Ubuntu", Label: "Ubuntu", Suite: "jammy-updates", Codename: "jammy"}, Priority: 500, PriorityFrom: "default"},
			{Path: ixBackports, Source: facts.IndexSource{URI: "http://archive.ubuntu.com/ubuntu/", Suite: "jammy-backports", Component: "restricted"}, Site: "archive.ubuntu.com",
				Release: &facts.ReleaseData{Origin: "Ubuntu", Suite: "jammy-backports", Codename: "jammy", NotAutomatic: true, ButAutomaticUpgrades: true}, Priority: 100, PriorityFrom: "ButAutomaticUpgrades"},
			{Path: ixNVIDIA, Source: facts.IndexSource{URI: "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/", Suite: "/"}, Site: "developer.download.nvidia.com",
				Release: &facts.ReleaseData{Origin: "NVIDIA", Label: "NVIDIA CUDA"}, Priority: 600, PriorityFrom: "pin", Pin: 3},
			{Path: ixPPA, Source: facts.IndexSource{URI: "https://ppa.launchpadcontent.net/graphics-drivers/ppa/ubuntu/", Suite: "jammy", Component: "main"}, Site: "ppa.launchpadcontent.net",
				Release: &facts.ReleaseData{Origin: "LP-PPA-graphics-drivers", Suite: "jammy", Codename: "jammy"}, Priority: 500, PriorityFrom: "default"},
			{Path: ixMirror, Source: facts.IndexSource{URI: "file:/srv/cuda-mirror/", Suite: "./"}, Priority: 500, PriorityFrom: "default"},
		},
		Packages: []facts.IndexedPackage{
			{Name: "nvidia-driver-550", Installed: "550.54.15-0ubuntu1", Versions: []facts.IndexedVersion{
				ver("550.163.01-0ubuntu1", 500, "default", 0, ixPPA),
				ver("550.130-0ubuntu0.22.04.1", 100, "ButAutomaticUpgrades", 0, ixBackports),
				ver("550.120-0ubuntu0.22.04.1", 500, "default", 0, ixUpdates),
				ver("550.90.07-0ubuntu1", 600, "pin", 3, ixNVIDIA),
				ver("550.80-0ubuntu1", -1, "pin never", 4, ixMirror),
				installed,
			}},
		},
	}
	return obs
}

func TestArchiveSources(t *testing.T) {
	obs := ubuntuArchive()
	a := NewArchive(obs, loadSpec(t, "repository \"mirror\" {\n  url = \"file:/srv/cuda-mirror\"\n}\n"))
	got := map[string]spec.Source{}
	for p, s := range a.source {
		got[p] = s
	}
	want := map[string]spec.Source{ixUpdates: spec.SourceDistro, ixBackports: spec.SourceDistro, ixNVIDIA: spec.SourceNVIDIA, ixPPA: "", ixMirror: spec.SourceNVIDIA}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sources (-want +got):\n%s", diff)
	}
	if !a.Knows(spec.SourceDistro) || !a.Knows(spec.SourceNVIDIA) {
		t.Error("the archive should know both sources")
	}

	// A source configured but not fetched, or a repository this plan adds,
	// leaves what the source offers to after apply.
	obs.PackageIndexes.Missing = []facts.IndexSource{{File: "/etc/apt/sources.list", URI: "http://security.ubuntu.com/ubuntu/", Suite: "jammy-security", Component: "restricted"}}
	a = NewArchive(obs, loadSpec(t, "repository \"cuda\" {\n  url = \"https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/sbsa/\"\n}\n"))
	if a.Knows(spec.SourceDistro) || a.Knows(spec.SourceNVIDIA) || !a.Configured(spec.SourceNVIDIA) {
		t.Error("unfetched sources are not known")
	}
	obs.PackageIndexes.Indexes = nil
	if NewArchive(obs, nil) != nil {
		t.Error("an archive without indexes")
	}
}

// TestArchiveOffers: a source offers its own indexes' versions, in apt's
// order of preference, and never one apt may not install.
func TestArchiveOffers(t *testing.T) {
	a := NewArchive(ubuntuArchive(), loadSpec(t, "repository \"mirror\" {\n  url = \"file:/srv/cuda-mirror\"\n}\n"))
	versions := func(src spec.Source) []string {
		var out []string
		for _, o := range a.Offers("nvidia-driver-550", src) {
			out = append(out, o.Version)
		}
		return out
	}
	if diff := cmp.Diff([]string{"550.120-0ubuntu0.22.04.1", "550.130-0ubuntu0.22.04.1"}, versions(spec.SourceDistro)); diff != "" {
		t.Errorf("distro (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"550.90.07-0ubuntu1", "550.54.15-0ubuntu1"}, versions(spec.SourceNVIDIA)); diff != "" {
		t.Errorf("nvidia (-want +got):\n%s", diff)
	}
	want := "apt prefers 550.120-0ubuntu0.22.04.1 at priority 500 (default) over the newer 550.130-0ubuntu0.22.04.1 at priority 100 (ButAutomaticUpgrades)"
	if got := a.PreferenceNote(a.Offers("nvidia-driver-550", spec.SourceDistro)); got != want {
		t.Errorf("note %q, want %q", got, want)
	}
	if got := a.PreferenceNote(a.Offers("nvidia-driver-550", spec.SourceNVIDIA)); got != "" {
		t.Errorf("the newest needs no note: %q", got)
	}
	if src, ix, ok := a.Origin("nvidia-driver-550", "550.54.15-0ubuntu1"); !ok || src != spec.SourceNVIDIA || ix != ixNVIDIA {
		t.Errorf("origin %q %q %v", src, ix, ok)
	}
	if _, _, ok := a.Origin("nvidia-driver-550", "550.40.07-0ubuntu1"); ok {
		t.Error("a version no index lists has an origin")
	}
	if got := a.Listing(spec.SourceNVIDIA, DriverPackage); got != "nvidia-driver-550 550.90.07-0ubuntu1, 550.54.15-0ubuntu1" {
		t.Errorf("listing %q", got)
	}
}

// TestResolveSaysWhenPriorityDecides: the source's choice says when a
// priority put a version ahead of a newer one.
func TestResolveSaysWhenPriorityDecides(t *testing.T) {
	obs := ubuntuArchive()
	obs.Packages.Packages = nil
	obs.PackageIndexes.Packages[0].Installed = ""
	d, diags := Resolve(loadSpec(t, "driver {\n  version        = \">= 550.100, < 551\"\n  kernel_modules = \"proprietary\"\n}\n"), obs)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	var from string
	for _, in := range d.Inferred {
		if in.Address == "driver" && in.Attr == "source" {
			from = in.From
		}
	}
	for _, w := range []string{
		"Ubuntu 22.04's archive (jammy-updates, jammy-backports), which offers nvidia-driver-550 550.120-0ubuntu0.22.04.1 (" + ixUpdates + " (Ubuntu, jammy-updates))",
		"apt prefers 550.120-0ubuntu0.22.04.1 at priority 500 (default) over the newer 550.130-0ubuntu0.22.04.1 at priority 100",
	} {
		if !strings.Contains(from, w) {
			t.Errorf("driver source from %q\nwant %q in it", from, w)
		}
	}
	if d.Driver.Source != spec.SourceDistro || d.Driver.Versions.String() != ">= 550.100, < 551" {
		t.Errorf("driver %s %s", d.Driver.Source, d.Driver.Versions)
	}
}

// TestDebianComponentsNotEnabled: a default Debian 12 host fetches the
// lists of main alone, and the NVIDIA packages are in contrib and
// non-free, which the plan enables first. Until they are fetched, the
// archive does not know what the distribution offers, rather than
// knowing it offers nothing; with them fetched, it knows.
func TestDebianComponentsNotEnabled(t *testing.T) {
	const main = "/var/lib/apt/lists/deb.debian.org_debian_dists_bookworm_main_binary-amd64_Packages"
	index := func(path, component string) facts.PackageIndex {
		return facts.PackageIndex{Path: path, Source: facts.IndexSource{URI: "http://deb.debian.org/debian/", Suite: "bookworm", Component: component},
			Site: "deb.debian.org", Release: &facts.ReleaseData{Origin: "Debian", Suite: "stable", Codename: "bookworm"}, Priority: 500, PriorityFrom: "default"}
	}
	obs := machine(debian12)
	obs.PackageIndexes = facts.PackageIndexes{Manager: "apt", Indexes: []facts.PackageIndex{index(main, "main")}}
	a := NewArchive(obs, nil)
	if a.Knows(spec.SourceDistro) {
		t.Errorf("with main alone fetched, the archive claims to know what Debian offers")
	}
	if !a.Configured(spec.SourceDistro) {
		t.Errorf("Debian's archive is configured, but the archive says it is not")
	}
	obs.PackageIndexes.Indexes = append(obs.PackageIndexes.Indexes,
		index(strings.ReplaceAll(main, "_main_", "_contrib_"), "contrib"),
		index(strings.ReplaceAll(main, "_main_", "_non-free_"), "non-free"))
	if !NewArchive(obs, nil).Knows(spec.SourceDistro) {
		t.Errorf("with main, contrib and non-free fetched, the archive does not know what Debian offers")
	}
}
