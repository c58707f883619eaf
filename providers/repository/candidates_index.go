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
// lists, newest first, as the observation orders them. It cannot answer
// where the root has no index of manager (lists never fetched: the
// package manager is asked, as before an update it would answer from
// nothing, or from a cache of its own), or for a package the indexes do
// not keep, which only relevant ones are.
func (c *Candidates) fromIndexes(manager planner.Manager, name string) ([]string, bool) {
	c.mu.Lock()
	ix := c.indexes
	c.mu.Unlock()
	if ix == nil || ix.Manager != string(manager) || len(ix.Indexes) == 0 || !pkgdb.Relevant(name) {
		return nil, false
	}
	var out []string
	for i := range ix.Packages {
		p := &ix.Packages[i]
		if p.Name != name {
			continue
		}
		for _, v := range p.Versions {
			if len(v.Origins) > 0 {
				out = append(out, v.Version)
			}
		}
		break
	}
	return out, true
}
