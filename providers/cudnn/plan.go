package cudnn

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

// Provider plans the "cudnn" step: cuDNN's packages.
type Provider struct{}

var _ kind.Planner = Provider{}

// installVersion is an install's most exact version: the package's (four
// parts, "9.1.0.70") where a package installed it, else the header's.
func installVersion(in facts.CuDNNInstall) (version.Version, error) {
	if in.PackageVersion != "" {
		if v, err := version.FromDebian(in.PackageVersion); err == nil {
			return v, nil
		}
	}
	return version.Parse(in.Version)
}

// Plan compares the resolved cuDNN with the installed ones.
func (Provider) Plan(ctx context.Context, req *planner.Request) *planner.Response {
	resp := &planner.Response{}
	if req.Desired == nil || req.Desired.CuDNN == nil {
		return resp
	}
	d := req.Desired.CuDNN
	obs := req.Facts
	manager := req.Desired.Manager
	if d.Absent {
		var remove []string
		for _, in := range obs.CuDNN.Installs {
			if in.Package != "" && !slices.Contains(remove, in.Package) {
				remove = append(remove, in.Package)
			}
		}
		for _, p := range obs.Packages.Packages {
			if p.State == facts.StateInstalled && strings.HasPrefix(p.Name, "libcudnn") && !slices.Contains(remove, p.Name) {
				remove = append(remove, p.Name)
			}
		}
		slices.Sort(remove)
		if s := pkgkit.Remove("cudnn", "cuDNN", manager, remove); s != nil {
			resp.Steps = append(resp.Steps, *s)
		}
		return resp
	}
	if len(d.Packages) == 0 {
		return resp
	}
	var current *facts.CuDNNInstall
	for i, in := range obs.CuDNN.Installs {
		v, err := installVersion(in)
		if err != nil {
			continue
		}
		sameCUDA := in.CUDAMajor == "" || in.CUDAMajor == fmt.Sprint(d.CUDAMajor)
		if d.Versions.Check(v) && sameCUDA {
			if req.Replacing("cudnn") {
				step, diag := reinstall(ctx, req, in)
				if diag != nil {
					resp.Diagnostics = append(resp.Diagnostics, diag)
				} else {
					resp.Steps = append(resp.Steps, *step)
				}
			}
			return resp
		}
		if current == nil {
			current = &obs.CuDNN.Installs[i]
		}
	}
	picked, err := pkgkit.Pick(ctx, req.Candidates, pkgkit.PickQuery{
		Manager: manager, Packages: d.Packages, Versions: d.Versions,
		Accept: func(raw string, _ version.Version) bool { return buildFits(raw, d.CUDA) },
		OS:     pkgkit.OSID(obs.OS), OSVersion: obs.OS.VersionID, Pending: pkgkit.Pending(req),
		Archive: req.Desired.Archive, Source: d.Source, Adds: pkgkit.Adds(req, d.Source),
	})
	if err != nil {
		resp.Diagnostics = append(resp.Diagnostics, pkgkit.NoVersion("cuDNN", err, d.Block.Version.RangeOr(d.Block.DefRange)))
		return resp
	}
	names := pkgkit.Names(d.Packages)
	op := picked.Install(manager, d.Packages)
	step := plan.Step{
		Address:    "cudnn",
		Action:     plan.Create,
		ReasonCode: plan.ReasonMissing,
		After:      map[string]string{"version": pkgkit.ShownVersion(picked.Version), "packages": strings.Join(names, ", "), "cuda_major": fmt.Sprint(d.CUDAMajor), "source": string(d.Source)},
		Operations: []plan.Operation{{Kind: plan.OpPackages, Packages: op}},
		DependsOn:  append(pkgkit.Deps(req), "cuda"),
	}
	why := []string{fmt.Sprintf("no cuDNN matching %s for CUDA %d is installed", d.Versions.Quoted(), d.CUDAMajor)}
	if current != nil {
		step.Action = plan.Update
		step.ReasonCode = plan.ReasonVersionMismatch
		step.Before = map[string]string{"version": current.Version}
		if current.Package != "" {
			step.Before["packages"] = current.Package
		}
		why = []string{fmt.Sprintf("the installed cuDNN %s does not satisfy %s for CUDA %d", current.Version, d.Versions.Quoted(), d.CUDAMajor)}
		if cur, ok := pkgdb.Installed(obs.Packages, d.Packages[0].Name, pkgdb.Configured); ok {
			op.AllowDowngrade = picked.Downgrades(manager, cur.Version)
		}
	}
	why = append(why, fmt.Sprintf("installs %s %s", strings.Join(names, ", "), pkgkit.ShownVersion(picked.Version)))
	if d.Source == spec.SourceDistro {
		for _, p := range d.Packages {
			if p.Notes != "" {
				why = append(why, p.Name+": "+p.Notes)
			}
		}
	}
	step.Reason = picked.Reason(why)
	resp.Steps = append(resp.Steps, step)
	return resp
}

// buildFits tells whether a cuDNN package version fits the toolkit. cuDNN
// 8's packages carry the CUDA build in their version (8.9.7.29-1+cuda12.2):
// a build for CUDA X.Y runs on toolkits X.Z with Z >= Y (NVIDIA builds one
// per line, not per minor: 8.9.7.29 exists for 12.2 and 11.8 only, and
// TensorFlow's tested configuration pairs 8.9 with CUDA 12.3). The apt
// candidates sort the newest build first, so the closest fitting line wins.
func buildFits(raw string, cuda version.Version) bool {
	_, build, ok := strings.Cut(raw, "+cuda")
	if !ok || cuda.IsZero() {
		return true
	}
	v, err := version.Parse(build)
	if err != nil {
		return false
	}
	return v.Major() == cuda.Major() && v.Minor() <= cuda.Minor()
}

// reinstall is the "cudnn" step -replace plans when the installed cuDNN
// in satisfies the spec: its packages reinstalled at the version
// installed now. A cuDNN no package installed (a tarball's) is an error:
// there is nothing gpuenv could reinstall it from.
func reinstall(ctx context.Context, req *planner.Request, in facts.CuDNNInstall) (*plan.Step, *hcl.Diagnostic) {
	d := req.Desired.CuDNN
	subject := d.Block.Version.RangeOr(d.Block.DefRange)
	names := pkgkit.Names(d.Packages)
	if in.Package != "" && !slices.Contains(names, in.Package) {
		names = append([]string{in.Package}, names...)
	}
	op := repository.Reinstall(req.Facts, req.Desired.Manager, names)
	if op == nil {
		return nil, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Nothing to replace",
			Detail:   fmt.Sprintf("-replace cudnn: cuDNN %s was installed by no package gpuenv knows (%s), so there is nothing to reinstall it from.", in.Version, strings.Join(names, ", ")),
			Subject:  subject.Ptr(),
		}
	}
	main := op.Install[0]
	op.Install = slices.DeleteFunc(op.Install, func(p plan.PackagePin) bool { return p.Version != main.Version })
	if diag := repository.Reinstallable(ctx, req.Candidates, "cudnn", op, subject); diag != nil {
		return nil, diag
	}
	pkgs := make([]string, len(op.Install))
	for i, p := range op.Install {
		pkgs[i] = p.Name
	}
	shown := map[string]string{"version": main.Version, "packages": strings.Join(pkgs, ", "), "cuda_major": fmt.Sprint(d.CUDAMajor), "source": string(d.Source)}
	return &plan.Step{
		Address:    "cudnn",
		Action:     plan.Replace,
		Before:     shown,
		After:      maps.Clone(shown),
		Reason:     repository.ReinstallReason(op),
		ReasonCode: plan.ReasonReplaceRequested,
		Operations: []plan.Operation{{Kind: plan.OpPackages, Packages: op}},
		DependsOn:  append(pkgkit.Deps(req), "cuda"),
	}, nil
}
