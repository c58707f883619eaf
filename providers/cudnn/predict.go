package cudnn

import (
	"slices"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/host/pkgdb"
)

// predict is the cuDNN installs once the steps' package transactions are
// done, read from the predicted package database as Observe ties an
// install under /usr to its runtime package: a runtime package a step
// installs, upgrades or removes takes the place of the install it had,
// with the version and the CUDA major its name and version carry (none
// where its version is known only after apply). Where its header and
// libraries will lie is not predicted; installs of no package stay as
// observed.
func predict(end *facts.Observation, steps []plan.Step) {
	var touched []string
	for _, s := range steps {
		for _, op := range s.Operations {
			p := op.Packages
			if p == nil || p.Manager == plan.ManagerPip {
				continue
			}
			for _, pin := range p.Install {
				if isRuntimePackage(pin.Name) {
					touched = append(touched, pin.Name)
				}
			}
			for _, name := range p.Remove {
				if isRuntimePackage(name) {
					touched = append(touched, name)
				}
			}
		}
	}
	if len(touched) == 0 {
		return
	}
	ins := slices.DeleteFunc(slices.Clone(end.CuDNN.Installs), func(in facts.CuDNNInstall) bool { return slices.Contains(touched, in.Package) })
	for _, p := range end.Packages.Packages {
		if !slices.Contains(touched, p.Name) || p.State != facts.StateInstalled {
			continue
		}
		in := facts.CuDNNInstall{Package: p.Name, PackageVersion: p.Version, CUDAMajor: cudaMajorOfPackage(p)}
		if p.Version != "" {
			in.Version = threeParts(pkgdb.Upstream(p.Version))
		}
		ins = append(ins, in)
	}
	end.CuDNN.Installs = ins
}
