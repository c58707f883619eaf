package compat

import (
	"slices"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/spec/version"
)

func TestGPUByPCIID(t *testing.T) {
	for _, tc := range []struct {
		id         uint16
		model      string
		arch, cc   string
		openNeeded bool
		minDriver  string
	}{
		{0x2901, "B200", "blackwell", "10.0", true, "570"},
		{0x3182, "B300", "blackwell", "10.3", true, "580"},
		{0x2B85, "GeForce RTX 5090", "blackwell", "12.0", true, "570"},
		{0x2342, "GH200", "hopper", "9.0", true, "545.29.03"},
		{0x2330, "H100 SXM5 80GB HBM3", "hopper", "9.0", false, "525"},
		{0x20B0, "A100 SXM4 40GB", "ampere", "8.0", false, "450.36.06"},
		{0x1EB8, "Tesla T4", "turing", "7.5", false, "410"},
		{0x1DB6, "Tesla V100 PCIe 32GB", "volta", "7.0", false, "384"},
		{0x27B8, "L4", "ada", "8.9", false, "525"},
	} {
		g, ok := GPUByPCIID(tc.id)
		if !ok {
			t.Errorf("GPUByPCIID(%#04x) found nothing", tc.id)
			continue
		}
		if g.Model != tc.model || g.Arch != tc.arch || str(g.CC) != tc.cc || g.OpenRequired != tc.openNeeded || str(g.MinDriver) != tc.minDriver {
			t.Errorf("GPUByPCIID(%#04x) = %+v", tc.id, g)
		}
	}
	if g, ok := GPUByPCIID(0x0001); ok {
		t.Errorf("GPUByPCIID(0x0001) = %+v", g)
	}
	g, _ := GPUByPCIID(0x2901)
	if got := g.Source.String(); !strings.HasPrefix(got, "gpus row 0x2901 (open-gpu-readme") {
		t.Errorf("B200 source = %q", got)
	}
}

func TestArch(t *testing.T) {
	a, ok := Arch("Blackwell")
	if !ok || a.Open != OpenRequired || a.FirstBranch != 570 || a.LastBranch != 0 {
		t.Errorf("Arch(Blackwell) = %+v, %v", a, ok)
	}
	for _, tc := range []struct{ cc, arch string }{
		{"8.9", "ada"}, {"8.6", "ampere"}, {"7.5", "turing"}, {"12.0", "blackwell"},
		{"12.1", "blackwell"}, // unlisted, but 12.x is Blackwell only
		{"3.7", "kepler"}, {"6.1", "pascal"},
		{"11.0", ""}, {"1.0", ""},
	} {
		a, ok := ArchForCC(v(tc.cc))
		if a.Name != tc.arch || ok != (tc.arch != "") {
			t.Errorf("ArchForCC(%s) = %q, %v; want %q", tc.cc, a.Name, ok, tc.arch)
		}
	}
}

func TestKernelFlavors(t *testing.T) {
	for _, tc := range []struct {
		arch, driver string
		allowed      []Flavor
		def          Flavor
	}{
		{"blackwell", "580.65.06", []Flavor{FlavorOpen}, FlavorOpen},
		{"blackwell", "570", []Flavor{FlavorOpen}, FlavorOpen},
		{"blackwell", "550.54.15", nil, ""}, // R550 predates Blackwell
		{"hopper", "535.261.03", []Flavor{FlavorOpen, FlavorProprietary}, FlavorProprietary},
		{"hopper", "560.28.03", []Flavor{FlavorOpen, FlavorProprietary}, FlavorOpen},
		{"ampere", "", []Flavor{FlavorOpen, FlavorProprietary}, FlavorOpen},     // newest branch
		{"turing", "510.47.03", []Flavor{FlavorProprietary}, FlavorProprietary}, // open modules came with R515
		{"turing", "515", []Flavor{FlavorOpen, FlavorProprietary}, FlavorProprietary},
		{"volta", "580.95.05", []Flavor{FlavorProprietary}, FlavorProprietary},
		{"volta", "590.44.01", nil, ""}, // R580 was the last for Volta
		{"pascal", "", nil, ""},
		{"kepler", "470.82.01", []Flavor{FlavorProprietary}, FlavorProprietary},
		{"kepler", "535", nil, ""},
		{"unknown", "580", nil, ""},
	} {
		var d version.Version
		if tc.driver != "" {
			d = v(tc.driver)
		}
		allowed, def := KernelFlavors(tc.arch, d)
		if !slices.Equal(allowed, tc.allowed) || def != tc.def {
			t.Errorf("KernelFlavors(%s, %q) = %v, %q; want %v, %q", tc.arch, tc.driver, allowed, def, tc.allowed, tc.def)
		}
	}
}

func TestBranchSupportsArch(t *testing.T) {
	for _, tc := range []struct {
		driver, arch string
		ok           bool
		why          string
	}{
		{"580.95.05", "pascal", true, ""},
		{"590.44.01", "pascal", false, "R590 is newer than R580, the last branch that supports Pascal GPUs"},
		{"535.261.03", "kepler", false, "R535 is newer than R470"},
		{"560.28.03", "blackwell", false, "R560 is older than R570, the first branch that supports Blackwell GPUs"},
		{"570.133.20", "blackwell", true, ""},
		{"595.45.04", "turing", true, ""},
		{"580", "fermi", false, "R390"},
		{"580", "maxwell9", false, "unknown GPU architecture"},
	} {
		ok, why := BranchSupportsArch(v(tc.driver), tc.arch)
		if ok != tc.ok || !strings.Contains(why, tc.why) {
			t.Errorf("BranchSupportsArch(%s, %s) = %v, %q; want %v, %q", tc.driver, tc.arch, ok, why, tc.ok, tc.why)
		}
	}
}

func gpu(t *testing.T, id uint16) GPU {
	t.Helper()
	g, ok := GPUByPCIID(id)
	if !ok {
		t.Fatalf("no GPU %#04x", id)
	}
	return g
}

func TestGPUKernelFlavors(t *testing.T) {
	v100, a100, h100, gh200, b200 := gpu(t, 0x1DB4), gpu(t, 0x20B0), gpu(t, 0x2330), gpu(t, 0x2342), gpu(t, 0x2901)
	for _, tc := range []struct {
		name    string
		gpus    []GPU
		driver  string
		allowed []Flavor
		def     Flavor
		reason  string
	}{
		{"A100 on R580", []GPU{a100}, "580.95.05", []Flavor{FlavorOpen, FlavorProprietary}, FlavorOpen, ""},
		{"V100 and A100", []GPU{v100, a100}, "550.54.15", []Flavor{FlavorProprietary}, FlavorProprietary, ""},
		{"GH200 needs open on R550", []GPU{h100, gh200}, "550.54.15", []Flavor{FlavorOpen}, FlavorOpen, ""},
		{"V100 and B200", []GPU{v100, b200}, "580.95.05", nil, "", "B200 needs the open kernel modules and Tesla V100 PCIe 16GB the proprietary ones"},
		{"V100 on R590", []GPU{v100}, "590.44.01", nil, "", "Tesla V100 PCIe 16GB: R590 is newer than R580"},
		{"B200 on R560", []GPU{b200}, "560.35.03", nil, "", "B200: R560 is older than R570"},
		{"no GPU", nil, "580", []Flavor{FlavorOpen, FlavorProprietary}, FlavorOpen, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			allowed, def, reason := GPUKernelFlavors(tc.gpus, v(tc.driver))
			if !slices.Equal(allowed, tc.allowed) || def != tc.def || !strings.Contains(reason, tc.reason) || (tc.reason == "") != (reason == "") {
				t.Errorf("GPUKernelFlavors = %v, %q, %q; want %v, %q, %q", allowed, def, reason, tc.allowed, tc.def, tc.reason)
			}
		})
	}
}

func TestGPUSupportedBy(t *testing.T) {
	for _, tc := range []struct {
		id     uint16
		driver string
		ok     bool
	}{
		{0x2901, "570.133.20", true},
		{0x2901, "570", true},
		{0x2901, "560.35.03", false},
		{0x20B0, "450.36.06", true},
		{0x20B0, "440.33", false},
		{0x2BB1, "570.86.16", false}, // RTX PRO 6000 first listed in 570.133.07
		{0x2BB1, "570", true},        // a bare branch may be any of its releases
		{0x1EB8, "590.48.01", true},
		{0x1DB1, "590.48.01", false},
	} {
		g := gpu(t, tc.id)
		if ok, why := GPUSupportedBy(g, v(tc.driver)); ok != tc.ok || ok != (why == "") {
			t.Errorf("GPUSupportedBy(%s, %s) = %v, %q; want %v", g.Model, tc.driver, ok, why, tc.ok)
		}
	}
}
