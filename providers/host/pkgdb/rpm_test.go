package pkgdb

import (
	"slices"
	"testing"

	"github.com/gpuenv/gpuenv/planner/facts"
)

func TestParseRPM(t *testing.T) {
	total, pkgs, problems := ParseRPM([]byte(sampleRPM), nil)
	if total != 2 || len(pkgs) != 2 {
		t.Fatalf("total %d, packages %+v", total, pkgs)
	}
	want := facts.Package{Name: "nvidia-driver", Version: "3:550.54.15-1.el9", Architecture: "x86_64", Source: "nvidia-driver", State: "installed", Want: "install"}
	if pkgs[1] != want {
		t.Errorf("got %+v, want %+v", pkgs[1], want)
	}
	if !slices.Equal(problems, []string{`line 4: unexpected output "broken line"`}) {
		t.Errorf("problems %q", problems)
	}
}

func TestParseVersionlock(t *testing.T) {
	got := ParseVersionlock([]byte("Last metadata expiration check: 0:01:00 ago.\n# Added lock on Mon\nnvidia-driver-3:550.54.15-1.el9.*\n\n!cuda-toolkit-12-4-0:12.4.1-1.*\n  gtest  \n"))
	if !slices.Equal(got, []string{"nvidia-driver-3:550.54.15-1.el9.*", "gtest"}) {
		t.Errorf("got %q", got)
	}
}

// TestLocked is the merged rule of the two copies of the versionlock
// matcher: the observation's matched globs against the NEVRA spellings
// and the bare name but not name-version-release or name.arch; apply's
// matched those too but the bare name only exactly, not as a glob. An
// entry locks a package when it matches any of the spellings.
func TestLocked(t *testing.T) {
	p := facts.Package{Name: "nvidia-driver", Version: "3:550.54.15-1.el9", Architecture: "x86_64"}
	noEpoch := facts.Package{Name: "gtest", Version: "2.0-1", Architecture: "noarch"}
	for _, c := range []struct {
		entry string
		p     facts.Package
		want  bool
	}{
		{"nvidia-driver-3:550.54.15-1.el9.x86_64", p, true},
		{"nvidia-driver-3:550.54.15-1.el9.*", p, true},
		{"nvidia-driver-550.54.15-1.el9.x86_64", p, true},
		{"3:nvidia-driver-550.54.15-1.el9.x86_64", p, true},
		{"nvidia-driver", p, true},
		{"nvidia-driver-550.54.15-1.el9", p, true}, // the observation missed it
		{"nvidia-driver.x86_64", p, true},          // the observation missed it
		{"nvidia-dri*", p, true},                   // apply missed it
		{"nvidia-driver-3:560.35.03-1.el9.*", p, false},
		{"nvidia-driver-cuda", p, false},
		{"[", p, false},
		{"gtest-0:2.0-1.*", noEpoch, true},
		{"gtest-2.0-1", noEpoch, true},
	} {
		if got := Locked([]string{c.entry}, c.p); got != c.want {
			t.Errorf("Locked(%q, %s %s) = %v, want %v", c.entry, c.p.Name, c.p.Version, got, c.want)
		}
	}
	if !LocksName([]string{"nvidia-driver-3:560.35.03-1.el9.x86_64"}, "nvidia-driver") || LocksName([]string{"nvidia-driver-cuda-3:1-1.x86_64"}, "nvidia-driver") {
		t.Error("LocksName")
	}
}

func TestCompare(t *testing.T) {
	for _, c := range []struct {
		manager, a, b string
		want          int
	}{
		{"apt", "535.309.01-0+deb12u1", "535.309.01-1", -1},
		{"dpkg", "1.0~rc1-1", "1.0-1", -1},
		{"dnf", "3:550.54.15-1.el9", "560.35.03-1.el9", 1},
		{"rpm", "1.0~rc1-1", "1.0-1", -1},
		{"pip", "2.5.1+cu124", "2.5.1", 1},
		{"pip", "2.0.0rc1", "2.0.0", -1},
		{"apt", "not a version", "1.0", 1}, // as text
	} {
		if got := Compare(c.manager, c.a, c.b); got != c.want {
			t.Errorf("Compare(%s, %q, %q) = %d, want %d", c.manager, c.a, c.b, got, c.want)
		}
	}
	for _, c := range []struct{ manager, in, want string }{
		{"apt", "535.309.01-0+deb12u1", "535.309.01"},
		{"apt", "11.8.89~11.8.0-5~deb12u1", "11.8.89"},
		{"dnf", "3:550.54.15-1.el9", "550.54.15"},
	} {
		if got, err := UpstreamVersion(c.manager, c.in); err != nil || got.String() != c.want {
			t.Errorf("UpstreamVersion(%s, %q) = %v, %v, want %s", c.manager, c.in, got, err, c.want)
		}
	}
}
