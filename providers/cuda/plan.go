package cuda

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host/pkgdb"
	"github.com/gpuenv/gpuenv/providers/repository"
	"github.com/gpuenv/gpuenv/spec"
	"github.com/gpuenv/gpuenv/spec/version"
)

// Provider plans the "cuda" step: the toolkit's packages.
type Provider struct{}

var _ planner.Provider = Provider{}

// Name is the provider's kind.
func (Provider) Name() string { return "cuda" }

// Plan compares the resolved toolkit with the installed ones.
func (Provider) Plan(ctx context.Context, req *planner.Request) *planner.Response {
	resp := &planner.Response{}
	if req.Desired == nil || req.Desired.CUDA == nil {
		return resp
	}
	d := req.Desired.CUDA
	obs := req.Facts
	manager := req.Desired.Manager
	layout := LayoutNVIDIA
	if d.Source == spec.SourceDistro {
		layout = LayoutDistro
	}
	if d.Absent {
		var remove, paths []string
		for _, t := range obs.CUDA.Toolkits {
			if t.Package != "" && !slices.Contains(remove, t.Package) {
				remove = append(remove, t.Package)
				paths = append(paths, t.Path)
			}
		}
		if len(remove) == 0 {
			return resp
		}
		resp.Steps = append(resp.Steps, planner.Step{
			Address:    "cuda",
			Action:     planner.Delete,
			Before:     map[string]string{"packages": strings.Join(remove, ", "), "path": strings.Join(paths, ", ")},
			Reason:     "absent = true removes the CUDA toolkit: " + strings.Join(remove, ", ") + ".",
			ReasonCode: planner.ReasonAbsentRequested,
			Operations: []planner.Operation{{Kind: planner.OpPackages, Packages: &planner.PackagesOp{Manager: manager, Remove: remove}}},
		})
		return resp
	}
	if len(d.Packages) == 0 {
		return resp
	}
	var current *facts.Toolkit
	for i, t := range obs.CUDA.Toolkits {
		v, err := version.Parse(t.Version)
		if err != nil || t.Layout != layout {
			continue
		}
		// Any installed release the constraint admits matches: gpuenv
		// does not upgrade what already satisfies the spec.
		if d.Versions.Check(v) {
			return resp
		}
		if current == nil {
			current = &obs.CUDA.Toolkits[i]
		}
	}
	pkg := d.Packages[0]
	minor := d.Minor
	picked, err := repository.Pick(ctx, req.Candidates, repository.PickQuery{
		Manager: manager, Packages: d.Packages, Versions: d.Versions,
		Accept: func(_ string, up version.Version) bool { return up.Trunc(2).Equal(minor) },
		OS:     repository.OSID(obs.OS), OSVersion: obs.OS.VersionID, Pending: repository.Pending(req),
		Archive: req.Desired.Archive, Source: d.Source,
	})
	if err != nil {
		resp.Diagnostics = append(resp.Diagnostics, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "No CUDA toolkit version to install",
			Detail:   err.Error() + ".",
			Subject:  attrRange(d.Block.Version, d.Block.DefRange).Ptr(),
		})
		return resp
	}
	var names []string
	op := &planner.PackagesOp{Manager: manager}
	for _, p := range d.Packages {
		names = append(names, p.Name)
		op.Install = append(op.Install, planner.PackagePin{Name: p.Name, Version: picked.Version, Constraint: picked.Constraint})
	}
	// The toolkit release the package carries: Debian writes it after a
	// tilde ("11.8.89~11.8.0-5~deb12u1"), NVIDIA as the upstream version.
	release := d.Release.Version.String()
	if picked.Version == "" {
		release = d.Minor.String()
	} else if rel, comp := DebianToolkitVersion(picked.Version); comp != "" {
		release = rel
	} else if up, err := pkgdb.UpstreamVersion(string(manager), picked.Version); err == nil {
		release = up.String()
	}
	step := planner.Step{
		Address:    "cuda",
		Action:     planner.Create,
		ReasonCode: planner.ReasonMissing,
		After:      map[string]string{"version": release, "package": pkg.Name + "=" + repository.ShownVersion(picked.Version), "path": d.Path, "source": string(d.Source)},
		Operations: []planner.Operation{{Kind: planner.OpPackages, Packages: op}},
		DependsOn:  append(repository.Deps(req), "driver"),
	}
	why := []string{fmt.Sprintf("no CUDA %s toolkit from the %s source is installed", minor, d.Source)}
	if current != nil {
		step.Action = planner.Update
		step.ReasonCode = planner.ReasonVersionMismatch
		step.Before = map[string]string{"version": current.Version, "path": current.Path}
		if current.Package != "" {
			step.Before["package"] = current.Package
		}
		why = []string{fmt.Sprintf("the installed toolkit at %s is CUDA %s and the spec asks for %s", current.Path, current.Version, describe(d.Versions, minor))}
		if cur, ok := pkgdb.Installed(obs.Packages, pkg.Name, pkgdb.Configured); ok && picked.Version != "" && pkgdb.Compare(string(manager), picked.Version, cur.Version) < 0 {
			op.AllowDowngrade = true
		}
	}
	why = append(why, fmt.Sprintf("installs %s %s into %s", strings.Join(names, ", "), repository.ShownVersion(picked.Version), d.Path))
	if picked.Note != "" {
		why = append(why, picked.Note)
	}
	step.Reason = planner.Sentence(why)
	resp.Steps = append(resp.Steps, step)
	return resp
}

func describe(c version.Constraint, minor version.Version) string {
	if c.IsZero() {
		return "CUDA " + minor.String()
	}
	return fmt.Sprintf("%q", c.String())
}

func attrRange[T any](a spec.Attr[T], block hcl.Range) hcl.Range {
	if a.Set {
		return a.Range
	}
	return block
}
