package applytest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host/pkgdb"
)

// FakeIndex is the path of the one index IndexesOf describes.
const FakeIndex = "/var/lib/apt/lists/fake-archive_Packages"

// IndexesOf returns what reads the fake archive at dir as the root's
// package indexes describe it (apply.HostExecutor.Indexes): one index
// listing every package file there, at the time of the call, with its
// size, SHA-256 and dependencies on exact versions.
func IndexesOf(dir string) func(context.Context) (*facts.PackageIndexes, error) {
	return func(context.Context) (*facts.PackageIndexes, error) {
		debs, err := readPackages(dir, "*.deb", parseDeb,
			func(d *debFile) string { return d.control.get("Package") },
			func(d *debFile) string { return d.control.get("Version") })
		if err != nil {
			return nil, err
		}
		ix := &facts.PackageIndexes{Manager: "apt", Architecture: "amd64", Indexes: []facts.PackageIndex{{Path: FakeIndex, Priority: 500}}}
		for _, name := range slices.Sorted(maps.Keys(debs)) {
			p := facts.IndexedPackage{Name: name}
			for _, d := range slices.Backward(debs[name]) {
				sum := sha256.Sum256(d.data)
				ver, arch := d.control.get("Version"), d.control.get("Architecture")
				p.Versions = append(p.Versions, facts.IndexedVersion{
					Version: ver, Priority: 500, Origins: []string{FakeIndex}, Architecture: arch,
					Filename: "pool/" + Deb{Name: name, Version: ver, Arch: arch}.FileName(), Size: int64(len(d.data)), SHA256: hex.EncodeToString(sum[:]),
					ExactDepends: pkgdb.ExactRelations(d.control.get("Depends")),
				})
			}
			ix.Packages = append(ix.Packages, p)
		}
		return ix, nil
	}
}
