package planner

import (
	"sync"
	"sync/atomic"

	"github.com/gpuenv/gpuenv/planner/compat"
	"github.com/gpuenv/gpuenv/spec/version"
)

// admittedCUDA is the CUDA releases of the tables that c admits, oldest
// first. The slice is shared between plans: a caller that changes it
// must clone it first.
func admittedCUDA(c version.Constraint) []compat.CUDARelease {
	return admittedCUDAMemo.get(c.String(), func() []compat.CUDARelease {
		var rows []compat.CUDARelease
		for _, rel := range compat.CUDAReleases() {
			if c.Check(rel.Version) {
				rows = append(rows, rel)
			}
		}
		return rows
	})
}

// admittedCuDNN is the rows of the cuDNN table with a release whose
// major.minor c admits, in table order; shared as admittedCUDA's are.
func admittedCuDNN(c version.Constraint) []compat.CuDNN {
	return admittedCuDNNMemo.get(c.String(), func() []compat.CuDNN {
		var rows []compat.CuDNN
		for _, row := range compat.CuDNNBuilds() {
			if admitsRange(c, row.First, row.Last) {
				rows = append(rows, row)
			}
		}
		return rows
	})
}

type osRowsKey struct{ os, version, repo, component string }

// queryKey is a compat.PackageQuery as a map key: its versions by their
// text, which is all a version is made of.
type queryKey struct {
	os, osVersion, repo, component string
	flavor                         compat.Flavor
	server                         bool
	branch                         uint64
	cuda, cudnn                    string
}

func queryKeyOf(q compat.PackageQuery) queryKey {
	return queryKey{q.OS, q.OSVersion, q.Repo, q.Component, q.Flavor, q.Server, q.Branch, q.CUDA.String(), q.CuDNN.String()}
}

// namesAnswer is hostOS.names' answer to a query.
type namesAnswer struct {
	names []PackageName
	err   error
}

// What the tables answer a question (the rows a constraint admits, by
// its text, as constraints are never changed once made; the rows of an
// operating system's component; the packages a query names) depends on
// the question alone and on the embedded tables, which never change.
// Every host of a fleet asks the same few questions, several times a
// plan, and each answer copies rows of up to a kilobyte: the answers are
// kept, as narrow's are. The bound keeps a process that meets ever new
// questions (each document names its own operating system) from growing
// them without end; past it, the answer is found again each time.
var (
	admittedCUDAMemo  memo[string, []compat.CUDARelease]
	admittedCuDNNMemo memo[string, []compat.CuDNN]
	osRowsMemo        memo[osRowsKey, []compat.PackageRow]
	namesMemo         memo[queryKey, namesAnswer]
)

const maxMemo = 1 << 10

type memo[K comparable, V any] struct {
	m    sync.Map // K → V
	size atomic.Int64
}

func (a *memo[K, V]) get(key K, find func() V) V {
	if v, ok := a.m.Load(key); ok {
		return v.(V)
	}
	v := find()
	if a.size.Add(1) <= maxMemo {
		a.m.Store(key, v)
	}
	return v
}
