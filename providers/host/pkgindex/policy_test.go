package pkgindex

import (
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner/facts"
)

func TestParsePreferences(t *testing.T) {
	data := `# the CUDA repository first
Package: *
Pin: release l=NVIDIA CUDA
Pin-Priority: 600

Package: nsight-compute nsight-systems
# from NVIDIA only
Pin: origin *ubuntu.com*
Pin-Priority: -1

Package: nvidia-driver
Pin: version 535.*
Pin-Priority: 1001

Package: *
Pin: origin ""
Pin-Priority: never

Package: nvidia-smi
Pin: version 1.0
Pin-Priority: never

Package: *
Pin: version 1.0
Pin-Priority: 700

Package: libcuda1
Pin: release a=stable
Pin-Priority: 0

Package: libcuda1
Pin: hash abc
Pin-Priority: 10

Pin: release a=stable
Pin-Priority: 10
`
	pins, errs := parsePreferences("/etc/apt/preferences", []byte(data))
	var got []string
	for _, p := range pins {
		kind := "named"
		if p.general() {
			kind = "general"
		}
		got = append(got, p.Package+" | "+p.Pin.Pin+" | "+kind)
	}
	want := []string{
		"* | release l=NVIDIA CUDA | general",
		"nsight-compute nsight-systems | origin *ubuntu.com* | named",
		"nvidia-driver | version 535.* | named",
		`* | origin "" | general`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("pins:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if pins[3].Priority != neverPriority || pins[0].rel.label != "NVIDIA CUDA" || pins[3].Record != 4 {
		t.Errorf("pins %+v", pins)
	}
	// never for a named package, a zero priority, a record without
	// Package: apt refuses the file for each.
	if len(errs) != 3 {
		t.Errorf("errors %v, want 3", errs)
	}
}

func TestPinNames(t *testing.T) {
	p := pin{names: []string{"nvidia-*", "libcuda1:amd64", "src:nvidia-graphics-drivers", "/^cuda-toolkit-12-[0-9]+$/"}}
	tests := []struct {
		name, src, arch string
		want            bool
	}{
		{"nvidia-driver", "x", "amd64", true},
		{"NVIDIA-smi", "x", "amd64", true}, // apt's globs ignore case
		{"libcuda1", "x", "amd64", true},
		{"libcuda1", "x", "i386", false},
		{"libnvidia-ml1", "nvidia-graphics-drivers", "amd64", true},
		{"cuda-toolkit-12-4", "x", "amd64", true},
		{"cuda-toolkit-12-4-config", "x", "amd64", false},
		{"python3-torch", "pytorch", "amd64", false},
	}
	for _, tt := range tests {
		if got := p.matchesName(tt.name, tt.src, tt.arch); got != tt.want {
			t.Errorf("matchesName(%s, %s, %s) = %v", tt.name, tt.src, tt.arch, got)
		}
	}
}

func TestReleaseMatch(t *testing.T) {
	ix := &facts.PackageIndex{Architecture: "amd64", Source: facts.IndexSource{Component: "non-free"},
		Release: &facts.ReleaseData{Origin: "Debian", Label: "Debian-Security", Suite: "stable-security", Codename: "bookworm-security", Version: "12"}}
	tests := []struct {
		spec          string
		index, status bool
	}{
		{"*", true, true},
		{"a=stable-security", true, false},
		{"n=bookworm-security,c=non-free", true, false},
		{"n=bookworm-security,c=main", false, false},
		{"o=Debian,l=Debian-Security,b=amd64", true, false},
		{"bookworm-security", true, false}, // a bare archive or codename
		{"stable-*", true, false},
		{"12", true, false}, // a leading digit: a version
		{"v=1*", true, false},
		{"v=13", false, false},
		{"a=now", false, true},
		{"now", false, true},
		{"/-security$/", true, false},
		{"x=y", false, false},
	}
	for _, tt := range tests {
		m := parseReleaseMatch(tt.spec)
		if got := m.matchIndex(ix); got != tt.index {
			t.Errorf("%q on the index: %v", tt.spec, got)
		}
		if got := m.matchStatus(); got != tt.status {
			t.Errorf("%q on the status file: %v", tt.spec, got)
		}
	}
}

func TestParseAptConf(t *testing.T) {
	tests := []struct{ conf, release, arch string }{
		{`APT::Default-Release "stable";`, "stable", ""},
		{"APT\n{\n  // nested\n  Default-Release \"bookworm-backports\";\n  Architecture \"arm64\";\n};\n", "bookworm-backports", "arm64"},
		{"/* a comment with APT::Default-Release \"x\"; */\napt::default-release \"trixie\"; # lower case\n", "trixie", ""},
		{"APT::Get::Default-Release \"nope\";\nAcquire::http::Proxy \"http://p/\";\n", "", ""},
		{"APT::Default-Release \"a\";\nAPT::Default-Release \"b\";\n", "b", ""},
	}
	for _, tt := range tests {
		var cfg aptConfig
		parseAptConf([]byte(tt.conf), &cfg)
		if cfg.defaultRelease != tt.release || cfg.architecture != tt.arch {
			t.Errorf("%q: %+v", tt.conf, cfg)
		}
	}
}

// TestCandidateRules is apt's choice among versions already given their
// priorities (newest first).
func TestCandidateRules(t *testing.T) {
	v := func(version string, prio int) facts.IndexedVersion {
		return facts.IndexedVersion{Version: version, Priority: prio, PriorityFrom: "x"}
	}
	tests := []struct {
		name      string
		versions  []facts.IndexedVersion
		installed string
		want      string
	}{
		{"the highest priority", []facts.IndexedVersion{v("3", 500), v("2", 990), v("1", 500)}, "", "2"},
		{"the newest on a tie", []facts.IndexedVersion{v("3", 500), v("2", 500)}, "", "3"},
		{"never a negative priority", []facts.IndexedVersion{v("3", -1), v("2", -10)}, "", ""},
		{"never priority 0", []facts.IndexedVersion{v("3", 0), v("2", 1)}, "", "2"},
		{"no downgrade below 1000", []facts.IndexedVersion{v("3", 100), v("2", 990)}, "3", "3"},
		{"a downgrade at 1000", []facts.IndexedVersion{v("3", 100), v("2", 1000)}, "3", "2"},
		{"1 loses to the installed version", []facts.IndexedVersion{v("3", 1), v("2", 100)}, "2", "2"},
	}
	for _, tt := range tests {
		if got, _ := candidate(tt.versions, tt.installed); got != tt.want {
			t.Errorf("%s: candidate %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestClearText(t *testing.T) {
	signed := "-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA256\n\nOrigin: Debian\n- -dashed line\nSuite: stable\n-----BEGIN PGP SIGNATURE-----\n\nabc\n-----END PGP SIGNATURE-----\n"
	got, err := clearText([]byte(signed))
	if err != nil || string(got) != "Origin: Debian\n-dashed line\nSuite: stable\n" {
		t.Errorf("clear text %q, %v", got, err)
	}
	if _, err := clearText([]byte("-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA256\n\nOrigin: x\n")); err == nil {
		t.Error("a clear-signed file cut before its signature must be an error")
	}
	rel, err := parseRelease([]byte(signed))
	if err != nil || rel.Origin != "Debian" || rel.Suite != "stable" {
		t.Errorf("release %+v, %v", rel, err)
	}
}
