package compat

import (
	"slices"
	"testing"

	"github.com/gpuenv/gpuenv/spec/version"
)

func TestToolkitHooks(t *testing.T) {
	for v, want := range map[string][]string{
		"1.12.0": nil,
		"1.14.6": {"update-ldcache"},
		"1.16.2": {"chmod", "create-symlinks", "update-ldcache"},
		"1.17.8": {"chmod", "create-symlinks", "enable-cuda-compat", "update-ldcache"},
		"1.20.0": {"chmod", "create-symlinks", "disable-device-node-modification", "enable-cuda-compat", "update-application-profile", "update-ldcache"},
		"1.20.2": {"apply-cuda-memory-limits", "chmod", "create-symlinks", "disable-device-node-modification", "enable-cuda-compat", "update-application-profile", "update-ldcache"},
	} {
		if got := ToolkitHooks(version.MustParse(v)); !slices.Equal(got, want) {
			t.Errorf("ToolkitHooks(%s) = %q, want %q", v, got, want)
		}
	}
}

func TestToolkitWrites(t *testing.T) {
	for _, tc := range []struct {
		kind, key, toolkit string
		want               bool
	}{
		{"env", "NVIDIA_CTK_LIBCUDA_DIR", "1.17.8", false},
		{"env", "NVIDIA_CTK_LIBCUDA_DIR", "1.18.0", true},
		{"mount", "/var/run/nvidia-container-devices/void", "1.20.1", false},
		{"mount", "/var/run/nvidia-container-devices/void", "1.20.2", true},
		{"mount", "/var/run/nvidia-container-devices/void", "1.21.0", true},
		// A key under another kind, or none, is not written.
		{"mount", "NVIDIA_CTK_LIBCUDA_DIR", "1.20.2", false},
		{"env", "NVIDIA_VISIBLE_DEVICES", "1.20.2", false},
	} {
		if got := ToolkitWrites(tc.kind, tc.key, version.MustParse(tc.toolkit)); got != tc.want {
			t.Errorf("ToolkitWrites(%s, %s, %s) = %v, want %v", tc.kind, tc.key, tc.toolkit, got, tc.want)
		}
	}
}

func TestToolkitForDriver(t *testing.T) {
	if _, ok := ToolkitForDriver(550); ok {
		t.Error("branch 550 is constrained")
	}
	for _, b := range []uint64{565, 570, 580} {
		f, ok := ToolkitForDriver(b)
		if !ok || f.ToolkitMin.String() != "1.17.5" || len(f.Source.Refs) == 0 {
			t.Errorf("ToolkitForDriver(%d) = %+v, %v", b, f, ok)
		}
	}
}
