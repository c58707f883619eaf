package pkgdb

import (
	"os"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// aptPolicy is apt-cache policy's output on a Debian 12 machine with
// bookworm, bookworm-updates and bookworm-security (main, contrib,
// non-free) configured: nvidia-driver, libnvidia-ml1 and the toolkit, the open module only in
// contrib, a virtual package, a name apt does not know (it prints
// nothing for it) and an installed package whose installed version no
// archive has any more.
var aptPolicy = func() string {
	data, err := os.ReadFile("testdata/apt-cache-policy")
	if err != nil {
		panic(err)
	}
	return string(data)
}()

func TestParseAptPolicy(t *testing.T) {
	pols, err := ParseAptPolicy([]byte(aptPolicy))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pols {
		names = append(names, p.Name)
	}
	if want := []string{"nvidia-driver", "libnvidia-ml1", "nvidia-cuda-toolkit", "nvidia-open-kernel-dkms", "mail-transport-agent", "bash"}; !slices.Equal(names, want) {
		t.Fatalf("packages %v, want %v", names, want)
	}
	driver := pols[0]
	want := AptPolicy{
		Name:      "nvidia-driver",
		Candidate: "535.309.01-0+deb12u1",
		Versions: []AptVersion{
			{Version: "535.309.01-0+deb12u1", Priority: 500, Sources: []AptSource{{500, "http://deb.debian.org/debian-security bookworm-security/non-free amd64 Packages"}}},
			{Version: "535.261.03-1", Priority: 500, Sources: []AptSource{{500, "http://deb.debian.org/debian bookworm/non-free amd64 Packages"}}},
		},
	}
	if diff := cmp.Diff(want, driver); diff != "" {
		t.Errorf("nvidia-driver (-want +got):\n%s", diff)
	}
	if got := driver.Installable(); !slices.Equal(got, []string{"535.309.01-0+deb12u1", "535.261.03-1"}) {
		t.Errorf("installable %v", got)
	}
	if got := pols[3].Versions[0].Suites(); !slices.Equal(got, []string{"bookworm/contrib"}) {
		t.Errorf("open module suites %v", got)
	}
	if v := pols[4]; v.Candidate != "" || len(v.Versions) != 0 {
		t.Errorf("virtual package %+v", v)
	}
	bash := pols[5]
	if bash.Installed != "5.2.15-2+b8" || !bash.Versions[1].Installed || bash.Versions[1].Archive() {
		t.Errorf("bash %+v", bash)
	}
	if got := bash.Installable(); !slices.Equal(got, []string{"5.2.15-2+b13"}) {
		t.Errorf("a version only the package database has is not installable: %v", got)
	}
}

func TestParseAptPolicyRejects(t *testing.T) {
	for _, in := range []string{"  Installed: (none)\n", "nvidia-driver:\n  Version table:\n     535.309.01-0+deb12u1 high\n"} {
		if _, err := ParseAptPolicy([]byte(in)); err == nil {
			t.Errorf("ParseAptPolicy(%q) succeeded", in)
		}
	}
}
