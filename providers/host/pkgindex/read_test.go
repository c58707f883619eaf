package pkgindex

import (
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
	"github.com/gpuenv/gpuenv/providers/host/pkgdb"
)

func TestURIToFileName(t *testing.T) {
	tests := []struct{ uri, want string }{
		{"http://deb.debian.org/debian/dists/bookworm/InRelease", "deb.debian.org_debian_dists_bookworm_InRelease"},
		{"https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/Packages", "developer.download.nvidia.com_compute_cuda_repos_ubuntu2204_x86%5f64_Packages"},
		// User and password are dropped, a port is kept.
		{"https://user:secret@repo.example:8443/apt/dists/stable/main/binary-amd64/Packages", "repo.example:8443_apt_dists_stable_main_binary-amd64_Packages"},
		{"file:/srv/repo/./Packages", "_srv_repo_._Packages"},
		{"http://example.org/a b~c=d/Release", "example.org_a%20b%7ec%3dd_Release"},
	}
	for _, tt := range tests {
		if got := URIToFileName(tt.uri); got != tt.want {
			t.Errorf("URIToFileName(%q) = %q, want %q", tt.uri, got, tt.want)
		}
	}
	// A suite is URI-encoded before it joins the URI, as apt does, so
	// that its "~" is quoted twice.
	e := entry{uri: "http://example.org/debian", suite: "stable~x"}
	if got := URIToFileName(e.metaURI("InRelease")); got != "example.org_debian_dists_stable%257ex_InRelease" {
		t.Errorf("suite with ~: %q", got)
	}
	flat := entry{uri: "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/", suite: "/"}
	if got := URIToFileName(flat.metaURI("InRelease")); got != "developer.download.nvidia.com_compute_cuda_repos_ubuntu2204_x86%5f64_InRelease" {
		t.Errorf("flat repository: %q", got)
	}
}

// stanzaNames are the packages of the handwritten stanzas of
// testdata/apt (the relevant ones of a fixture's lists).
func stanzaNames(t *testing.T, files ...string) []string {
	t.Helper()
	var names []string
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(hosttest.TestdataDir(t), "apt", f))
		if err != nil {
			t.Fatal(err)
		}
		paras, err := pkgdb.Paragraphs(data)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range paras {
			if !slices.Contains(names, p.Values["Package"]) {
				names = append(names, p.Values["Package"])
			}
		}
	}
	slices.Sort(names)
	return names
}

func TestReadDebian12(t *testing.T) {
	h, repos := fixture(t, "debian12-lists")
	ix := read(t, h, repos, Options{Arch: "x86_64", NoCache: true})
	if ix.Manager != "apt" || ix.Architecture != "amd64" || len(ix.Missing) != 0 {
		t.Fatalf("manager %q, architecture %q, missing %v", ix.Manager, ix.Architecture, ix.Missing)
	}
	const lists = "/var/lib/apt/lists/"
	type index struct {
		path, suite, component, release string
		stanzas                         int
	}
	var got []index
	for _, x := range ix.Indexes {
		rel := ""
		if x.Release != nil {
			rel = x.Release.Suite + "/" + x.Release.Codename
		}
		got = append(got, index{strings.TrimPrefix(x.Path, lists), x.Source.Suite, x.Source.Component, rel, x.Stanzas})
		if x.Priority != 500 || x.PriorityFrom != "default" || x.Site != "deb.debian.org" || x.Identity.Inode == 0 {
			t.Errorf("%s: priority %d (%s), site %q, identity %+v", x.Path, x.Priority, x.PriorityFrom, x.Site, x.Identity)
		}
	}
	want := []index{
		{"deb.debian.org_debian_dists_bookworm_main_binary-amd64_Packages.lz4", "bookworm", "main", "stable/bookworm", 2505},
		{"deb.debian.org_debian_dists_bookworm_contrib_binary-amd64_Packages.lz4", "bookworm", "contrib", "stable/bookworm", 152},
		{"deb.debian.org_debian_dists_bookworm_non-free_binary-amd64_Packages.lz4", "bookworm", "non-free", "stable/bookworm", 264},
		{"deb.debian.org_debian_dists_bookworm-updates_main_binary-amd64_Packages", "bookworm-updates", "main", "stable-updates/bookworm-updates", 1},
		{"deb.debian.org_debian_dists_bookworm-updates_contrib_binary-amd64_Packages", "bookworm-updates", "contrib", "stable-updates/bookworm-updates", 0},
		{"deb.debian.org_debian_dists_bookworm-updates_non-free_binary-amd64_Packages", "bookworm-updates", "non-free", "stable-updates/bookworm-updates", 0},
		{"deb.debian.org_debian-security_dists_bookworm-security_main_binary-amd64_Packages.gz", "bookworm-security", "main", "stable-security/bookworm-security", 401},
		{"deb.debian.org_debian-security_dists_bookworm-security_contrib_binary-amd64_Packages", "bookworm-security", "contrib", "stable-security/bookworm-security", 0},
		{"deb.debian.org_debian-security_dists_bookworm-security_non-free_binary-amd64_Packages.gz", "bookworm-security", "non-free", "stable-security/bookworm-security", 9},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(index{})); diff != "" {
		t.Errorf("indexes (-want +got):\n%s", diff)
	}

	// Every relevant stanza, and nothing of the thousands of others.
	var names []string
	for _, p := range ix.Packages {
		names = append(names, p.Name)
	}
	wantNames := stanzaNames(t, "debian12/bookworm_main.stanzas", "debian12/bookworm_contrib.stanzas", "debian12/bookworm_non-free.stanzas", "debian12/bookworm-security_main.stanzas", "debian12/bookworm-security_non-free.stanzas")
	if !slices.Equal(names, wantNames) {
		t.Errorf("packages %q, want %q", names, wantNames)
	}

	drv := pkg(t, ix, "nvidia-driver")
	if drv.Candidate != "535.309.01-0+deb12u1" || !strings.HasPrefix(drv.CandidateFrom, "the newest version, priority 500") {
		t.Errorf("nvidia-driver candidate %s (%s)", drv.Candidate, drv.CandidateFrom)
	}
	var vs []string
	for _, v := range drv.Versions {
		vs = append(vs, v.Version+" "+strings.TrimPrefix(strings.Join(v.Origins, " "), lists))
	}
	if want := []string{
		"535.309.01-0+deb12u1 deb.debian.org_debian-security_dists_bookworm-security_non-free_binary-amd64_Packages.gz",
		"535.261.03-1 deb.debian.org_debian_dists_bookworm_non-free_binary-amd64_Packages.lz4",
	}; !slices.Equal(vs, want) {
		t.Errorf("nvidia-driver versions %q, want %q", vs, want)
	}
	// The same version in two suites: both are its origins, in source
	// order, and the package file is the first's.
	hdr := pkg(t, ix, "linux-headers-6.1.0-28-amd64").Versions[0]
	if len(hdr.Origins) != 2 || !strings.Contains(hdr.Origins[0], "bookworm_main") || !strings.Contains(hdr.Origins[1], "bookworm-security_main") ||
		hdr.Filename != "pool/main/l/linux/linux-headers-6.1.0-28-amd64_6.1.119-1_amd64.deb" || hdr.Source != "linux-signed-amd64 (6.1.119+1)" || len(hdr.SHA256) != 64 || hdr.Size == 0 {
		t.Errorf("linux-headers %+v", hdr)
	}
}

// TestInstalled: the installed version is among the versions, with the
// status file's 100 unless an index lists it too, and is never
// downgraded below 1000.
func TestInstalled(t *testing.T) {
	h, repos := fixture(t, "debian12-lists", "debian12-backports")
	if err := os.Remove(filepath.Join(h.Root(), "etc/apt/preferences.d/nvidia-backports")); err != nil {
		t.Fatal(err)
	}
	inst := func(name, v string) facts.Package {
		return facts.Package{Name: name, Version: v, Architecture: "amd64", State: facts.StateInstalled}
	}
	ix := read(t, h, repos, Options{NoCache: true, Installed: []facts.Package{
		inst("nvidia-driver", "550.163.01-2~bpo12+1"),
		inst("nvidia-smi", "535.200.00-1"), // no index lists it
		{Name: "libcuda1", Version: "535.261.03-1", State: facts.StateConfigFiles},
	}})
	drv := pkg(t, ix, "nvidia-driver")
	if drv.Installed != "550.163.01-2~bpo12+1" || drv.Candidate != "550.163.01-2~bpo12+1" {
		t.Errorf("the installed backport must stay the candidate over 500 for older versions: %+v", drv)
	}
	if v := drv.Versions[0]; !v.Installed || v.Priority != 100 || !strings.Contains(v.PriorityFrom, "ButAutomaticUpgrades") {
		t.Errorf("installed version %+v", v)
	}
	smi := pkg(t, ix, "nvidia-smi")
	var only *facts.IndexedVersion
	for i, v := range smi.Versions {
		if v.Version == "535.200.00-1" {
			only = &smi.Versions[i]
		}
	}
	if only == nil || !only.Installed || len(only.Origins) != 0 || only.Priority != 100 || only.PriorityFrom != "installed (/var/lib/dpkg/status)" {
		t.Fatalf("a version only installed: %+v", smi.Versions)
	}
	if smi.Candidate != "535.309.01-0+deb12u1" {
		t.Errorf("nvidia-smi candidate %s, want the newer archive version at 500", smi.Candidate)
	}
	if c := pkg(t, ix, "libcuda1"); c.Installed != "" {
		t.Errorf("a removed package's configuration files are no installed version: %+v", c)
	}
}

// TestBackportsAndPins: a NotAutomatic/ButAutomaticUpgrades suite is at
// 100, below the release; a pin naming its packages lifts them, and the
// facts say which pin decided.
func TestBackportsAndPins(t *testing.T) {
	h, repos := fixture(t, "debian12-lists", "debian12-backports")
	pinned := read(t, h, repos, Options{NoCache: true})
	if len(pinned.Pins) != 1 || pinned.Pins[0].File != "/etc/apt/preferences.d/nvidia-backports" || pinned.Pins[0].Priority != 990 {
		t.Fatalf("pins %+v", pinned.Pins)
	}
	bpo := pinned.Indexes[0]
	if !strings.Contains(bpo.Path, "bookworm-backports") || bpo.Priority != 100 || bpo.Release == nil || !bpo.Release.NotAutomatic || !bpo.Release.ButAutomaticUpgrades {
		t.Fatalf("backports index %+v", bpo)
	}
	drv := pkg(t, pinned, "nvidia-driver")
	if drv.Candidate != "550.163.01-2~bpo12+1" || drv.Versions[0].Pin != 1 || drv.Versions[0].Priority != 990 || !strings.Contains(drv.CandidateFrom, "pin /etc/apt/preferences.d/nvidia-backports record 1") {
		t.Errorf("pinned nvidia-driver %+v", drv)
	}
	// The pin names the packages of the backports suite only: other
	// versions keep their index's priority.
	if v := drv.Versions[1]; v.Version != "535.309.01-0+deb12u1" || v.Priority != 500 || v.Pin != 0 {
		t.Errorf("unpinned version %+v", v)
	}
	if p := pkg(t, pinned, "python3-torch"); p.Versions[0].Pin != 0 {
		t.Errorf("a package the pin does not name: %+v", p)
	}

	if err := os.Remove(filepath.Join(h.Root(), "etc/apt/preferences.d/nvidia-backports")); err != nil {
		t.Fatal(err)
	}
	plain := read(t, h, repos, Options{NoCache: true})
	drv = pkg(t, plain, "nvidia-driver")
	if drv.Candidate != "535.309.01-0+deb12u1" || !strings.Contains(drv.CandidateFrom, "over the newer 550.163.01-2~bpo12+1 at priority 100 (ButAutomaticUpgrades in /var/lib/apt/lists/deb.debian.org_debian_dists_bookworm-backports_InRelease)") {
		t.Errorf("without the pin: %s (%s)", drv.Candidate, drv.CandidateFrom)
	}

	// The target release outranks an index's default, as "apt-get -t" does.
	conf := filepath.Join(h.Root(), "etc/apt/apt.conf.d/90target")
	if err := os.MkdirAll(filepath.Dir(conf), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, []byte("// the backports first\nAPT {\n  Default-Release \"bookworm-backports\"; # as apt-get -t\n};\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	target := read(t, h, repos, Options{NoCache: true})
	drv = pkg(t, target, "nvidia-driver")
	if target.DefaultRelease != "bookworm-backports" || drv.Candidate != "550.163.01-2~bpo12+1" || drv.Versions[0].Priority != 990 || !strings.Contains(drv.Versions[0].PriorityFrom, "APT::Default-Release") {
		t.Errorf("target release %q: %+v", target.DefaultRelease, drv)
	}
	// One no source is of is refused by apt, and left out here.
	if err := os.WriteFile(conf, []byte("APT::Default-Release \"trixie\";\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ix, warns := Read(h, Options{Family: "deb", Repositories: repos, NoCache: true})
	if ix.DefaultRelease != "" || len(warns) != 1 || !strings.Contains(warns[0].Message, `APT::Default-Release "trixie"`) {
		t.Errorf("unknown target release: %q, %v", ix.DefaultRelease, warns)
	}
}

// TestNvidiaRepository: NVIDIA's flat repository and the pin its keyring
// package installs (600 for "l=NVIDIA CUDA") beat Ubuntu's newer driver.
func TestNvidiaRepository(t *testing.T) {
	h, repos := fixture(t, "ubuntu2204-cuda-lists")
	ix := read(t, h, repos, Options{NoCache: true, Arch: "x86_64", Installed: []facts.Package{
		{Name: "nvidia-driver-550", Version: "550.54.15-0ubuntu1", Architecture: "amd64", State: facts.StateInstalled},
	}})
	nv := ix.Indexes[len(ix.Indexes)-1]
	if nv.Source.Suite != "/" || nv.Source.Component != "" || nv.Architecture != "" || nv.Site != "developer.download.nvidia.com" ||
		nv.Release == nil || nv.Release.Label != "NVIDIA CUDA" || nv.Priority != 600 || nv.Pin != 3 {
		t.Fatalf("NVIDIA's index %+v", nv)
	}
	drv := pkg(t, ix, "nvidia-driver-550")
	if drv.Candidate != "550.90.07-0ubuntu1" || !strings.Contains(drv.CandidateFrom, "Pin: release l=NVIDIA CUDA") || !strings.Contains(drv.CandidateFrom, "over the newer 550.120-0ubuntu0.22.04.1 at priority 500") {
		t.Errorf("nvidia-driver-550 candidate %s (%s)", drv.Candidate, drv.CandidateFrom)
	}
	// The installed version's origin is the index that lists it.
	last := drv.Versions[len(drv.Versions)-1]
	if !last.Installed || len(last.Origins) != 1 || last.Origins[0] != nv.Path || last.Filename != "./nvidia-driver-550_550.54.15-0ubuntu1_amd64.deb" {
		t.Errorf("installed version %+v", last)
	}
	if got := pkg(t, ix, "cuda-toolkit-12-4"); got.Candidate != "12.4.1-1" || len(got.Versions) != 2 {
		t.Errorf("cuda-toolkit-12-4 %+v", got)
	}
}

// TestCompressions: apt keeps a list plain or compressed; every way
// gives the same packages.
func TestCompressions(t *testing.T) {
	h, repos := fixture(t, "apt-compressed")
	ix := read(t, h, repos, Options{NoCache: true})
	if len(ix.Indexes) != 7 {
		t.Fatalf("%d indexes, want 7", len(ix.Indexes))
	}
	for _, x := range ix.Indexes {
		if x.Stanzas != 9 {
			t.Errorf("%s: %d stanzas, want 9", x.Path, x.Stanzas)
		}
	}
	for _, p := range ix.Packages {
		if len(p.Versions) != 1 || len(p.Versions[0].Origins) != 7 {
			t.Errorf("%s: %+v, want one version in all seven lists", p.Name, p.Versions)
		}
	}
}

// TestLZ4LinkedBlocks decodes a list written as apt writes lz4 lists (64
// KiB blocks linked to the ones before) and compares with the lz4 tool.
func TestLZ4LinkedBlocks(t *testing.T) {
	if _, err := exec.LookPath("lz4"); err != nil {
		t.Skip("no lz4 tool to compare with")
	}
	file := filepath.Join(hosttest.TestdataDir(t), "apt", "debian12", "bookworm_main.Packages.lz4")
	want, err := exec.Command("lz4", "-dc", file).Output()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	src, done, err := decompress(file, f)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	var got []byte
	if err := scanSource(src, blankLine, func(d []byte) error { got = append(got, d...); return nil }); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("decoded %d bytes, lz4 -dc %d: they differ", len(got), len(want))
	}
}

func TestNoLists(t *testing.T) {
	h, repos := fixture(t, "apt-no-lists")
	ix := read(t, h, repos, Options{NoCache: true})
	if ix.Manager != "apt" || len(ix.Indexes) != 0 || len(ix.Packages) != 0 || len(ix.Missing) != 3 || ix.Missing[2].Component != "non-free" {
		t.Errorf("no lists: %+v", ix)
	}
}

func TestReadDnf(t *testing.T) {
	h, repos := fixture(t, "rhel9-dnf")
	ix := read(t, h, repos, Options{Family: "rpm", NoCache: true, Installed: []facts.Package{
		{Name: "nvidia-driver", Version: "3:550.54.15-1.el9", Architecture: "x86_64", State: facts.StateInstalled},
	}})
	if ix.Manager != "dnf" || len(ix.Indexes) != 2 {
		t.Fatalf("indexes %+v", ix.Indexes)
	}
	cuda, epel := ix.Indexes[0], ix.Indexes[1]
	if cuda.Source.Repo != "cuda-rhel9-x86_64" || cuda.Priority != 50 || cuda.Stanzas != 49 || cuda.Release == nil || cuda.Release.Version != "1731600000" {
		t.Errorf("cuda repository %+v", cuda)
	}
	if epel.Source.Repo != "epel" || epel.Priority != 99 || epel.Stanzas != 21 {
		t.Errorf("epel %+v", epel)
	}
	drv := pkg(t, ix, "nvidia-driver")
	if drv.Candidate != "3:550.90.07-1.el9" || len(drv.Versions) != 2 || !drv.Versions[1].Installed || drv.Versions[0].Source != "nvidia-driver" ||
		drv.Versions[0].Filename != "x86_64/nvidia-driver-550.90.07-1.el9.x86_64.rpm" {
		t.Errorf("nvidia-driver %+v", drv)
	}
	var names []string
	for _, p := range ix.Packages {
		names = append(names, p.Name)
	}
	if want := []string{"cuda-drivers", "cuda-toolkit-12-4", "dkms", "kmod-nvidia-latest-dkms", "nvidia-driver", "nvidia-open"}; !slices.Equal(names, want) {
		t.Errorf("packages %q, want %q", names, want)
	}
}

// A local repository (file:) is read where apt reads it: its list in
// ListsDir is a symbolic link to the repository's own Packages file.
func TestLocalRepositoryList(t *testing.T) {
	h, _ := fixture(t, "apt-no-lists")
	root := h.Root()
	stanza := "Package: cuda-toolkit-12-4\nVersion: 12.4.1-1\nArchitecture: amd64\nFilename: ./cuda-toolkit-12-4_12.4.1-1_amd64.deb\nSize: 1000\nSHA256: 00\n\n"
	if err := os.MkdirAll(filepath.Join(root, "srv/cuda-repo"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "srv/cuda-repo/Packages"), []byte(stanza), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/srv/cuda-repo/./Packages", filepath.Join(root, ListsDir, "_srv_cuda-repo_._Packages")); err != nil {
		t.Fatal(err)
	}
	repos := []facts.Repository{{File: "/etc/apt/sources.list.d/cuda-repo.list", URIs: []string{"file:///srv/cuda-repo"}, Suites: []string{"./"}}}
	ix := read(t, h, repos, Options{NoCache: true})
	if len(ix.Indexes) != 1 || len(ix.Missing) != 0 || !slices.Equal(pkgdb.IndexListed(&ix, "cuda-toolkit-12-4"), []string{"12.4.1-1"}) {
		t.Errorf("the local repository's list: indexes %+v, missing %+v, packages %+v", ix.Indexes, ix.Missing, ix.Packages)
	}
}

// A suite whose Release is on disk was fetched: a component of it with no
// list is empty (apt keeps no list of an empty Packages file, as
// bookworm-updates' contrib often is), not missing.
func TestEmptyComponentIsNotMissing(t *testing.T) {
	h, _ := fixture(t, "apt-no-lists")
	release := "Origin: Debian\nSuite: stable-updates\nCodename: bookworm-updates\nComponents: main contrib non-free\nSHA256:\n e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855        0 contrib/binary-amd64/Packages\n"
	if err := os.WriteFile(filepath.Join(h.Root(), ListsDir, "deb.debian.org_debian_dists_bookworm-updates_Release"), []byte(release), 0o644); err != nil {
		t.Fatal(err)
	}
	repos := []facts.Repository{
		{File: "/etc/apt/sources.list", URIs: []string{"http://deb.debian.org/debian"}, Suites: []string{"bookworm-updates"}, Components: []string{"contrib"}},
		{File: "/etc/apt/sources.list", URIs: []string{"http://deb.debian.org/debian"}, Suites: []string{"bookworm"}, Components: []string{"contrib"}},
	}
	ix := read(t, h, repos, Options{NoCache: true})
	if len(ix.Missing) != 1 || ix.Missing[0].Suite != "bookworm" {
		t.Errorf("missing %+v, want only bookworm's contrib (no Release, no list)", ix.Missing)
	}
}

// A list that unpacks without end, or holds one entry larger than any
// archive's, is refused with a warning that names it, and the rest of
// the lists are read: a small corrupt or hostile file costs neither the
// plan's memory nor its time.
func TestOversizeListRefused(t *testing.T) {
	defer func(idx int64, unit int) { maxIndexBytes, maxUnitBytes = idx, unit }(maxIndexBytes, maxUnitBytes)
	maxIndexBytes, maxUnitBytes = 32<<20, 4<<20

	stanza := []byte("Package: libcuda1\nVersion: 535.1-1\nArchitecture: amd64\n\n")
	cases := map[string][]byte{
		// One entry of 8 MiB without a blank line: before the bound the
		// buffer doubled until it held it, whatever its size.
		"unit":  append(append([]byte("Package: x\nDescription: "), bytes.Repeat([]byte("a"), 8<<20)...), '\n'),
		"whole": bytes.Repeat(stanza, (40<<20)/len(stanza)),
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			var gz bytes.Buffer
			w, _ := gzip.NewWriterLevel(&gz, gzip.BestSpeed)
			w.Write(data)
			w.Close()
			src, done, err := decompress("x_Packages.gz", &gz)
			if err != nil {
				t.Fatal(err)
			}
			defer done()
			_, err = scanList(src, relevantName)
			var tl *TooLargeError
			if !errors.As(err, &tl) || tl.Unit != (name == "unit") {
				t.Fatalf("scanList of %d MiB (%s): %v, want a TooLargeError", len(data)>>20, name, err)
			}
			if !strings.Contains(err.Error(), "MiB") {
				t.Errorf("error %q does not say the limit", err)
			}
		})
	}
}
