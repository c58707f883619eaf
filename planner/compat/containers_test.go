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
	} {
		if got := ToolkitHooks(version.MustParse(v)); !slices.Equal(got, want) {
			t.Errorf("ToolkitHooks(%s) = %q, want %q", v, got, want)
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
