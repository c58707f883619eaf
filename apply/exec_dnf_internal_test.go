package apply

import (
	"slices"
	"testing"
)

// Output of dnf 4.14.0 (Debian 12's dnf, run against a local repository
// of test packages), LC_ALL=C, not a terminal.
const (
	dnfInstallDowngrade = `Dependencies resolved.
================================================================================
 Package                               Arch       Version           Repo   Size
================================================================================
Installing:
 gtest-very-long-package-name-libs     noarch     3:1.0-1.el9       t     6.0 k
Downgrading:
 gtest                                 noarch     1.0-1             t     5.9 k

Transaction Summary
================================================================================
Install    1 Package
Downgrade  1 Package

Total size: 12 k
Operation aborted.
`
	dnfWide = `Dependencies resolved.
=====================================================================================================
 Package                                                                 Arch    Version     Repo
                                                                                                 Size
=====================================================================================================
Installing:
 cuda-nvml-devel-12-4-with-an-extremely-long-package-name-for-wrapping   noarch  3:1.0-1.el9 t  6.1 k

Transaction Summary
=====================================================================================================
Install  1 Package

Total size: 6.1 k
Installed size: 4  
Operation aborted.
`
	dnfRemoveDependents = `Dependencies resolved.
================================================================================
 Package                               Arch       Version          Repo    Size
================================================================================
Removing:
 gtest                                 noarch     1.0-1            @t       4  
Removing dependent packages:
 gtest-very-long-package-name-libs     noarch     3:1.0-1.el9      @t       4  

Transaction Summary
================================================================================
Remove  2 Packages

Freed space: 8  
Operation aborted.
`
	// Composed in dnf's format rather than captured (the local test
	// repository has no obsoletes): an obsoleted package, a row whose
	// end is wrapped, and a skipped package, which changes nothing.
	dnfReplacing = `Dependencies resolved.
================================================================================
 Package                 Arch       Version              Repository       Size
================================================================================
Upgrading:
 nvidia-driver           x86_64     3:560.35.03-1.el9    cuda-rhel9-x86_64
                                                                          40 M
     replacing  nvidia-driver-latest.x86_64 3:550.54.15-1.el9
Skipping packages with conflicts:
(add '--best --allowerasing' to command line to force their upgrade):
 kmod-nvidia-latest-dkms x86_64     3:560.35.03-1.el9    cuda-rhel9-x86_64  1 M

Transaction Summary
================================================================================
Upgrade  1 Package
`
)

func TestDnfTable(t *testing.T) {
	for _, tc := range []struct {
		out  string
		want []string
	}{
		{dnfInstallDowngrade, []string{"gtest-very-long-package-name-libs", "gtest"}},
		{dnfWide, []string{"cuda-nvml-devel-12-4-with-an-extremely-long-package-name-for-wrapping"}},
		{dnfRemoveDependents, []string{"gtest", "gtest-very-long-package-name-libs"}},
		{dnfReplacing, []string{"nvidia-driver", "nvidia-driver-latest"}},
		{"Dependencies resolved.\nNothing to do.\nComplete!\n", nil},
	} {
		if got := dnfTable([]byte(tc.out)); !slices.Equal(got, tc.want) {
			t.Errorf("%s\ngot %q, want %q", tc.out, got, tc.want)
		}
	}
}

func TestParseRPMQueryAndLocks(t *testing.T) {
	m, err := parseRPMQuery([]byte("gtest\t0\t2.0\t1\tnoarch\t(none)\nlibnvidia-ml\t3\t550.54.15\t1.el9\tx86_64\t(none)\nlibnvidia-ml\t3\t560.35.03\t1.el9\tx86_64\t(none)\ngpg-pubkey\t0\tabc\tdef\t(none)\t(none)\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := evrs(m["libnvidia-ml"]); !slices.Equal(got, []string{"3:550.54.15-1.el9", "3:560.35.03-1.el9"}) {
		t.Errorf("libnvidia-ml: %q", got)
	}
	if m["gtest"][0].EVR != "2.0-1" || m["gtest"][0].nevra() != "gtest-0:2.0-1.noarch" {
		t.Errorf("gtest: %+v", m["gtest"])
	}
	if _, ok := m["gpg-pubkey"]; ok {
		t.Error("a signing key read as a package")
	}
	if _, err := parseRPMQuery([]byte("garbage\n")); err == nil {
		t.Error("garbage accepted")
	}
	// As dnf versionlock add writes them, and by hand.
	v := versionlocks{present: true, entries: []string{"gtest-0:2.0-1.*", "libnvidia-ml-3:550.54.15-1.el9.x86_64"}}
	if !v.locked(m["gtest"], "gtest") || !v.locked(m["libnvidia-ml"], "libnvidia-ml") {
		t.Error("locks not recognised")
	}
	if v.locked(m["libnvidia-ml"][1:], "libnvidia-ml") {
		t.Error("a lock of 550 holds 560")
	}
}

// rpmConfigQuery's output from Debian 12's rpm 4.18 for an instance with
// a config file and one without: only the config file with a SHA-256
// digest is kept.
func TestParseRPMConfigs(t *testing.T) {
	out := "cuda-libraries-12-4-0:12.4.1-1.x86_64\t8\tcn\t87428fc522803d31065e7bce3cf03fe475096631e5e07bbd7a0fde60c4cf25c7\t/etc/ld.so.conf.d/cuda-12-4.conf\n" +
		"cuda-libraries-12-4-0:12.4.1-1.x86_64\t8\t\t98ea6e4f216f2fb4b69fff9b3a44842c38686ca685f3f55dc48c5d3fb1107be4\t/usr/local/cuda-12.4/lib64/libcudart.so.12.4.1\n" +
		"nvidia-kmod-common-3:550.90.07-1.el9.noarch\t8\tc\t\t/etc/dracut.conf.d/ghost.conf\n" +
		"old-md5-0:1-1.noarch\t1\tc\t0cc175b9c0f1b6a831c399e269772661\t/etc/old.conf\n"
	got := parseRPMConfigs([]byte(out))
	want := []rpmConfig{{nevra: "cuda-libraries-12-4-0:12.4.1-1.x86_64", path: "/etc/ld.so.conf.d/cuda-12-4.conf", digest: "87428fc522803d31065e7bce3cf03fe475096631e5e07bbd7a0fde60c4cf25c7"}}
	if !slices.Equal(got, want) {
		t.Errorf("parseRPMConfigs: %+v, want %+v", got, want)
	}
	if n := (rpmPkg{Name: "cuda-libraries-12-4", Arch: "x86_64", EVR: "12.4.1-1"}).nevra(); n != want[0].nevra {
		t.Errorf("rpmPkg.nevra %q does not spell an instance as rpmConfigQuery does, %q", n, want[0].nevra)
	}
}
