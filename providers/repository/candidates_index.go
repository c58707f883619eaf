package repository

import (
	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host/pkgdb"
)

var _ planner.IndexCandidates = (*Candidates)(nil)

// UseIndexes makes Versions answer from ix wherever it holds the
// manager's indexes. The plan's observation hands them in (Plan), so
// that no process is started where "apt-get update" has run.
func (c *Candidates) UseIndexes(ix *facts.PackageIndexes) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.indexes = ix
}

// Indexes returns the indexes Versions answers from, nil when none.
func (c *Candidates) Indexes() *facts.PackageIndexes {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.indexes
}

// fromIndexes answers Versions from the indexes: the versions some index
// lists, newest first, as the observation orders them. Where the root has
// no index of manager because none was fetched (its configured sources
// are all missing: an image before its first apt-get update) it answers
// that nothing is listed yet, and Pick leaves the version to apply, after
// a refresh. It cannot answer where no source of manager is known at all
// (the package manager is asked, as it may read sources gpuenv does not),
// or for a package the indexes do not keep, which only relevant ones are.
func (c *Candidates) fromIndexes(manager planner.Manager, name string) ([]string, bool) {
	c.mu.Lock()
	ix := c.indexes
	c.mu.Unlock()
	if ix == nil || ix.Manager != string(manager) || len(ix.Indexes) == 0 && len(ix.Missing) == 0 || !pkgdb.Relevant(name) {
		return nil, false
	}
	return pkgdb.IndexListed(ix, name), true
}

// Unfetched returns the configured sources of manager whose indexes are
// not on disk, as the observation found them.
func (c *Candidates) Unfetched(manager planner.Manager) []facts.IndexSource {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.indexes == nil || c.indexes.Manager != string(manager) {
		return nil
	}
	return c.indexes.Missing
}
