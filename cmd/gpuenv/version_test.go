package main

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/internal/jsonformat"
	"github.com/gpuenv/gpuenv/internal/release"
)

// gpuenv version prints the release (the package's version): in a test
// binary, which records no commit, the constant alone.
func TestVersionCommand(t *testing.T) {
	var out bytes.Buffer
	if code := run(context.Background(), []string{"version", "--json"}, nil, &out, &out, nil); code != exitOK {
		t.Fatalf("gpuenv version --json: exit %d\n%s", code, out.String())
	}
	var v versionInfo
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	want := versionInfo{FormatVersion: versionFormatVersion, JSONFormatVersion: jsonformat.Version, Formats: formatVersions(), Version: release.Version, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if !reflect.DeepEqual(v, want) {
		t.Errorf("version --json: %+v, want %+v", v, want)
	}
	out.Reset()
	if code := run(context.Background(), []string{"version"}, nil, &out, &out, nil); code != exitOK {
		t.Fatalf("gpuenv version: exit %d", code)
	}
	if got := out.String(); !strings.HasPrefix(got, "gpuenv "+release.Version+" (") || strings.Contains(got, "devel") {
		t.Errorf("gpuenv version: %q", got)
	}
}
