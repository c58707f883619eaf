package pkgdb

import "github.com/gpuenv/gpuenv/planner/facts"

// IndexedPackage returns the facts of the package name, nil when the indexes
// neither list it nor hold it installed.
func IndexedPackage(ix *facts.PackageIndexes, name string) *facts.IndexedPackage {
	if ix == nil {
		return nil
	}
	for i := range ix.Packages {
		if ix.Packages[i].Name == name {
			return &ix.Packages[i]
		}
	}
	return nil
}

// IndexListed returns the versions of name that some index lists, newest
// first: what the package manager can install. A version only installed,
// which no index lists any more, is not among them.
func IndexListed(ix *facts.PackageIndexes, name string) []string {
	p := IndexedPackage(ix, name)
	if p == nil {
		return nil
	}
	var out []string
	for _, v := range p.Versions {
		if len(v.Origins) > 0 {
			out = append(out, v.Version)
		}
	}
	return out
}

// IndexedVersion returns the facts of one version of name, nil when neither an
// index nor the package database knows it.
func IndexedVersion(ix *facts.PackageIndexes, name, version string) *facts.IndexedVersion {
	p := IndexedPackage(ix, name)
	if p == nil {
		return nil
	}
	for i := range p.Versions {
		if p.Versions[i].Version == version {
			return &p.Versions[i]
		}
	}
	return nil
}
