package planner

import (
	"testing"

	"github.com/gpuenv/gpuenv/spec/version"
)

// A toolkit package's release is what a spec's CUDA version names:
// Debian's after the tilde, NVIDIA's as its upstream version.
func TestToolkitRelease(t *testing.T) {
	for raw, want := range map[string]string{
		"11.8.89~11.8.0-5~deb12u1":   "11.8.0",
		"1:11.8.89~11.8.0-5~deb12u1": "11.8.0",
		"12.4.1-1":                   "12.4.1",
		"12.0.146~12.0.1-4":          "12.0.1",
	} {
		up, err := version.FromDebian(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := toolkitRelease(raw, up); got.String() != want {
			t.Errorf("toolkitRelease(%q) = %s, want %s", raw, got, want)
		}
	}
}
