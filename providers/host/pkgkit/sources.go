package pkgkit

import (
	"slices"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/compat/nvidiarepo"
	"github.com/gpuenv/gpuenv/planner/facts"
)

// ComponentsAddress is the step that enables archive components the
// spec's distribution packages need and the host's sources lack.
const ComponentsAddress = "repository.distro-components"

// OSID is the package tables' name for the host's system: RHEL and its
// rebuilds (Rocky, Alma) share NVIDIA's rhel repositories and names.
func OSID(o facts.OS) string {
	if o.ID == "rhel" || slices.Contains(o.IDLike, "rhel") {
		return "rhel"
	}
	return o.ID
}

// Deps are the addresses of the steps that configure package sources in a
// plan: a package step runs after them, as apt cannot see the packages
// before.
func Deps(req *planner.Request) []string {
	var out []string
	for _, r := range req.Spec.Repositories {
		out = append(out, "repository."+r.Name)
	}
	if len(req.Desired.Components) > 0 {
		out = append(out, ComponentsAddress)
	}
	if req.Desired.NVIDIARepository != nil {
		out = append(out, nvidiarepo.Address)
	}
	return out
}
