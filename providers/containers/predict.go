package containers

import (
	"path"
	"slices"
	"strings"

	"github.com/gpuenv/gpuenv/planner/compat"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/cdi"
	"github.com/gpuenv/gpuenv/spec/version"
)

// predict is what Observe would read once the steps are applied: the
// toolkit from the predicted package database (a version known only after
// apply is shown so), the driver version from the predicted driver, each
// engine's configuration and each CDI spec a step writes, read as Observe
// reads them, and a CDI spec that apply makes from the new driver's files
// (plan.GenerateCDI) as naming that driver. The GPUs and the driver's
// files stay as observed.
func predict(end *facts.Observation, steps []plan.Step) {
	c := end.Containers
	tk := toolkitInstalled(end.Packages)
	switch {
	case tk.Version == "" && slices.ContainsFunc(tk.Packages, func(p facts.Package) bool { return p.Version == "" }):
		tk.Version = plan.KnownAfterApply
	case tk.Version != "":
		// Where the hooks' executable is stays as observed: an upgrade
		// keeps it, and a toolkit not yet installed has none to read.
		tk.HookPath = c.Toolkit.HookPath
		if v, err := version.Parse(tk.Version); err == nil && tk.HookPath != "" {
			tk.Hooks = compat.ToolkitHooks(v)
		}
	}
	c.Toolkit = tk
	c.DriverVersion = driverVersion(end.Driver)
	cloned := false
	for _, s := range steps {
		for _, op := range s.Operations {
			f := op.File
			if f == nil || !cdiPath(f.Path) && !slices.ContainsFunc(c.Engines, func(e facts.EngineConfig) bool { return e.Path == f.Path }) {
				continue
			}
			if !cloned {
				// The observation's own slices are not to be changed.
				c.Engines, c.CDISpecs, cloned = slices.Clone(c.Engines), slices.Clone(c.CDISpecs), true
			}
			for i, e := range c.Engines {
				if e.Path != f.Path || f.Generate != "" {
					continue
				}
				next := facts.EngineConfig{Engine: e.Engine, Path: e.Path}
				if !f.Remove {
					next.Exists, next.Content, next.SHA256 = true, f.Content, host.SHA256Of([]byte(f.Content))
					next.Mode, next.UID, next.GID = f.Mode, f.UID, f.GID
					parseEngine(&next)
				}
				c.Engines[i] = next
			}
			if !cdiPath(f.Path) {
				continue
			}
			c.CDISpecs = slices.DeleteFunc(c.CDISpecs, func(s facts.CDISpec) bool { return s.Path == f.Path })
			switch {
			case f.Remove:
			case f.Generate == plan.GenerateCDI:
				c.CDISpecs = append(c.CDISpecs, facts.CDISpec{Path: f.Path, Kind: cdi.CDIKind, DriverVersion: c.DriverVersion})
			case f.Generate == plan.GenerateManagementCDI:
				c.CDISpecs = append(c.CDISpecs, facts.CDISpec{Path: f.Path, Kind: cdi.ManagementKind, DriverVersion: c.DriverVersion})
			case f.Generate == "":
				if s, ok := readCDI(nil, f.Path, []byte(f.Content)); ok {
					c.CDISpecs = append(c.CDISpecs, s)
				}
			}
		}
	}
	if cloned {
		slices.SortStableFunc(c.CDISpecs, func(a, b facts.CDISpec) int { return cdiOrder(a.Path) - cdiOrder(b.Path) })
		c.CDIInUse = cdiInUse(c.CDISpecs)
	}
	end.Containers = c
}

// cdiPath reports whether Observe reads a CDI spec at p.
func cdiPath(p string) bool {
	dir, ext := path.Dir(p), path.Ext(p)
	return (dir == cdi.StaticCDIDir || dir == cdi.DynamicCDIDir) && (ext == ".yaml" || ext == ".json")
}

// cdiOrder places a spec as Observe lists them: the static directory
// first.
func cdiOrder(p string) int {
	if strings.HasPrefix(p, cdi.DynamicCDIDir+"/") {
		return 1
	}
	return 0
}
