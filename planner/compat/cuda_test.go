package compat

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/spec/version"
)

var v = version.MustParse

// str prints a possibly zero Version for comparisons.
func str(x version.Version) string { return x.String() }

func TestMinDriverForCUDA(t *testing.T) {
	for _, tc := range []struct {
		cuda, exact, minor, row string
		err                     error
	}{
		{cuda: "12.4", exact: "550.54.14", minor: "525.60.13", row: "12.4.0"},
		{cuda: "12.4.1", exact: "550.54.15", minor: "525.60.13", row: "12.4.1"},
		{cuda: "12.4.1+local", exact: "550.54.15", minor: "525.60.13", row: "12.4.1"},
		{cuda: "11.0", exact: "450.51.05", minor: "450.80.02", row: "11.0.2"},
		{cuda: "11.8", exact: "520.61.05", minor: "450.80.02", row: "11.8.0"},
		{cuda: "10.2", exact: "440.33", minor: "", row: "10.2.89"},
		{cuda: "12.8", exact: "570.26", minor: "525.60.13", row: "12.8.0"},
		{cuda: "13.0.2", exact: "580.95.05", minor: "580", row: "13.0.2"},
		{cuda: "13.2", exact: "595.45.04", minor: "580", row: "13.2.0"},
		// 13.3 exists but its driver row was not read.
		{cuda: "13.3", exact: "", minor: "580", row: "13.3.0"},
		{cuda: "12.7", err: ErrNotReleased},
		{cuda: "12.4.9", minor: "525.60.13", err: ErrUnknown},
		{cuda: "13.9", minor: "580", err: ErrUnknown},
		{cuda: "14.0", err: ErrUnknown},
	} {
		exact, minor, row, err := MinDriverForCUDA(v(tc.cuda))
		if tc.err != nil && !errors.Is(err, tc.err) || tc.err == nil && err != nil {
			t.Errorf("CUDA %s: error %v, want %v", tc.cuda, err, tc.err)
		}
		if str(exact) != tc.exact || str(minor) != tc.minor || str(row.Version) != tc.row {
			t.Errorf("CUDA %s = exact %q, minor %q, row %q; want %q, %q, %q", tc.cuda, exact, minor, row.Version, tc.exact, tc.minor, tc.row)
		}
	}
	if _, _, _, err := MinDriverForCUDA(v("12")); err == nil {
		t.Error("CUDA 12 named a release")
	}
	_, err := LookupCUDA(v("12.7"))
	if err == nil || !strings.Contains(err.Error(), "12.6 was followed by 12.8") {
		t.Errorf("LookupCUDA(12.7) = %v, want the note on 12.7", err)
	}
	_, err = LookupCUDA(v("12.4.9"))
	if err == nil || !strings.Contains(err.Error(), "known: 12.4.0, 12.4.1") {
		t.Errorf("LookupCUDA(12.4.9) = %v, want the known releases", err)
	}
}

func TestMaxCUDAForDriver(t *testing.T) {
	for _, tc := range []struct{ driver, cuda string }{
		{"535.261.03", "12.2"},
		{"535.309.01", "12.2"},
		{"550.54.14", "12.4"},
		{"550.163.01", "12.4"},
		{"560.35.03", "12.6"},
		{"565.57.01", "12.7"}, // no toolkit 12.7, but the driver reports it
		{"570.124.06", "12.8"},
		{"575.57.08", "12.9"},
		{"580.105.08", "13.0"},
		{"590.48.01", "13.1"},
		{"450.36.06", "11.0"},
		{"470.82.01", "11.4"},
		{"440.33", "10.2"},
		{"535", "12.2"},
		// Branches between listed ones, or newer than all, get the
		// nearest lower branch's CUDA: a safe lower bound.
		{"610.57.04", "13.2"},
		{"418.87.01", "10.1"},
		{"375.26", ""},
	} {
		if got := MaxCUDAForDriver(v(tc.driver)); str(got) != tc.cuda {
			t.Errorf("MaxCUDAForDriver(%s) = %q, want %q", tc.driver, got, tc.cuda)
		}
	}
}

func TestDriverSupportsCUDA(t *testing.T) {
	for _, tc := range []struct {
		driver, cuda string
		ok           bool
		how          string
	}{
		{"550.54.14", "12.4", true, HowExact},
		{"550.54.14", "12.4.1", true, HowMinorCompat}, // 12.4.1 shipped 550.54.15
		{"550.54.15", "12.4.1", true, HowExact},
		{"535.261.03", "12.4", true, HowMinorCompat},
		{"535.261.03", "12.2.2", true, HowExact},
		{"535.261.03", "12.8", true, HowMinorCompat},
		{"525.60.13", "12.9", true, HowMinorCompat},
		{"525.60.12", "12.0", false, "minor-version compatibility for CUDA 12.x needs 525.60.13"},
		{"535.261.03", "13.0", false, "CUDA 13.0.0 (GA) needs 580.65.06"},
		{"580.65.06", "12.9.1", true, HowExact},
		{"580.65.06", "13.0", true, HowExact},
		{"580.65.06", "13.1", true, HowMinorCompat},
		{"580.10.01", "13.3", true, HowMinorCompat},
		{"450.80.02", "11.8", true, HowMinorCompat},
		{"450.51.05", "11.1", false, "needs 455.23"},
		{"440.33", "10.2", true, HowExact},
		{"418.87.01", "10.2", false, "CUDA 10.x has no minor-version compatibility"},
		{"600.1", "12.7", false, "never released"},
		{"600.1", "14.0", false, "not in the compatibility tables"},
	} {
		ok, how := DriverSupportsCUDA(v(tc.driver), v(tc.cuda))
		if ok != tc.ok || !strings.Contains(how, tc.how) {
			t.Errorf("DriverSupportsCUDA(%s, %s) = %v, %q; want %v, %q", tc.driver, tc.cuda, ok, how, tc.ok, tc.how)
		}
	}
}

func TestBranchOf(t *testing.T) {
	b, ok := BranchOf(v("580.65.06"))
	if !ok || b.Branch != 580 || !b.OpenModules || b.DefaultFlavor != FlavorOpen || !strings.Contains(b.Datacenter, "LTSB") {
		t.Errorf("BranchOf(580.65.06) = %+v, %v", b, ok)
	}
	b, ok = BranchOf(v("550.54.15"))
	if !ok || b.DefaultFlavor != FlavorProprietary {
		t.Errorf("R550 default flavour = %q, want proprietary (open is default from R560)", b.DefaultFlavor)
	}
	if b, ok := BranchOf(v("510.47.03")); !ok || b.OpenModules {
		t.Errorf("R510 ships open modules: %+v", b)
	}
}
