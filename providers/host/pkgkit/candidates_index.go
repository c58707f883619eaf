package pkgkit

import (
	"errors"
	"fmt"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
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
// no apt index because none was fetched (its configured sources are all
// missing: an image before its first apt-get update) it answers that
// nothing is listed yet, and Pick leaves the version to apply, after a
// refresh. It cannot answer where no source of manager is known at all
// (the package manager is asked, as it may read sources gpuenv does not),
// where dnf has no metadata cache (dnf is asked, and fetches what it
// needs: apply pins no version left to it for dnf), or for a package the
// indexes do not keep, which only relevant ones are.
func (c *Candidates) fromIndexes(manager plan.Manager, name string) ([]string, bool) {
	c.mu.Lock()
	ix := c.indexes
	c.mu.Unlock()
	if ix == nil || ix.Manager != string(manager) || !pkgdb.Relevant(name) {
		return nil, false
	}
	if len(ix.Indexes) == 0 && (manager != plan.ManagerApt || len(ix.Missing) == 0) {
		return nil, false
	}
	return pkgdb.IndexListed(ix, name), true
}

// unobserved says why the indexes of a saved observation cannot answer
// which versions of name manager can install, where fromIndexes cannot.
func (c *Candidates) unobserved(manager plan.Manager, name string) error {
	c.mu.Lock()
	ix := c.indexes
	c.mu.Unlock()
	var why string
	switch {
	case ix == nil || ix.Manager == "":
		why = "it holds no package index (none was on disk, or it was made before gpuenv recorded them)"
	case ix.Manager != string(manager):
		why = fmt.Sprintf("it holds the indexes of %s, not of %s", ix.Manager, manager)
	case !pkgdb.Relevant(name):
		why = fmt.Sprintf("it keeps only the GPU-related packages of the indexes, and %s is not one", name)
	default:
		why = fmt.Sprintf("it holds no index of %s's configured sources", manager)
	}
	return fmt.Errorf("the versions of %s that %s can install are %w: %s", name, manager, ErrNotObserved, why)
}

// ErrNotObserved is the error of a question about package versions that
// only the host itself could answer, asked of a saved observation.
var ErrNotObserved = errors.New("not in the observation")

// Unfetched returns the configured apt sources whose indexes are not on
// disk, as the observation found them: what they offer is known after
// apply, which fetches them first. It names none for dnf, which apply
// does not pin a version for once its metadata is fetched.
func (c *Candidates) Unfetched(manager plan.Manager) []facts.IndexSource {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.indexes == nil || c.indexes.Manager != string(manager) || manager != plan.ManagerApt {
		return nil
	}
	return c.indexes.Missing
}
