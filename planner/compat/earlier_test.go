package compat

import (
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/spec/version"
)

// The newest PyTorch wheel that carries code for a compute capability is
// what a fix for an old GPU names.
func TestNewestTorchForOldGPUs(t *testing.T) {
	newest := func(cc string) string {
		var out string
		for _, r := range TorchReleases() {
			for _, pv := range r.Variants {
				if ok, _ := TorchVariantSupportsCC(r.Release, pv.Variant, v(cc)); ok {
					out = r.Release.String() + " " + pv.Variant
				}
			}
		}
		return out
	}
	for _, tc := range []struct{ cc, want string }{
		{"3.0", ""},            // no wheel ever carried sm_30
		{"3.5", "1.2 cu100"},   // 1.3.1 moved the wheels from sm_35 to sm_37
		{"3.7", "2.7 cu118"},   // CUDA 12 builds never carried Kepler
		{"5.2", "2.13 cu126"},  // Maxwell: only the CUDA 12.6 builds
		{"12.0", "2.13 cu132"}, // Blackwell: CUDA 12.8 and newer builds
		{"8.6", "2.13 cu132"},  // current
		{"6.1", "2.13 cu126"},  // Pascal through sm_60 machine code
		{"3.2", ""},            // Tegra K1, never a wheel target
		{"10.3", "2.13 cu132"}, // sm_100 code runs on 10.3
		{"7.0", "2.13 cu126"},  // Volta left the CUDA 13 builds
		{"9.0", "2.13 cu132"},  // Hopper
		{"8.9", "2.13 cu132"},  // Ada through sm_86
		{"7.5", "2.13 cu132"},  // Turing stays in CUDA 13
		{"5.0", "2.13 cu126"},  // Maxwell
		{"6.0", "2.13 cu126"},  // Pascal P100
		{"3.7", "2.7 cu118"},   // asked twice: the answer does not depend on order
		{"12.1", "2.13 cu132"}, // GB10 runs sm_120 code
		{"10.0", "2.13 cu132"}, // B200
		{"8.0", "2.13 cu132"},  // A100
		{"8.7", "2.13 cu132"},  // Orin through sm_86
		{"7.2", "2.13 cu126"},  // Xavier through sm_70
		{"5.3", "2.13 cu126"},  // Nano through sm_50
		{"6.2", "2.13 cu126"},  // TX2 through sm_60
		{"3.5", "1.2 cu100"},   // and the K40 again
		{"2.1", ""},            // Fermi
	} {
		if got := newest(tc.cc); got != tc.want {
			t.Errorf("newest torch for %s = %q, want %q", tc.cc, got, tc.want)
		}
	}
}

// PTX that a build carries is compiled for a newer GPU only when the
// build's CUDA targets that GPU: torch 1.0's compute_50 PTX, from CUDA 9.0,
// does not make it run on Blackwell.
func TestPTXNeedsCUDAThatKnowsTheGPU(t *testing.T) {
	if ok, _ := TorchVariantSupportsCC(v("1.0"), "cu90", v("12.0")); ok {
		t.Error("torch 1.0 cu90 runs on compute capability 12.0")
	}
	sm50 := []version.Version{v("5.0")}
	if ok, how := ccCovered(sm50, sm50, v("10.0"), v("7.5")); !ok || !strings.Contains(how, "PTX for compute_50") {
		t.Errorf("compute_50 PTX from CUDA 10.0 on 7.5 = %v, %q", ok, how)
	}
	if ok, _ := ccCovered(sm50, sm50, v("9.0"), v("7.5")); ok {
		t.Error("compute_50 PTX from CUDA 9.0 runs on 7.5, which CUDA 9.0 predates")
	}
	for _, tc := range []struct {
		cuda, cc string
		ok       bool
		why      string
	}{
		{"12.4", "3.5", false, "CUDA 11.8 was the last"},
		{"11.8", "3.7", true, ""},
		{"11.0", "3.0", false, "CUDA 10.2 was the last"},
		{"13.0", "7.0", false, "CUDA 12.9 was the last"},
		{"13.0", "7.5", true, ""},
		{"12.6", "12.0", false, "first built for by CUDA 12.8"},
		{"12.8", "12.0", true, ""},
		// clang accepts sm_72 from CUDA 9.1 (llvm-cuda-min), not 10.0.
		{"9.0", "7.2", false, "first built for by CUDA 9.1"},
		{"9.1", "7.2", true, ""},
	} {
		ok, why := CUDATargets(v(tc.cuda), v(tc.cc))
		if ok != tc.ok || !strings.Contains(why, tc.why) {
			t.Errorf("CUDATargets(%s, %s) = %v, %q; want %v, %q", tc.cuda, tc.cc, ok, why, tc.ok, tc.why)
		}
	}
}

func TestOldReleasesUseFindLinks(t *testing.T) {
	for _, tc := range []struct{ rel, flag string }{
		{"1.0", FindLinks}, {"1.10", FindLinks}, {"1.11", "--extra-index-url"}, {"1.12", "--extra-index-url"},
	} {
		r, err := TorchRelease(v(tc.rel))
		if err != nil || r.IndexFlag != tc.flag {
			t.Errorf("torch %s: %q, %v; want %s", tc.rel, r.IndexFlag, err, tc.flag)
		}
	}
}
