package compat

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/spec/version"
)

func variantNames(vs []PyTorchVariant) []string {
	var out []string
	for _, x := range vs {
		out = append(out, x.Release.String()+"/"+x.Variant)
	}
	return out
}

func TestTorchVariantsFor(t *testing.T) {
	for _, tc := range []struct {
		constraint string
		want       []string
	}{
		{"2.5.*", []string{"2.5/cu118", "2.5/cu121", "2.5/cu124"}},
		{"2.5.1", []string{"2.5/cu118", "2.5/cu121", "2.5/cu124"}},
		{"== 2.0.1", []string{"2.0/cu117", "2.0/cu118"}},
		{">= 2.8, < 2.10", []string{"2.8/cu126", "2.8/cu128", "2.8/cu129", "2.9/cu126", "2.9/cu128", "2.9/cu130"}},
		{"2.5.7", nil},
		{"3.*", nil},
	} {
		got := variantNames(TorchVariantsFor(version.MustParseConstraint(tc.constraint)))
		if !slices.Equal(got, tc.want) {
			t.Errorf("TorchVariantsFor(%q) = %v, want %v", tc.constraint, got, tc.want)
		}
	}
}

func TestTorchRelease(t *testing.T) {
	rel, err := TorchRelease(v("2.5.1+cu124"))
	if err != nil {
		t.Fatal(err)
	}
	if str(rel.Release) != "2.5" || rel.DefaultVariant != "cu124" || str(rel.PythonMin) != "3.9" || str(rel.PythonMax) != "3.12" || rel.IndexFlag != "--index-url" {
		t.Errorf("torch 2.5.1 = %+v", rel)
	}
	if x := rel.Variants[2]; x.Variant != "cu124" || str(x.CUDA) != "12.4" || str(x.CuDNN) != "9.1.0.70" || !x.Stable {
		t.Errorf("torch 2.5 cu124 = %+v", x)
	}
	if rel, _ := TorchRelease(v("1.13")); rel.IndexFlag != "--extra-index-url" || rel.DefaultVariant != "cu117" {
		t.Errorf("torch 1.13 = %+v", rel)
	}
	if _, err := TorchRelease(v("2.5.3")); !errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), "2.5.0, 2.5.1") {
		t.Errorf("TorchRelease(2.5.3) = %v", err)
	}
	// 0.4 predates the tables (1.0 is the first release they list).
	if _, err := TorchRelease(v("0.4")); !errors.Is(err, ErrUnknown) {
		t.Errorf("TorchRelease(0.4) = %v", err)
	}
	_, err = TorchVariant(v("2.5.1"), "cu126")
	if err == nil || !strings.Contains(err.Error(), "torch 2.5 is published for cu118, cu121, cu124, not cu126") {
		t.Errorf("TorchVariant(2.5.1, cu126) = %v", err)
	}
	x, err := TorchVariant(v("2.7.1"), "cu128")
	if err != nil || x.Stable || str(x.CuDNN) != "9.7.1.26" {
		t.Errorf("TorchVariant(2.7.1, cu128) = %+v, %v", x, err)
	}
}

func TestTorchIndexURL(t *testing.T) {
	for _, tc := range []struct{ variant, url string }{
		{"cu124", "https://download.pytorch.org/whl/cu124"},
		{"cu118", "https://download.pytorch.org/whl/cu118"},
		{"cpu", "https://download.pytorch.org/whl/cpu"},
		{"rocm6.2", "https://download.pytorch.org/whl/rocm6.2"},
		{"cu12.4", ""},
		{"../cu124", ""},
		{"", ""},
	} {
		got, err := TorchIndexURL(tc.variant)
		if got != tc.url || (err == nil) != (tc.url != "") {
			t.Errorf("TorchIndexURL(%q) = %q, %v; want %q", tc.variant, got, err, tc.url)
		}
	}
	if got := TorchVariantName(v("12.4.1")); got != "cu124" {
		t.Errorf("TorchVariantName(12.4.1) = %q", got)
	}
	if got := TorchVariantName(v("13.0")); got != "cu130" {
		t.Errorf("TorchVariantName(13.0) = %q", got)
	}
}

func TestTorchVariantSupportsCC(t *testing.T) {
	for _, tc := range []struct {
		release, variant, cc string
		ok                   bool
		how                  string
	}{
		// An RTX 5090 with a cu124 wheel: "no kernel image is available".
		{"2.5.1", "cu124", "12.0", false, "none of which runs on compute capability 12.0"},
		{"2.7.0", "cu128", "12.0", true, "sm_120"},
		{"2.7.0", "cu128", "10.3", true, "sm_100"}, // B300 runs sm_100 code
		{"2.7.0", "cu128", "6.1", false, "sm_75, sm_80"},
		{"2.7.0", "cu126", "6.1", true, "sm_60"},
		{"2.5.1", "cu124", "8.9", true, "sm_86"},
		{"2.5.1", "cu118", "3.7", true, "sm_37"},
		{"2.5.1", "cu121", "3.7", false, ""},
		{"2.9.0", "cu130", "12.1", true, "sm_120"},
		{"2.9.0", "cu130", "7.0", false, ""},
		{"2.12.0", "cu130", "13.0", true, "PTX for compute_120"},
		{"2.5.1", "cu130", "9.0", false, "not cu130"},
	} {
		ok, how := TorchVariantSupportsCC(v(tc.release), tc.variant, v(tc.cc))
		if ok != tc.ok || !strings.Contains(how, tc.how) {
			t.Errorf("TorchVariantSupportsCC(%s, %s, %s) = %v, %q; want %v, %q", tc.release, tc.variant, tc.cc, ok, how, tc.ok, tc.how)
		}
	}
}

func TestTensorFlowRelease(t *testing.T) {
	for _, tc := range []struct {
		release, cuda, cudnn, pyMax string
		andCUDA                     bool
	}{
		{"2.17.0", "12.3", "8.9", "3.12", true},
		{"2.17.1", "12.3", "8.9", "3.12", true},
		{"2.16", "12.3", "8.9", "3.12", true},
		{"2.15.0", "12.2", "8.9", "3.11", true},
		{"2.14.1", "11.8", "8.7", "3.11", true},
		{"2.13.0", "11.8", "8.6", "3.11", false},
		{"2.18.0", "12.5", "9.3", "3.12", true},
		{"2.21.0", "12.5", "9.3", "3.13", true},
	} {
		b, err := TensorFlowRelease(v(tc.release))
		if err != nil || str(b.CUDA) != tc.cuda || str(b.CuDNN) != tc.cudnn || str(b.PythonMax) != tc.pyMax || b.AndCUDA != tc.andCUDA {
			t.Errorf("TensorFlowRelease(%s) = %+v, %v", tc.release, b, err)
		}
	}
	if _, err := TensorFlowRelease(v("1.4.0")); !errors.Is(err, ErrUnknown) {
		t.Errorf("TensorFlowRelease(1.4.0) = %v", err)
	}
}

func TestJAXPlugin(t *testing.T) {
	for _, tc := range []struct {
		jax                 string
		major               uint64
		extra, local, cudnn string
		maxCuDNN            string // empty: 10
		driver, cc          string
		err                 bool
	}{
		{jax: "0.4.26", major: 12, extra: "cuda12", local: "cuda12_local", cudnn: "8.9", maxCuDNN: "9", driver: "525"},
		{jax: "0.4.28", major: 12, extra: "cuda12", local: "cuda12_local", cudnn: "8.9", maxCuDNN: "9", driver: "525"},
		{jax: "0.4.30", major: 12, extra: "cuda12", local: "cuda12_local", cudnn: "9.0", driver: "525"},
		{jax: "0.5.3", major: 12, extra: "cuda12", local: "cuda12_local", cudnn: "9.1", driver: "525"},
		{jax: "0.6.2", major: 12, extra: "cuda12", local: "cuda12-local", cudnn: "9.8", driver: "525"},
		{jax: "0.8.0", major: 13, extra: "cuda13", local: "cuda13-local", cudnn: "9.8", driver: "580", cc: "7.5"},
		{jax: "0.6.0", major: 13, err: true},
		{jax: "0.4.25", major: 12, err: true},
		{jax: "0.8.0", major: 11, err: true},
	} {
		j, err := JAXPlugin(v(tc.jax), tc.major)
		if (err != nil) != tc.err {
			t.Errorf("JAXPlugin(%s, %d) error %v", tc.jax, tc.major, err)
			continue
		}
		if err != nil {
			continue
		}
		maxCuDNN := tc.maxCuDNN
		if maxCuDNN == "" {
			maxCuDNN = "10"
		}
		if j.Extra != tc.extra || j.LocalExtra != tc.local || str(j.MinCuDNN) != tc.cudnn || str(j.MaxCuDNN) != maxCuDNN || str(j.MinDriver) != tc.driver || str(j.MinCC) != tc.cc {
			t.Errorf("JAXPlugin(%s, %d) = %+v", tc.jax, tc.major, j)
		}
		if want := "jax-cuda" + strings.TrimPrefix(tc.extra, "cuda") + "-plugin"; j.Plugin != want {
			t.Errorf("JAXPlugin(%s, %d).Plugin = %q, want %q", tc.jax, tc.major, j.Plugin, want)
		}
	}
	var majors []uint64
	for _, j := range JAXPluginsFor(v("0.8.0")) {
		majors = append(majors, j.CUDAMajor)
	}
	if !slices.Equal(majors, []uint64{12, 13}) {
		t.Errorf("JAXPluginsFor(0.8.0) majors = %v", majors)
	}
	if got := JAXPluginsFor(v("0.4.0")); len(got) != 0 {
		t.Errorf("JAXPluginsFor(0.4.0) = %+v", got)
	}
}

func TestCuDNNSupportsCUDA(t *testing.T) {
	for _, tc := range []struct {
		cudnn, cuda string
		ok          bool
		why         string
	}{
		{"9.17.1.4", "11.8", false, "has builds for CUDA 12 and 13 only, none for CUDA 11"},
		{"9.17.1.4", "12.9", true, ""},
		{"9.17", "13.0", true, ""},
		{"9.1.0.70", "11.8", true, ""},
		{"9.1.0.70", "12.4", true, ""},
		{"9.5.1.17", "13.0", false, "none for CUDA 13"},
		{"9.13.0.50", "13.0", true, ""},
		{"8.9.7.29", "12.2", true, ""},
		{"8.9.7", "12.3", true, "minor-version compatibility"},
		{"8.9", "13.0", false, "none for CUDA 13"},
		{"8.6", "11.8", true, ""},
		{"7.6.5", "10.2", true, ""},
		{"6.0.21", "8.0", false, "not in the cudnn table"},
		{"9.17", "13.2", true, "minor-version compatibility"},
	} {
		ok, why := CuDNNSupportsCUDA(v(tc.cudnn), v(tc.cuda))
		if ok != tc.ok || !strings.Contains(why, tc.why) {
			t.Errorf("CuDNNSupportsCUDA(%s, %s) = %v, %q; want %v, %q", tc.cudnn, tc.cuda, ok, why, tc.ok, tc.why)
		}
	}
	c, ok := CuDNNBuild(v("9.17.1.4"), 13)
	if !ok || str(c.MinDriver) != "580.65.06" || str(c.MinCC) != "7.5" || str(c.MaxCC) != "12.0" {
		t.Errorf("CuDNNBuild(9.17.1.4, 13) = %+v, %v", c, ok)
	}
	if c, ok := CuDNNBuild(v("9.1.0.70"), 12); !ok || str(c.MinDriver) != "525.60.13" {
		t.Errorf("CuDNNBuild(9.1.0.70, 12) = %+v, %v", c, ok)
	}
}
