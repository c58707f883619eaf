package cuda

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/host/pkgdb"
	"github.com/gpuenv/gpuenv/providers/host/pkgkit"
	"github.com/gpuenv/gpuenv/providers/kind"
	"github.com/gpuenv/gpuenv/providers/repository"
	"github.com/gpuenv/gpuenv/spec"
	"github.com/gpuenv/gpuenv/spec/version"
)

// Provider plans the "cuda" step: the toolkit's packages.
type Provider struct{}

var _ kind.Planner = Provider{}

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
		if s := pkgkit.Remove("cuda", "the CUDA toolkit", manager, remove); s != nil {
			s.Before["path"] = strings.Join(paths, ", ")
			resp.Steps = append(resp.Steps, *s)
		}
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
			if req.Replacing("cuda") {
				step, diag := reinstall(ctx, req, t)
				if diag != nil {
					resp.Diagnostics = append(resp.Diagnostics, diag)
				} else {
					resp.Steps = append(resp.Steps, *step)
				}
			}
			return resp
		}
		if current == nil {
			current = &obs.CUDA.Toolkits[i]
		}
	}
	pkg := d.Packages[0]
	minor := d.Minor
	picked, err := pkgkit.Pick(ctx, req.Candidates, pkgkit.PickQuery{
		Manager: manager, Packages: d.Packages, Versions: d.Versions,
		Accept: func(_ string, up version.Version) bool { return up.Trunc(2).Equal(minor) },
		// The spec names the release, which Debian's package carries
		// after a tilde, as the toolkit's version.json does.
		Release: func(raw string, up version.Version) version.Version {
			if rel, comp := DebianToolkitVersion(raw); comp != "" {
				if v, err := version.Parse(rel); err == nil {
					return v
				}
			}
			return up
		},
		OS: pkgkit.OSID(obs.OS), OSVersion: obs.OS.VersionID, Pending: pkgkit.Pending(req),
		Archive: req.Desired.Archive, Source: d.Source, Adds: pkgkit.Adds(req, d.Source),
	})
	if err != nil {
		resp.Diagnostics = append(resp.Diagnostics, pkgkit.NoVersion("CUDA toolkit", err, d.Block.Version.RangeOr(d.Block.DefRange)))
		return resp
	}
	op := picked.Install(manager, d.Packages)
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
	step := plan.Step{
		Address:    "cuda",
		Action:     plan.Create,
		ReasonCode: plan.ReasonMissing,
		After:      map[string]string{"version": release, "package": pkg.Name + "=" + pkgkit.ShownVersion(picked.Version), "path": d.Path, "source": string(d.Source)},
		Operations: []plan.Operation{{Kind: plan.OpPackages, Packages: op}},
		DependsOn:  append(pkgkit.Deps(req), "driver"),
	}
	why := []string{fmt.Sprintf("no CUDA %s toolkit from the %s source is installed", minor, d.Source)}
	if current != nil {
		step.Action = plan.Update
		step.ReasonCode = plan.ReasonVersionMismatch
		step.Before = map[string]string{"version": current.Version, "path": current.Path}
		if current.Package != "" {
			step.Before["package"] = current.Package
		}
		why = []string{fmt.Sprintf("the installed toolkit at %s is CUDA %s and the spec asks for %s", current.Path, current.Version, describe(d.Versions, minor))}
		if cur, ok := pkgdb.Installed(obs.Packages, pkg.Name, pkgdb.Configured); ok {
			op.AllowDowngrade = picked.Downgrades(manager, cur.Version)
		}
	}
	why = append(why, fmt.Sprintf("installs %s %s into %s", strings.Join(pkgkit.Names(d.Packages), ", "), pkgkit.ShownVersion(picked.Version), d.Path))
	step.Reason = picked.Reason(why)
	resp.Steps = append(resp.Steps, step)
	return resp
}

func describe(c version.Constraint, minor version.Version) string {
	if c.IsZero() {
		return "CUDA " + minor.String()
	}
	return fmt.Sprintf("%q", c.String())
}

// reinstall is the "cuda" step -replace plans when the installed toolkit t
// satisfies the spec: the packages it came from reinstalled at the
// version installed now. A toolkit no package installed (a runfile's) is
// an error: there is nothing gpuenv could reinstall it from.
func reinstall(ctx context.Context, req *planner.Request, t facts.Toolkit) (*plan.Step, *hcl.Diagnostic) {
	d := req.Desired.CUDA
	subject := d.Block.Version.RangeOr(d.Block.DefRange)
	names := pkgkit.Names(d.Packages)
	if t.Package != "" && !slices.Contains(names, t.Package) {
		names = append([]string{t.Package}, names...)
	}
	op := repository.Reinstall(req.Facts, req.Desired.Manager, names)
	if op == nil {
		return nil, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Nothing to replace",
			Detail:   fmt.Sprintf("-replace cuda: the CUDA %s toolkit at %s was installed by no package gpuenv knows (%s), so there is nothing to reinstall it from.", t.Version, t.Path, strings.Join(names, ", ")),
			Subject:  subject.Ptr(),
		}
	}
	// One step shows one version: the toolkit's packages share it.
	main := op.Install[0]
	op.Install = slices.DeleteFunc(op.Install, func(p plan.PackagePin) bool { return p.Version != main.Version })
	if diag := repository.Reinstallable(ctx, req.Candidates, "cuda", op, subject); diag != nil {
		return nil, diag
	}
	shown := map[string]string{"version": t.Version, "package": main.Name + "=" + main.Version, "path": t.Path, "source": string(d.Source)}
	return &plan.Step{
		Address:    "cuda",
		Action:     plan.Replace,
		Before:     shown,
		After:      maps.Clone(shown),
		Reason:     repository.ReinstallReason(op, "into "+t.Path),
		ReasonCode: plan.ReasonReplaceRequested,
		Operations: []plan.Operation{{Kind: plan.OpPackages, Packages: op}},
		DependsOn:  append(pkgkit.Deps(req), "driver"),
	}, nil
}
