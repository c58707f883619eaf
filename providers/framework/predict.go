package framework

import (
	"path"
	"slices"
	"strings"

	"github.com/gpuenv/gpuenv/planner/compat"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/host/pkgdb"
	"github.com/gpuenv/gpuenv/spec/version"
)

// predictedFrom is where a predicted framework is said to come from.
const predictedFrom = "the plan's framework step"

// predict is the Python environments once the steps' pip transactions
// are done. A PyTorch wheel pinned with its variant ("2.5.1+cu124",
// "2.5.1+cpu") is known: its CUDA release, or that it is a CPU-only
// build. Any other build a step installs is known only after apply: the
// framework it replaces is no longer judged, and nothing is said of the
// new one. A removal takes the framework away. A venv a step creates is
// a new environment. The distribution's package of a framework that
// gpuenv's tables know to be CPU-only (Debian 12's python3-torch) is that
// build, in the system's Python.
func predict(end *facts.Observation, steps []plan.Step) {
	var envs []facts.PythonEnv
	for _, s := range steps {
		if fw, ok := distroBuild(end, s); ok {
			if envs == nil {
				envs = cloneEnvs(end.Python)
			}
			i := slices.IndexFunc(envs, func(e facts.PythonEnv) bool { return e.Interpreter == systemPython })
			if i < 0 {
				envs = append(envs, facts.PythonEnv{Interpreter: systemPython, Frameworks: []facts.Framework{}})
				i = len(envs) - 1
			}
			env := &envs[i]
			env.Frameworks = append(slices.DeleteFunc(env.Frameworks, func(f facts.Framework) bool { return f.Name == fw.Name }), fw)
			continue
		}
		for _, op := range s.Operations {
			p := op.Packages
			if p == nil || p.Manager != plan.ManagerPip {
				continue
			}
			if envs == nil {
				envs = cloneEnvs(end.Python)
			}
			i := slices.IndexFunc(envs, func(e facts.PythonEnv) bool {
				return p.PipInto(e.Prefix, e.Interpreter)
			})
			if i < 0 {
				if p.Venv == "" {
					continue
				}
				envs = append(envs, facts.PythonEnv{Interpreter: path.Join(p.Venv, "bin", "python"), Prefix: p.Venv, Virtual: true, Frameworks: []facts.Framework{}})
				i = len(envs) - 1
			}
			env := &envs[i]
			for _, name := range p.Remove {
				env.Frameworks = slices.DeleteFunc(env.Frameworks, func(f facts.Framework) bool { return packageOf(f) == name })
			}
			for _, pin := range p.Install {
				env.Frameworks = slices.DeleteFunc(env.Frameworks, func(f facts.Framework) bool { return packageOf(f) == pin.Name })
				if fw, ok := pinnedTorch(env, pin); ok {
					env.Frameworks = append(env.Frameworks, fw)
				}
			}
		}
	}
	if envs != nil {
		end.Python = envs
	}
}

// cloneEnvs copies the environments and their frameworks, which a
// prediction changes, from the observation's.
func cloneEnvs(in []facts.PythonEnv) []facts.PythonEnv {
	envs := slices.Clone(in)
	for i := range envs {
		envs[i].Frameworks = slices.Clone(envs[i].Frameworks)
	}
	return envs
}

// distroBuild is the framework a step installing the distribution's
// package of it leaves in the system's Python, where the tables know
// that package to be CPU-only; its version is the package's upstream
// one.
func distroBuild(end *facts.Observation, s plan.Step) (facts.Framework, bool) {
	name, ok := strings.CutPrefix(s.Address, "framework.")
	if !ok || s.Action == plan.Delete || s.After["source"] != "distro" {
		return facts.Framework{}, false
	}
	row, ok := compat.DistroFramework(end.OS.ID, end.OS.VersionID, name)
	if !ok || !row.CPUOnly() {
		return facts.Framework{}, false
	}
	for _, op := range s.Operations {
		p := op.Packages
		if p == nil || len(p.Install) == 0 || p.Install[0].Name != row.Name {
			continue
		}
		fw := facts.Framework{Name: name, CPUOnly: true, Installer: end.OS.ID, Package: row.Name, Location: predictedFrom}
		if up, err := pkgdb.UpstreamVersion(string(p.Manager), p.Install[0].Version); err == nil {
			fw.Version = up.String()
		}
		return fw, true
	}
	return facts.Framework{}, false
}

// packageOf is the pip package a framework is installed from.
func packageOf(f facts.Framework) string {
	if f.Package != "" {
		return f.Package
	}
	switch f.Name {
	case PyTorch:
		return "torch"
	}
	return f.Name
}

// pinnedTorch is the PyTorch build a pin names by its variant: CPU-only
// for "+cpu", else the CUDA release (and bundled cuDNN) gpuenv's torch
// table gives the variant. A variant the table does not know is not
// predicted.
func pinnedTorch(env *facts.PythonEnv, pin plan.PackagePin) (facts.Framework, bool) {
	_, local, ok := strings.Cut(pin.Version, "+")
	if pin.Name != "torch" || !ok || !variant.MatchString(local) {
		return facts.Framework{}, false
	}
	fw := facts.Framework{Name: PyTorch, Version: pin.Version, Variant: local, Installer: "pip", Package: "torch", Location: predictedFrom}
	if len(env.SitePackages) > 0 {
		fw.Location = path.Join(env.SitePackages[0], "torch")
	}
	if local == "cpu" {
		fw.CPUOnly = true
		return fw, true
	}
	v, err := version.Parse(pin.Version)
	if err != nil {
		return facts.Framework{}, false
	}
	row, err := compat.TorchVariant(v, local)
	if err != nil || row.CUDA.IsZero() {
		return facts.Framework{}, false
	}
	fw.CUDA = row.CUDA.String()
	if !row.CuDNN.IsZero() {
		fw.CuDNN = row.CuDNN.String()
	}
	return fw, true
}
