package nvidiarepo

import (
	"strings"
	"testing"
)

// Every row says where it comes from, and a confirmed key's file name
// (NVIDIA names key files by their short key ID) agrees with the end of
// its fingerprint: a fingerprint copied wrong, or a key file name of
// another key, fails here.
func TestTableRowsAreCitedAndConsistent(t *testing.T) {
	for _, r := range All() {
		if r.Source == "" || r.Key.Source == "" {
			t.Errorf("%s: no source", r.Name)
		}
		if !strings.HasPrefix(r.URL, "https://") || !strings.HasSuffix(r.URL, "/") {
			t.Errorf("%s: URL %q is not an https base ending in /", r.Name, r.URL)
		}
		if r.Family != "deb" && r.Family != "rpm" {
			t.Errorf("%s: family %q", r.Name, r.Family)
		}
		if r.Dir != "" {
			nvArch := map[string]string{"x86_64": "x86_64", "aarch64": "sbsa"}[r.Arch]
			if want := cudaBase + r.Dir + "/" + nvArch + "/"; r.URL != want {
				t.Errorf("%s: URL %s, want %s", r.Name, r.URL, want)
			}
			if r.Family == "deb" && r.KeyringPackage != "cuda-keyring_1.1-1_all.deb" {
				t.Errorf("%s: keyring package %q", r.Name, r.KeyringPackage)
			}
			if wantPin := r.OS == "ubuntu"; wantPin != (r.PinPriority == 600) {
				t.Errorf("%s: pin priority %d; NVIDIA pins its Ubuntu repositories at 600 and no other", r.Name, r.PinPriority)
			}
		}
		if r.Key.Fingerprint != "" {
			if err := CheckFingerprint(r.Key.Fingerprint); err != nil {
				t.Errorf("%s: %v", r.Name, err)
			}
			if id, ok := strings.CutSuffix(r.Key.File, ".pub"); ok && !strings.HasSuffix(r.Key.Fingerprint, strings.ToUpper(id)) {
				t.Errorf("%s: key file %s is not the key %s", r.Name, r.Key.File, r.Key.Fingerprint)
			}
		}
		if err := r.Usable(); (err == nil) != (r.Key.Confirmed && r.Key.Fingerprint != "") {
			t.Errorf("%s: usable %v with key %+v", r.Name, err, r.Key)
		}
	}
}

// The repositories NVIDIA publishes for the releases gpuenv supports are
// all in the table, on each architecture NVIDIA serves them on.
func TestTableCoversNVIDIAsRepositories(t *testing.T) {
	want := []string{
		"ubuntu2004/x86_64", "ubuntu2004/sbsa", "ubuntu2204/x86_64", "ubuntu2204/sbsa", "ubuntu2404/x86_64", "ubuntu2404/sbsa",
		"debian11/x86_64", "debian12/x86_64", "debian12/sbsa",
		"rhel8/x86_64", "rhel8/sbsa", "rhel9/x86_64", "rhel9/sbsa", "rhel10/x86_64", "rhel10/sbsa",
		"amzn2023/x86_64", "amzn2023/sbsa", "sles15/x86_64", "sles15/sbsa", "wsl-ubuntu/x86_64",
	}
	have := map[string]bool{}
	for _, r := range All() {
		have[strings.TrimSuffix(strings.TrimPrefix(r.URL, cudaBase), "/")] = true
	}
	for _, w := range want {
		if !have[w] {
			t.Errorf("no row for %s", w)
		}
	}
	for _, f := range []string{"deb", "rpm"} {
		for _, a := range []string{"x86_64", "aarch64"} {
			if r, ok := ContainerToolkit(f, a); !ok || r.Key.Fingerprint != "C95B321B61E88C1809C4F759DDCAE044F796ECB0" {
				t.Errorf("container toolkit %s %s: %+v %v", f, a, r, ok)
			}
		}
	}
}

func TestCUDALookup(t *testing.T) {
	tests := []struct {
		host    Host
		want    string // URL below cudaBase
		wantErr string
	}{
		{host: Host{ID: "ubuntu", VersionID: "22.04", Arch: "x86_64"}, want: "ubuntu2204/x86_64/"},
		{host: Host{ID: "ubuntu", VersionID: "24.04", Arch: "aarch64"}, want: "ubuntu2404/sbsa/"},
		{host: Host{ID: "ubuntu", VersionID: "22.04", Arch: "x86_64", WSL: true}, want: "wsl-ubuntu/x86_64/"},
		{host: Host{ID: "debian", VersionID: "12", Arch: "amd64"}, want: "debian12/x86_64/"},
		{host: Host{ID: "rocky", IDLike: []string{"rhel", "centos", "fedora"}, VersionID: "9.4", Arch: "x86_64"}, want: "rhel9/x86_64/"},
		{host: Host{ID: "almalinux", VersionID: "8.10", Arch: "aarch64"}, want: "rhel8/sbsa/"},
		{host: Host{ID: "rhel", IDLike: []string{"fedora"}, VersionID: "10.0", Arch: "x86_64"}, want: "rhel10/x86_64/"},
		{host: Host{ID: "amzn", IDLike: []string{"fedora"}, VersionID: "2023", Arch: "x86_64"}, want: "amzn2023/x86_64/"},
		{host: Host{ID: "sles", VersionID: "15.6", Arch: "aarch64"}, want: "sles15/sbsa/"},
		{host: Host{ID: "debian", VersionID: "11", Arch: "aarch64"}, wantErr: "for debian 11 on x86_64 only, not on aarch64"},
		{host: Host{ID: "ubuntu", VersionID: "22.04", Arch: "aarch64", WSL: true}, wantErr: "on x86_64 only, not on aarch64"},
		{host: Host{ID: "fedora", VersionID: "40", Arch: "x86_64"}, wantErr: "no CUDA repository for fedora 40"},
		{host: Host{ID: "ubuntu", VersionID: "22.04"}, wantErr: "architecture is unknown"},
	}
	for _, tt := range tests {
		r, err := CUDA(tt.host)
		switch {
		case tt.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%+v: %v, want an error saying %q", tt.host, err, tt.wantErr)
			}
		case err != nil:
			t.Errorf("%+v: %v", tt.host, err)
		case r.URL != cudaBase+tt.want:
			t.Errorf("%+v: %s, want %s", tt.host, r.URL, cudaBase+tt.want)
		}
	}
	// The rows gpuenv may add on its own, and those it may not.
	for _, h := range []Host{{ID: "ubuntu", VersionID: "24.04", Arch: "x86_64"}, {ID: "rhel", VersionID: "9.4", Arch: "x86_64"}} {
		if r, _ := CUDA(h); r.Usable() != nil {
			t.Errorf("%+v: %v", h, r.Usable())
		}
	}
	for _, h := range []Host{{ID: "rhel", VersionID: "10.0", Arch: "x86_64"}, {ID: "debian", VersionID: "13", Arch: "x86_64"}} {
		if r, _ := CUDA(h); r.Usable() == nil {
			t.Errorf("%+v: usable although no source confirms its key's fingerprint", h)
		}
	}
}
