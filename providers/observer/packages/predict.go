package packages

import (
	"slices"
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/host/pkgdb"
)

// predict is the package database as the steps' system package
// transactions leave it: each package a step installs is installed, at
// its pinned version ("" where the version is known only after apply),
// each it removes is gone, and holds are set and lifted. Only the
// packages the steps name are predicted: what the package manager pulls
// in besides them, or removes with them, is not known before it runs.
// As Observe does, it keeps only the packages gpuenv reads.
func predict(end *facts.Observation, steps []plan.Step) {
	var pkgs []facts.Package
	cloned := false
	edit := func() {
		if !cloned {
			pkgs, cloned = slices.Clone(end.Packages.Packages), true
		}
	}
	for _, s := range steps {
		for _, op := range s.Operations {
			p := op.Packages
			if p == nil || p.Manager == plan.ManagerPip {
				continue
			}
			edit()
			for _, name := range p.Remove {
				pkgs = slices.DeleteFunc(pkgs, func(q facts.Package) bool { return q.Name == name })
			}
			for _, pin := range p.Install {
				if !pkgdb.Relevant(pin.Name) {
					continue
				}
				installed := facts.Package{Name: pin.Name, Version: pin.Version, State: facts.StateInstalled}
				if p.Manager == plan.ManagerApt {
					installed.Want = "install"
				}
				i := slices.IndexFunc(pkgs, func(q facts.Package) bool { return q.Name == pin.Name })
				if i < 0 {
					pkgs = append(pkgs, installed)
					continue
				}
				// An upgrade keeps the package's architecture, source
				// and selection.
				q := &pkgs[i]
				q.Version, q.State = pin.Version, facts.StateInstalled
				if q.Want == "deinstall" || q.Want == "purge" {
					q.Want = "install"
				}
			}
			for _, name := range p.Hold {
				if i := slices.IndexFunc(pkgs, func(q facts.Package) bool { return q.Name == name }); i >= 0 {
					pkgs[i].Hold, pkgs[i].Want = true, "hold"
				}
			}
			for _, name := range p.Unhold {
				if i := slices.IndexFunc(pkgs, func(q facts.Package) bool { return q.Name == name }); i >= 0 {
					pkgs[i].Hold = false
					if pkgs[i].Want == "hold" {
						pkgs[i].Want = "install"
					}
				}
			}
		}
	}
	if !cloned {
		return
	}
	slices.SortStableFunc(pkgs, func(a, b facts.Package) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(a.Architecture, b.Architecture)
	})
	end.Packages.Packages = pkgs
}
