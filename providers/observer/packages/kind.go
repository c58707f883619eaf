package packages

import (
	"context"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host/pkgindex"
	"github.com/gpuenv/gpuenv/providers/kind"
)

// Kind describes, once, the observers of the package database and the
// indexes of what can be installed. The package plans nothing.
var Kind = &kind.Descriptor{
	Name: "packages",
	Observers: []kind.Observer{
		{Name: "packages", Reads: []string{kind.OS}, Writes: []string{kind.Packages}, Observe: observe, Predict: predict},
		{Name: "packages.indexes", Reads: []string{kind.OS, kind.Repositories, kind.Packages}, Writes: []string{kind.PackageIndexes}, Observe: observeIndexes},
	},
}

func observe(ctx context.Context, in kind.Input, obs *facts.Observation) []facts.Warning {
	var warns []facts.Warning
	obs.Packages, warns = Observe(ctx, in.Host, obs.OS.Family)
	return warns
}

// observeIndexes reads the package indexes the sources name, with the
// pins that apply to the installed packages: the versions the providers
// plan come from them.
func observeIndexes(_ context.Context, in kind.Input, obs *facts.Observation) []facts.Warning {
	var warns []facts.Warning
	obs.PackageIndexes, warns = pkgindex.Read(in.Host, pkgindex.Options{Family: obs.OS.Family, Repositories: obs.Repositories, Installed: obs.Packages.Packages, Arch: obs.OS.Arch})
	return warns
}
