package cudnn

import (
	"testing"

	"github.com/gpuenv/gpuenv/spec/version"
)

func TestBuildFits(t *testing.T) {
	for _, tc := range []struct {
		raw, cuda string
		want      bool
	}{
		{"8.9.7.29-1+cuda12.2", "12.3", true},
		{"8.9.7.29-1+cuda12.2", "12.2", true},
		{"8.9.7.29-1+cuda12.2", "12.1", false},
		{"8.9.7.29-1+cuda11.8", "12.3", false},
		{"8.9.7.29-1+cuda11.8", "11.8", true},
		{"9.1.0.70-1", "12.4", true},
		{"8.9.7.29-1+cudaX", "12.3", false},
	} {
		if got := buildFits(tc.raw, version.MustParse(tc.cuda)); got != tc.want {
			t.Errorf("buildFits(%s, CUDA %s) = %v, want %v", tc.raw, tc.cuda, got, tc.want)
		}
	}
}
