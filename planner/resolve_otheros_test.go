package planner

import "testing"

func TestRepoSystem(t *testing.T) {
	cases := []struct{ url, id, version, title string }{
		{"https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/", "ubuntu", "22.04", "Ubuntu 22.04"},
		{"https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/sbsa/", "ubuntu", "24.04", "Ubuntu 24.04"},
		{"https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64", "debian", "12", "Debian 12"},
		{"https://developer.download.nvidia.com/compute/cuda/repos/rhel9/x86_64/", "rhel", "9", "RHEL 9"},
		{"https://developer.download.nvidia.com/compute/cuda/repos/rocky8/x86_64/", "rhel", "8", "RHEL 8"},
		{"https://developer.download.nvidia.com/compute/cuda/repos/amzn2023/x86_64/", "amzn", "2023", "Amazon Linux 2023"},
		{"file:///srv/mirror/cuda/repos/ubuntu2204/x86_64/", "ubuntu", "22.04", "Ubuntu 22.04"},
		{"https://nvidia.github.io/libnvidia-container/stable/deb/amd64/", "", "", ""},
		{"file:///srv/mirror/cuda", "", "", ""},
		{"http://deb.debian.org/debian", "", "", ""},
		{"https://example.com/ubuntu2204", "", "", ""},
	}
	for _, c := range cases {
		id, v, title, _, ok := repoSystem(c.url)
		if ok != (c.id != "") || id != c.id || v != c.version || title != c.title {
			t.Errorf("repoSystem(%q) = %q %q %q %v, want %q %q %q", c.url, id, v, title, ok, c.id, c.version, c.title)
		}
	}
}
