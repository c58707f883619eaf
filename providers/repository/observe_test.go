package repository

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

func TestObserveApt(t *testing.T) {
	root := t.TempDir()
	hosttest.WriteFile(t, root, "/etc/apt/sources.list", "deb http://archive.ubuntu.com/ubuntu/ jammy main restricted\n# deb http://archive.ubuntu.com/ubuntu/ jammy-backports main\ndeb-src http://archive.ubuntu.com/ubuntu/ jammy main\n")
	hosttest.WriteFile(t, root, "/etc/apt/sources.list.d/cuda-ubuntu2204-x86_64.list", "deb [arch=amd64 signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/ /\n")
	hosttest.WriteFile(t, root, "/etc/apt/sources.list.d/ppa.sources", "Types: deb\nURIs: https://ppa.launchpadcontent.net/graphics-drivers/ppa/ubuntu/\nSuites: jammy\nComponents: main\nEnabled: no\n")
	hosttest.WriteFile(t, root, "/etc/apt/sources.list.d/toolkit.sources", "Types: deb\nURIs: https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH)\nSuites: /\nArchitectures: amd64\nSigned-By: /etc/apt/keyrings/a.gpg,\n /etc/apt/keyrings/b.gpg\n")
	// apt ignores what does not end in .list or .sources.
	hosttest.WriteFile(t, root, "/etc/apt/sources.list.d/old.list.save", "deb http://old.example/ jammy main\n")
	h := hosttest.New(t, root)
	got, warns := Observe(h, "deb")
	if len(warns) > 0 {
		t.Errorf("warnings: %v", warns)
	}
	want := []facts.Repository{
		{File: "/etc/apt/sources.list", URIs: []string{"http://archive.ubuntu.com/ubuntu/"}, Suites: []string{"jammy"}, Components: []string{"main", "restricted"}},
		{File: "/etc/apt/sources.list.d/cuda-ubuntu2204-x86_64.list", URIs: []string{"https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/"}, Suites: []string{"/"}, Keys: []string{"/usr/share/keyrings/cuda-archive-keyring.gpg"}, Options: []string{"arch=amd64"}},
		{File: "/etc/apt/sources.list.d/toolkit.sources", URIs: []string{"https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH)"}, Suites: []string{"/"}, Keys: []string{"/etc/apt/keyrings/a.gpg", "/etc/apt/keyrings/b.gpg"}, Options: []string{"architectures: amd64"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("repositories (-want +got):\n%s", diff)
	}

	// A file that cannot be read is a warning naming it; the rest stands.
	if err := os.Mkdir(filepath.Join(root, "etc/apt/sources.list.d/broken.list"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, warns = Observe(h, "deb")
	if len(got) != 3 || len(warns) != 1 || warns[0].Path != "/etc/apt/sources.list.d/broken.list" {
		t.Errorf("unreadable file: %v, %v", got, warns)
	}
}

func TestObserveNoSources(t *testing.T) {
	h := hosttest.New(t, t.TempDir())
	for _, family := range []string{"deb", "rpm", ""} {
		if got, warns := Observe(h, family); len(got) != 0 || len(warns) != 0 {
			t.Errorf("%q: %v, %v", family, got, warns)
		}
	}
}

func TestParseRepoFile(t *testing.T) {
	data := `# keys before any section belong to none
enabled=1
[cuda-rhel9-x86_64]
name=cuda-rhel9-x86_64
baseurl=https://developer.download.nvidia.com/compute/cuda/repos/rhel9/x86_64
enabled=1
gpgcheck=1
gpgkey=https://developer.download.nvidia.com/compute/cuda/repos/rhel9/x86_64/D42D0685.pub

[epel]
name=Extra Packages for Enterprise Linux 9
metalink=https://mirrors.fedoraproject.org/metalink?repo=epel-9&arch=$basearch

[mirrors]
baseurl = http://a.example/el9/
  http://b.example/el9/,http://c.example/el9/

[epel-source]
baseurl=http://d.example/
enabled=0
`
	got := ParseRepoFile("/etc/yum.repos.d/x.repo", []byte(data))
	f := "/etc/yum.repos.d/x.repo"
	want := []facts.Repository{
		{File: f, ID: "cuda-rhel9-x86_64", URIs: []string{"https://developer.download.nvidia.com/compute/cuda/repos/rhel9/x86_64"}, Keys: []string{"https://developer.download.nvidia.com/compute/cuda/repos/rhel9/x86_64/D42D0685.pub"}, GPGCheck: true},
		{File: f, ID: "epel", URIs: []string{"https://mirrors.fedoraproject.org/metalink?repo=epel-9&arch=$basearch"}, URIsFrom: "metalink"},
		{File: f, ID: "mirrors", URIs: []string{"http://a.example/el9/", "http://b.example/el9/", "http://c.example/el9/"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("repositories (-want +got):\n%s", diff)
	}
}
