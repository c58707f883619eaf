package compat

import (
	"fmt"
	"slices"

	"github.com/gpuenv/gpuenv/spec/version"
)

// CUDAArch says which CUDA toolkits build for one compute capability.
type CUDAArch struct {
	CC version.Version
	// FirstCUDA is the first CUDA release that targets it (zero: before
	// 9.0); LastCUDA the last one (zero: still targeted).
	FirstCUDA, LastCUDA version.Version
	Notes               string
	Source              Source
}

var cudaArchTable = loaded(loadCUDAArchs)

func loadCUDAArchs() ([]CUDAArch, error) {
	refs, err := sourcesTable()
	if err != nil {
		return nil, err
	}
	recs, err := readTable("cuda_archs.tsv", "cc", "first_cuda", "last_cuda", "notes", "source", "unverified")
	if err != nil {
		return nil, err
	}
	var d decoder
	rows := make([]CUDAArch, 0, len(recs))
	for _, r := range recs {
		a := CUDAArch{
			CC:        d.requiredVersion(r, "cc"),
			FirstCUDA: d.version(r, "first_cuda"),
			LastCUDA:  d.version(r, "last_cuda"),
			Notes:     d.str(r, "notes"),
		}
		a.Source = d.source(r, "cuda_archs", r.get("cc"), refs)
		if _, ok := ArchForCC(a.CC); !ok {
			d.fail(r, "cc", "%s is the capability of no architecture in architectures.tsv", a.CC)
		}
		if !a.FirstCUDA.IsZero() && !a.LastCUDA.IsZero() && a.FirstCUDA.Compare(a.LastCUDA) > 0 {
			d.fail(r, "last_cuda", "%s is before first_cuda %s", a.LastCUDA, a.FirstCUDA)
		}
		if n := len(rows); n > 0 && rows[n-1].CC.Compare(a.CC) >= 0 {
			d.fail(r, "cc", "rows must be sorted by cc without duplicates")
		}
		rows = append(rows, a)
	}
	return rows, d.err
}

// CUDAArchs returns every row of cuda_archs.tsv, by compute capability.
func CUDAArchs() []CUDAArch { return slices.Clone(must(cudaArchTable())) }

// CUDAArchFor returns the row of a compute capability.
func CUDAArchFor(cc version.Version) (CUDAArch, bool) {
	for _, a := range must(cudaArchTable()) {
		if a.CC.Equal(mm(cc)) {
			return a, true
		}
	}
	return CUDAArch{}, false
}

// CUDATargets reports whether a CUDA release builds for a compute
// capability, and why not. A capability the table does not list is
// assumed targeted: the table cannot say otherwise.
func CUDATargets(cuda, cc version.Version) (bool, string) {
	a, ok := CUDAArchFor(cc)
	if !ok {
		return true, ""
	}
	cuda = mm(cuda)
	if !a.FirstCUDA.IsZero() && cuda.Compare(a.FirstCUDA) < 0 {
		return false, fmt.Sprintf("CUDA %s predates compute capability %s, first built for by CUDA %s (%s)", cuda, a.CC, a.FirstCUDA, a.Source)
	}
	if !a.LastCUDA.IsZero() && cuda.Compare(a.LastCUDA) > 0 {
		return false, fmt.Sprintf("CUDA %s no longer builds for compute capability %s; CUDA %s was the last (%s)", cuda, a.CC, a.LastCUDA, a.Source)
	}
	return true, ""
}
