package framework

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

// Provider plans framework.<name> steps: a pip transaction in the
// framework's environment, or the distribution's package.
type Provider struct{}

var _ kind.Planner = Provider{}

// Plan compares each resolved framework with what its environment holds.
func (Provider) Plan(ctx context.Context, req *planner.Request) *planner.Response {
	resp := &planner.Response{}
	if req.Desired == nil {
		return resp
	}
	for _, df := range req.Desired.Frameworks {
		var s *plan.Step
		var diag *hcl.Diagnostic
		if df.Source == spec.SourceDistro {
			s, diag = planDistroFramework(ctx, req, df)
		} else {
			s = planPipFramework(req.Facts, df)
			if s == nil && req.Replacing(df.Address) {
				s = reinstallPip(req.Facts, df)
			}
		}
		if diag != nil {
			resp.Diagnostics = append(resp.Diagnostics, diag)
		}
		if s != nil {
			resp.Steps = append(resp.Steps, *s)
		}
	}
	return resp
}

// planEnvironment finds the observed environment a framework lives in.
func planEnvironment(obs *facts.Observation, df *planner.DesiredFramework) *facts.PythonEnv {
	for i, env := range obs.Python {
		if env.Interpreter == df.Python || df.Venv != "" && env.Prefix == df.Venv {
			return &obs.Python[i]
		}
	}
	return nil
}

// planInstalled finds the framework in an environment.
func planInstalled(env *facts.PythonEnv, name spec.FrameworkName) *facts.Framework {
	if env == nil {
		return nil
	}
	for i, f := range env.Frameworks {
		if f.Name == string(name) {
			return &env.Frameworks[i]
		}
	}
	return nil
}

// planMatches reports whether an installed build satisfies the resolved
// framework, and why not.
func planMatches(inst *facts.Framework, df *planner.DesiredFramework) (bool, plan.ReasonCode, string) {
	v, err := version.Parse(inst.Version)
	if err != nil {
		return false, plan.ReasonVersionMismatch, fmt.Sprintf("its version %q cannot be read", inst.Version)
	}
	if !df.Versions.Check(v) {
		return false, plan.ReasonVersionMismatch, fmt.Sprintf("the installed %s %s does not satisfy %q", df.Package, inst.Version, df.Versions.String())
	}
	switch df.Name {
	case spec.PyTorch:
		if df.CUDA.IsZero() {
			return true, "", ""
		}
		if inst.CPUOnly || inst.CUDA == "" {
			return false, plan.ReasonVariantMismatch, fmt.Sprintf("the installed %s %s is a CPU-only build and the spec needs the CUDA %s build", df.Package, inst.Version, df.CUDA)
		}
		if c, err := version.Parse(inst.CUDA); err != nil || !c.Trunc(2).Equal(df.CUDA.Trunc(2)) {
			return false, plan.ReasonVariantMismatch, fmt.Sprintf("the installed %s %s is built for CUDA %s and the spec needs CUDA %s", df.Package, inst.Version, inst.CUDA, df.CUDA)
		}
	case spec.JAX:
		want := fmt.Sprintf("cuda%d", df.CUDA.Major())
		if !slices.ContainsFunc(inst.Plugins, func(l facts.Library) bool { return strings.Contains(strings.ReplaceAll(l.Path, "_", ""), want) }) {
			return false, plan.ReasonVariantMismatch, fmt.Sprintf("the installed jax %s has no CUDA %d plugin", inst.Version, df.CUDA.Major())
		}
	}
	return true, "", ""
}

// planPipFramework plans a pip transaction.
func planPipFramework(obs *facts.Observation, df *planner.DesiredFramework) *plan.Step {
	env := planEnvironment(obs, df)
	inst := planInstalled(env, df.Name)
	where := df.Python
	if df.Venv != "" {
		where = "the venv " + df.Venv
	}
	if df.Absent {
		if inst == nil {
			return nil
		}
		return &plan.Step{
			Address:    df.Address,
			Action:     plan.Delete,
			Before:     map[string]string{"version": inst.Version, "environment": where},
			Reason:     fmt.Sprintf("absent = true removes %s %s from %s.", df.Package, inst.Version, where),
			ReasonCode: plan.ReasonAbsentRequested,
			Operations: []plan.Operation{{Kind: plan.OpPackages, Packages: &plan.PackagesOp{Manager: plan.ManagerPip, Remove: []string{df.Package}, Python: df.Python}}},
		}
	}
	if df.Version.IsZero() {
		return nil
	}
	var why []string
	action := plan.Create
	code := plan.ReasonMissing
	before := map[string]string(nil)
	if inst != nil {
		ok, c, reason := planMatches(inst, df)
		if ok {
			return nil
		}
		action, code = plan.Update, c
		before = map[string]string{"version": inst.Version, "environment": where}
		why = append(why, reason)
	} else {
		why = append(why, fmt.Sprintf("the package %s is not installed in %s", df.Package, where))
	}
	req := df.Package
	if len(df.Extras) > 0 {
		req += "[" + strings.Join(df.Extras, ",") + "]"
	}
	why = append(why, fmt.Sprintf("installs %s==%s from %s", req, df.Version, df.IndexURL))
	if df.Venv != "" && env == nil {
		why = append(why, fmt.Sprintf("the venv %s is created first with %s", df.Venv, df.BasePython))
	}
	if !df.CUDA.IsZero() && df.Name == spec.PyTorch {
		why = append(why, fmt.Sprintf("the %s wheels bring their own CUDA %s runtime and cuDNN", df.Variant, df.CUDA))
	}
	after := map[string]string{"version": df.Version.String(), "environment": where, "index_url": df.IndexURL}
	if len(df.Extras) > 0 {
		after["extras"] = strings.Join(df.Extras, ",")
	}
	deps := []string{"driver"}
	if !df.NeedsCuDNN.IsZero() {
		deps = append(deps, "cuda", "cudnn")
	}
	// With a venv, pip runs the venv's own interpreter, and the op's Python
	// is the one that creates the venv when it is missing.
	python := df.Python
	if df.Venv != "" {
		python = df.BasePython
	}
	return &plan.Step{
		Address:    df.Address,
		Action:     action,
		Before:     before,
		After:      after,
		Reason:     plan.Sentence(why),
		ReasonCode: code,
		Operations: []plan.Operation{{Kind: plan.OpPackages, Packages: &plan.PackagesOp{
			Manager:  plan.ManagerPip,
			Install:  []plan.PackagePin{{Name: df.Package, Version: df.Version.String(), Extras: slices.Clone(df.Extras)}},
			Python:   python,
			Venv:     df.Venv,
			IndexURL: df.IndexURL,
		}}},
		DependsOn: deps,
	}
}

// planDistroFramework plans the distribution's package.
func planDistroFramework(ctx context.Context, req *planner.Request, df *planner.DesiredFramework) (*plan.Step, *hcl.Diagnostic) {
	obs := req.Facts
	manager := req.Desired.Manager
	inst, installed := pkgdb.Installed(obs.Packages, df.Package, pkgdb.Configured)
	if df.Absent {
		if !installed {
			return nil, nil
		}
		return &plan.Step{
			Address:    df.Address,
			Action:     plan.Delete,
			Before:     map[string]string{"package": df.Package + "=" + inst.Version},
			Reason:     fmt.Sprintf("absent = true removes %s %s.", df.Package, inst.Version),
			ReasonCode: plan.ReasonAbsentRequested,
			Operations: []plan.Operation{{Kind: plan.OpPackages, Packages: &plan.PackagesOp{Manager: manager, Remove: []string{df.Package}}}},
		}, nil
	}
	if df.Package == "" {
		return nil, nil
	}
	if installed {
		if up, err := pkgdb.UpstreamVersion(string(manager), inst.Version); err == nil && df.Versions.Check(up) {
			if req.Replacing(df.Address) {
				return reinstallDistro(ctx, req, df, inst)
			}
			return nil, nil
		}
	}
	pkgs := []planner.PackageName{{Name: df.Package}}
	picked, err := pkgkit.Pick(ctx, req.Candidates, pkgkit.PickQuery{
		Manager: manager, Packages: pkgs, Versions: df.Versions,
		OS: obs.OS.ID, OSVersion: obs.OS.VersionID, Pending: pkgkit.Pending(req),
	})
	if err != nil {
		return nil, pkgkit.NoVersion("framework", err, df.Block.DefRange)
	}
	why := []string{fmt.Sprintf("the package %s is not installed", df.Package)}
	action, code := plan.Create, plan.ReasonMissing
	var before map[string]string
	op := picked.Install(manager, pkgs)
	if installed {
		action, code = plan.Update, plan.ReasonVersionMismatch
		before = map[string]string{"package": df.Package + "=" + inst.Version}
		why = []string{fmt.Sprintf("the installed %s %s does not satisfy %q", df.Package, inst.Version, df.Versions.String())}
		op.AllowDowngrade = picked.Downgrades(manager, inst.Version)
	}
	why = append(why, fmt.Sprintf("installs the distribution's %s %s for the system's Python", df.Package, pkgkit.ShownVersion(picked.Version)))
	return &plan.Step{
		Address:    df.Address,
		Action:     action,
		Before:     before,
		After:      map[string]string{"package": df.Package + "=" + pkgkit.ShownVersion(picked.Version), "source": string(spec.SourceDistro)},
		Reason:     picked.Reason(why),
		ReasonCode: code,
		Operations: []plan.Operation{{Kind: plan.OpPackages, Packages: op}},
		DependsOn:  pkgkit.Deps(req),
	}, nil
}

// reinstallPip is the step -replace plans for a pip framework that
// matches the spec: the installed version installed again over itself
// (pip install --force-reinstall --no-deps), which rewrites its files and
// leaves what it depends on as it is. Nil when it is not installed, which
// the planner reports.
func reinstallPip(obs *facts.Observation, df *planner.DesiredFramework) *plan.Step {
	env := planEnvironment(obs, df)
	inst := planInstalled(env, df.Name)
	if inst == nil || df.Absent {
		return nil
	}
	where := df.Python
	python := df.Python
	if df.Venv != "" {
		where = "the venv " + df.Venv
		python = df.BasePython
	}
	op := &plan.PackagesOp{
		Manager:   plan.ManagerPip,
		Install:   []plan.PackagePin{{Name: df.Package, Version: inst.Version}},
		Python:    python,
		Venv:      df.Venv,
		IndexURL:  df.IndexURL,
		Reinstall: true,
	}
	shown := map[string]string{"version": inst.Version, "environment": where, "index_url": df.IndexURL}
	return &plan.Step{
		Address:    df.Address,
		Action:     plan.Replace,
		Before:     shown,
		After:      maps.Clone(shown),
		Reason:     repository.ReinstallReason(op, "in "+where+" from "+df.IndexURL+", without its dependencies"),
		ReasonCode: plan.ReasonReplaceRequested,
		Operations: []plan.Operation{{Kind: plan.OpPackages, Packages: op}},
		DependsOn:  []string{"driver"},
	}
}

// reinstallDistro is the step -replace plans for the distribution's
// framework package inst, which matches the spec.
func reinstallDistro(ctx context.Context, req *planner.Request, df *planner.DesiredFramework, inst facts.Package) (*plan.Step, *hcl.Diagnostic) {
	op := repository.Reinstall(req.Facts, req.Desired.Manager, []string{df.Package})
	if op == nil {
		return nil, nil
	}
	if diag := repository.Reinstallable(ctx, req.Candidates, df.Address, op, df.Block.DefRange); diag != nil {
		return nil, diag
	}
	shown := map[string]string{"package": df.Package + "=" + inst.Version, "source": string(spec.SourceDistro)}
	return &plan.Step{
		Address:    df.Address,
		Action:     plan.Replace,
		Before:     shown,
		After:      maps.Clone(shown),
		Reason:     repository.ReinstallReason(op),
		ReasonCode: plan.ReasonReplaceRequested,
		Operations: []plan.Operation{{Kind: plan.OpPackages, Packages: op}},
		DependsOn:  pkgkit.Deps(req),
	}, nil
}
