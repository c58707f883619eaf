package release

import (
	"runtime/debug"
	"strings"
	"testing"

	"github.com/Masterminds/semver/v3"
)

func TestFromBuildInfo(t *testing.T) {
	const rev = "0123456789abcdef0123456789abcdef01234567"
	for _, tt := range []struct {
		name string
		bi   *debug.BuildInfo
		want Build
	}{
		{"no build info", nil, Build{Version: Version}},
		{"go test or go run: no VCS", &debug.BuildInfo{}, Build{Version: Version}},
		{"clean tree", &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "false"}}}, Build{Version + "+g0123456789ab", rev}},
		{"uncommitted changes", &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.modified", Value: "true"}, {Key: "vcs.revision", Value: rev}}}, Build{Version + "+g0123456789ab.dirty", rev}},
		{"short revision kept whole", &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}}}, Build{Version + "+gabc123", "abc123"}},
	} {
		if got := FromBuildInfo(tt.bi); got != tt.want {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

// What deploy/package stamps reads back as the toolchain's own record
// would: a package built either way has the version its binary prints.
func TestStampedEqualsRecorded(t *testing.T) {
	const rev = "fedcba9876543210fedcba9876543210fedcba98"
	defer func(r, m string) { revision, modified = r, m }(revision, modified)
	for _, dirty := range []bool{false, true} {
		revision, modified = rev, ""
		if dirty {
			modified = "true"
		}
		bi := &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: map[bool]string{true: "true", false: "false"}[dirty]}}}
		if got, want := Current(), FromBuildInfo(bi); got != want {
			t.Errorf("dirty=%v: stamped %+v, recorded %+v", dirty, got, want)
		}
		flags := LinkerFlags(rev, dirty)
		if !strings.Contains(flags, "internal/release.revision="+rev) || strings.Contains(flags, "modified=true") != dirty {
			t.Errorf("dirty=%v: linker flags %q", dirty, flags)
		}
	}
}

// Debian and RPM versions must start with a digit, and nfpm splits a
// semantic version into the parts each format orders by: a version that
// is not one would be packaged under another name than gpuenv prints.
func TestVersionIsSemantic(t *testing.T) {
	for _, v := range []string{Version, WithCommit("0123456789abcdef", true)} {
		sv, err := semver.StrictNewVersion(v)
		if err != nil {
			t.Fatalf("%q: %v", v, err)
		}
		if v[0] < '0' || v[0] > '9' || sv.Original() != v || sv.Prerelease() != "" {
			t.Errorf("%q is not a plain release with build metadata", v)
		}
	}
	if strings.ContainsAny(Version, "+-~") {
		t.Errorf("Version %q carries more than major.minor.patch", Version)
	}
}
