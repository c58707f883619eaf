package compat

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gpuenv/gpuenv/spec/version"
)

// CUDARelease is one CUDA toolkit release and the driver it shipped with.
type CUDARelease struct {
	Version version.Version // "12.4.1"
	Release string          // "GA", "Update 1", "RC"
	// Driver is the minimum Linux driver of this exact release (release
	// notes Table 3); zero where the table was not read.
	Driver version.Version
	Notes  string
	Source Source
}

// CUDAFamily holds what applies to a whole CUDA major version.
type CUDAFamily struct {
	Major uint64
	// MinorCompatMin is the driver from which applications built with any
	// toolkit of this major run through minor-version compatibility; zero
	// for CUDA 10, which has none.
	MinorCompatMin version.Version
	// WindowEndBranch is the branch where NVIDIA's stated minor-version
	// compatibility window for this major ends (0: open-ended). Newer
	// drivers still run the family by ordinary backward compatibility.
	WindowEndBranch uint64
	// Skipped lists minor versions that were never released ("12.7").
	Skipped []version.Version
	Notes   string
	Source  Source
}

// DriverBranch is one Linux driver branch (R535, R580, …).
type DriverBranch struct {
	Branch uint64
	// CUDA is the CUDA version the branch's drivers report (nvidia-smi's
	// "CUDA Version"): the newest CUDA they run without compatibility
	// packages.
	CUDA          version.Version
	OpenModules   bool   // ships the open kernel modules
	DefaultFlavor Flavor // what an install without a choice gets
	Datacenter    string // data-center support status, e.g. "LTSB, EOL June 2026"
	Notes         string
	Source        Source
}

// ErrNotReleased is wrapped by lookups of a CUDA minor version that was
// never released, such as 12.7.
var ErrNotReleased = errors.New("never released")

// How a driver runs a CUDA version, as DriverSupportsCUDA reports it.
const (
	HowExact       = "exact"
	HowMinorCompat = "minor-version compatibility"
)

type cudaFamilies struct {
	rows    []CUDAFamily
	byMajor map[uint64]int
}

var cudaFamiliesTable = loaded(loadCUDAFamilies)

func loadCUDAFamilies() (cudaFamilies, error) {
	refs, err := sourcesTable()
	if err != nil {
		return cudaFamilies{}, err
	}
	recs, err := readTable("cuda_families.tsv", "major", "minor_compat_min", "window_end_branch", "skipped", "notes", "source", "unverified")
	if err != nil {
		return cudaFamilies{}, err
	}
	var d decoder
	t := cudaFamilies{byMajor: make(map[uint64]int, len(recs))}
	for _, r := range recs {
		f := CUDAFamily{
			Major:           d.uint(r, "major"),
			MinorCompatMin:  d.version(r, "minor_compat_min"),
			WindowEndBranch: d.uint(r, "window_end_branch"),
			Skipped:         d.versions(r, "skipped"),
			Notes:           d.str(r, "notes"),
		}
		f.Source = d.source(r, "cuda_families", r.get("major"), refs)
		if _, dup := t.byMajor[f.Major]; dup {
			d.fail(r, "major", "duplicate major %d", f.Major)
		}
		if n := len(t.rows); n > 0 && t.rows[n-1].Major >= f.Major {
			d.fail(r, "major", "rows must be sorted by major")
		}
		t.byMajor[f.Major] = len(t.rows)
		t.rows = append(t.rows, f)
	}
	return t, d.err
}

type cudaReleases struct {
	rows []CUDARelease
	// byMinor indexes rows by major.minor, in version order.
	byMinor map[[2]uint64][]int
}

var cudaReleasesTable = loaded(loadCUDAReleases)

func loadCUDAReleases() (cudaReleases, error) {
	refs, err := sourcesTable()
	if err != nil {
		return cudaReleases{}, err
	}
	recs, err := readTable("cuda_releases.tsv", "version", "release", "driver", "notes", "source", "unverified")
	if err != nil {
		return cudaReleases{}, err
	}
	var d decoder
	t := cudaReleases{rows: make([]CUDARelease, 0, len(recs)), byMinor: map[[2]uint64][]int{}}
	for _, r := range recs {
		c := CUDARelease{
			Version: d.requiredVersion(r, "version"),
			Release: d.required(r, "release"),
			Driver:  d.version(r, "driver"),
			Notes:   d.str(r, "notes"),
		}
		c.Source = d.source(r, "cuda_releases", r.get("version"), refs)
		if nparts(c.Version) != 3 {
			d.fail(r, "version", "%q must have three parts", c.Version)
		}
		if n := len(t.rows); n > 0 && t.rows[n-1].Version.Compare(c.Version) >= 0 {
			d.fail(r, "version", "rows must be sorted by version without duplicates")
		}
		k := [2]uint64{c.Version.Major(), c.Version.Minor()}
		t.byMinor[k] = append(t.byMinor[k], len(t.rows))
		t.rows = append(t.rows, c)
	}
	return t, d.err
}

type branches struct {
	rows []DriverBranch
}

var branchesTable = loaded(loadBranches)

func loadBranches() (branches, error) {
	refs, err := sourcesTable()
	if err != nil {
		return branches{}, err
	}
	recs, err := readTable("driver_branches.tsv", "branch", "cuda", "open_modules", "default_flavor", "datacenter", "notes", "source", "unverified")
	if err != nil {
		return branches{}, err
	}
	var d decoder
	t := branches{rows: make([]DriverBranch, 0, len(recs))}
	for _, r := range recs {
		b := DriverBranch{
			Branch:        d.uint(r, "branch"),
			CUDA:          d.requiredVersion(r, "cuda"),
			OpenModules:   d.yesNo(r, "open_modules"),
			DefaultFlavor: Flavor(d.oneOf(r, "default_flavor", string(FlavorOpen), string(FlavorProprietary))),
			Datacenter:    d.str(r, "datacenter"),
			Notes:         d.str(r, "notes"),
		}
		b.Source = d.source(r, "driver_branches", r.get("branch"), refs)
		if b.DefaultFlavor == FlavorOpen && !b.OpenModules {
			d.fail(r, "default_flavor", "open by default but open_modules is no")
		}
		if n := len(t.rows); n > 0 && t.rows[n-1].Branch >= b.Branch {
			d.fail(r, "branch", "rows must be sorted by branch without duplicates")
		}
		t.rows = append(t.rows, b)
	}
	return t, d.err
}

// CUDAReleases returns every known CUDA toolkit release, oldest first.
// The returned rows share memory with the tables and must not be changed.
func CUDAReleases() []CUDARelease {
	return slices.Clone(must(cudaReleasesTable()).rows)
}

// CUDAFamilyFor returns the row for a CUDA major version.
func CUDAFamilyFor(major uint64) (CUDAFamily, bool) {
	t := must(cudaFamiliesTable())
	i, ok := t.byMajor[major]
	if !ok {
		return CUDAFamily{}, false
	}
	return t.rows[i], true
}

// LookupCUDA finds the release a CUDA version names. "12.4" names the GA
// release of 12.4 and "12.4.1" its first update; a version with a single
// part names no release. Later parts (a fourth, or a local label) are
// ignored. Minor versions that were never released ("12.7") and unknown
// ones give an error wrapping ErrNotReleased or ErrUnknown.
func LookupCUDA(cuda version.Version) (CUDARelease, error) {
	n := nparts(cuda)
	if n < 2 {
		return CUDARelease{}, fmt.Errorf("CUDA %q names no release: give at least major.minor", cuda)
	}
	t := must(cudaReleasesTable())
	same := t.byMinor[[2]uint64{cuda.Major(), cuda.Minor()}]
	if len(same) == 0 {
		if f, ok := CUDAFamilyFor(cuda.Major()); ok {
			for _, s := range f.Skipped {
				if s.Equal(mm(cuda)) {
					return CUDARelease{}, fmt.Errorf("CUDA %s: %w (%s)", mm(cuda), ErrNotReleased, f.Notes)
				}
			}
		}
		return CUDARelease{}, fmt.Errorf("CUDA %s: %w", cuda, ErrUnknown)
	}
	if n == 2 {
		for _, i := range same {
			if t.rows[i].Release == "GA" {
				return t.rows[i], nil
			}
		}
		return t.rows[same[0]], nil
	}
	want := cuda.Trunc(3)
	for _, i := range same {
		if t.rows[i].Version.Equal(want) {
			return t.rows[i], nil
		}
	}
	known := make([]string, len(same))
	for k, i := range same {
		known[k] = t.rows[i].Version.String()
	}
	return CUDARelease{}, fmt.Errorf("CUDA %s is not a known release of %s (known: %s): %w", want, mm(cuda), strings.Join(known, ", "), ErrUnknown)
}

// MinDriverForCUDA returns the drivers CUDA cuda needs: exact is the driver
// of that toolkit release (zero where the table lacks it), minorCompat the
// floor from which the release runs through minor-version compatibility
// (zero before CUDA 11). When the release is unknown (a minor newer than
// the tables) but its major is known, err wraps ErrUnknown and minorCompat
// is still set; for a minor that was never released both are zero.
func MinDriverForCUDA(cuda version.Version) (exact, minorCompat version.Version, row CUDARelease, err error) {
	row, err = LookupCUDA(cuda)
	if f, ok := CUDAFamilyFor(cuda.Major()); ok && !errors.Is(err, ErrNotReleased) {
		minorCompat = f.MinorCompatMin
	}
	if err != nil {
		return version.Version{}, minorCompat, CUDARelease{}, err
	}
	return row.Driver, minorCompat, row, nil
}

// BranchOf returns the branch row for a driver version: its own branch's
// row, or the nearest lower branch listed when its own is missing (a
// newer branch than the table knows is treated like the newest known).
// It reports false for drivers older than every listed branch.
func BranchOf(driver version.Version) (DriverBranch, bool) {
	return branchRow(driver.Major())
}

// branchRow is BranchOf for a branch number.
func branchRow(b uint64) (DriverBranch, bool) {
	rows := must(branchesTable()).rows
	i, found := slices.BinarySearchFunc(rows, b, func(r DriverBranch, b uint64) int {
		switch {
		case r.Branch < b:
			return -1
		case r.Branch > b:
			return 1
		}
		return 0
	})
	if found {
		return rows[i], true
	}
	if i == 0 {
		return DriverBranch{}, false
	}
	return rows[i-1], true
}

// DriverBranches returns every listed driver branch, oldest first.
func DriverBranches() []DriverBranch {
	return slices.Clone(must(branchesTable()).rows)
}

// MaxCUDAForDriver returns the newest CUDA version driver runs, as
// nvidia-smi's "CUDA Version" shows it ("12.2" for 535.261.03). It is the
// zero Version for drivers older than every listed branch.
func MaxCUDAForDriver(driver version.Version) version.Version {
	b, ok := BranchOf(driver)
	if !ok {
		return version.Version{}
	}
	return b.CUDA
}

// DriverSupportsCUDA reports whether driver runs applications built with
// CUDA cuda. When it does, how is HowExact (the driver is at least the
// toolkit release's own driver) or HowMinorCompat (only the major's
// minor-version compatibility floor is met: features such as JIT of newer
// PTX are missing). When it does not, how says why.
func DriverSupportsCUDA(driver, cuda version.Version) (ok bool, how string) {
	exact, minor, row, err := MinDriverForCUDA(cuda)
	if err != nil && minor.IsZero() {
		return false, err.Error()
	}
	if err == nil && !exact.IsZero() && driver.Compare(exact) >= 0 {
		return true, HowExact
	}
	if !minor.IsZero() && driver.Compare(minor) >= 0 {
		return true, HowMinorCompat
	}
	var why []string
	if err == nil {
		if exact.IsZero() {
			why = append(why, fmt.Sprintf("CUDA %s (%s) has no known driver", row.Version, row.Release))
		} else {
			why = append(why, fmt.Sprintf("CUDA %s (%s) needs %s", row.Version, row.Release, exact))
		}
	}
	if minor.IsZero() {
		why = append(why, fmt.Sprintf("CUDA %d.x has no minor-version compatibility", cuda.Major()))
	} else {
		why = append(why, fmt.Sprintf("minor-version compatibility for CUDA %d.x needs %s", cuda.Major(), minor))
	}
	return false, fmt.Sprintf("driver %s is too old: %s", driver, strings.Join(why, "; "))
}
