package planner

import "github.com/gpuenv/gpuenv/planner/facts"

// IndexCandidates is the optional capability of a Candidates to answer
// from the package indexes on disk (facts.PackageIndexes) rather than by
// asking the package manager in a child process. Plan hands it the
// observation's indexes before any provider asks, so that one plan's
// answers come from the same observation its fingerprint covers.
type IndexCandidates interface {
	Candidates
	// UseIndexes gives the indexes to answer from; where they hold no
	// index for a manager (its lists were never fetched), the
	// implementation answers as it would without them.
	UseIndexes(ix *facts.PackageIndexes)
}
