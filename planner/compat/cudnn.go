package compat

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpuenv/gpuenv/spec/version"
)

// CuDNN is the build of a range of cuDNN releases for one CUDA major.
type CuDNN struct {
	// First and Last are the cuDNN major.minor releases the row covers,
	// both inclusive.
	First, Last version.Version
	CUDAMajor   uint64
	// CUDAFirst and CUDALast are the CUDA major.minor versions the build
	// lists; later minors of the same major run through minor-version
	// compatibility.
	CUDAFirst, CUDALast version.Version
	MinDriver           version.Version
	// MinCC and MaxCC bound the compute capabilities of the build; zero
	// where the support matrix states none.
	MinCC, MaxCC version.Version
	Notes        string
	Source       Source
}

// Covers reports whether the row covers a cuDNN version.
func (c CuDNN) Covers(cudnn version.Version) bool {
	v := mm(cudnn)
	return c.First.Compare(v) <= 0 && v.Compare(c.Last) <= 0
}

var cudnnTable = loaded(loadCuDNN)

func loadCuDNN() ([]CuDNN, error) {
	refs, err := sourcesTable()
	if err != nil {
		return nil, err
	}
	recs, err := readTable("cudnn.tsv", "first", "last", "cuda_major", "cuda_first", "cuda_last", "min_driver", "min_cc", "max_cc", "notes", "source", "unverified")
	if err != nil {
		return nil, err
	}
	var d decoder
	rows := make([]CuDNN, 0, len(recs))
	for _, r := range recs {
		c := CuDNN{
			First:     d.requiredVersion(r, "first"),
			Last:      d.requiredVersion(r, "last"),
			CUDAMajor: d.uint(r, "cuda_major"),
			CUDAFirst: d.requiredVersion(r, "cuda_first"),
			CUDALast:  d.requiredVersion(r, "cuda_last"),
			MinDriver: d.requiredVersion(r, "min_driver"),
			MinCC:     d.version(r, "min_cc"),
			MaxCC:     d.version(r, "max_cc"),
			Notes:     d.str(r, "notes"),
		}
		c.Source = d.source(r, "cudnn", fmt.Sprintf("%s-%s/cuda%s", r.get("first"), r.get("last"), r.get("cuda_major")), refs)
		if c.First.Compare(c.Last) > 0 {
			d.fail(r, "last", "is below first")
		}
		if c.CUDAFirst.Major() != c.CUDAMajor || c.CUDALast.Major() != c.CUDAMajor || c.CUDAFirst.Compare(c.CUDALast) > 0 {
			d.fail(r, "cuda_first", "CUDA range %s to %s is not an ascending range within CUDA %d", c.CUDAFirst, c.CUDALast, c.CUDAMajor)
		}
		for _, p := range rows {
			if p.CUDAMajor == c.CUDAMajor && p.First.Compare(c.Last) <= 0 && c.First.Compare(p.Last) <= 0 {
				d.fail(r, "first", "overlaps the row for cuDNN %s to %s with CUDA %d", p.First, p.Last, p.CUDAMajor)
			}
		}
		if n := len(rows); n > 0 {
			p := rows[n-1]
			if cmp := p.First.Compare(c.First); cmp > 0 || cmp == 0 && p.CUDAMajor >= c.CUDAMajor {
				d.fail(r, "first", "rows must be sorted by first, then cuda_major")
			}
		}
		rows = append(rows, c)
	}
	return rows, d.err
}

// CuDNNBuilds returns every cuDNN row, sorted by first release.
func CuDNNBuilds() []CuDNN { return slices.Clone(must(cudnnTable())) }

// CuDNNBuild returns the row for a cuDNN version built for a CUDA major.
func CuDNNBuild(cudnn version.Version, cudaMajor uint64) (CuDNN, bool) {
	for _, c := range must(cudnnTable()) {
		if c.CUDAMajor == cudaMajor && c.Covers(cudnn) {
			return c, true
		}
	}
	return CuDNN{}, false
}

// CuDNNSupportsCUDA reports whether a cuDNN release has a build for a CUDA
// version, and says which row decided. A CUDA minor newer than the build
// lists is accepted (minor-version compatibility within the major), and
// the reason says so.
func CuDNNSupportsCUDA(cudnn, cuda version.Version) (bool, string) {
	var majors []string
	for _, c := range must(cudnnTable()) {
		if !c.Covers(cudnn) {
			continue
		}
		if c.CUDAMajor != cuda.Major() {
			majors = append(majors, fmt.Sprintf("%d", c.CUDAMajor))
			continue
		}
		switch v := mm(cuda); {
		case v.Compare(c.CUDAFirst) < 0:
			return false, fmt.Sprintf("cuDNN %s for CUDA %d starts at CUDA %s (%s)", mm(cudnn), c.CUDAMajor, c.CUDAFirst, c.Source)
		case v.Compare(c.CUDALast) > 0:
			return true, fmt.Sprintf("cuDNN %s for CUDA %d lists CUDA %s to %s; %s runs through minor-version compatibility (%s)", mm(cudnn), c.CUDAMajor, c.CUDAFirst, c.CUDALast, v, c.Source)
		default:
			return true, fmt.Sprintf("cuDNN %s has a build for CUDA %s to %s (%s)", mm(cudnn), c.CUDAFirst, c.CUDALast, c.Source)
		}
	}
	if len(majors) == 0 {
		return false, fmt.Sprintf("cuDNN %s is not in the cudnn table", mm(cudnn))
	}
	return false, fmt.Sprintf("cuDNN %s has builds for CUDA %s only, none for CUDA %d", mm(cudnn), strings.Join(majors, " and "), cuda.Major())
}
