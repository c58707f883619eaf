package cuda

import (
	"path"
	"slices"

	"github.com/gpuenv/gpuenv/planner/compat/nvidiarepo"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/spec"
)

// predictedFrom is where a predicted toolkit's version comes from, as
// evidence says it.
const predictedFrom = "the plan's cuda step"

// predict is the toolkits once the steps are applied: the one the cuda
// step installs, at the path and release it shows, with its nvcc (every
// package gpuenv installs a toolkit from carries it), beside those
// already installed, which an upgrade to another release leaves in
// place; a removal takes away the toolkits of the packages it removes.
// NVIDIA's toolkit package makes /usr/local/cuda lead to its toolkit
// where the link is missing or leads to a toolkit removed
// (DefaultLink, the alternative planner/compat/nvidiarepo's sources
// show); otherwise it is left as observed.
func predict(end *facts.Observation, steps []plan.Step) {
	for _, s := range steps {
		if s.Address != "cuda" {
			continue
		}
		tks := slices.Clone(end.CUDA.Toolkits)
		for _, op := range s.Operations {
			if p := op.Packages; p != nil {
				tks = slices.DeleteFunc(tks, func(t facts.Toolkit) bool { return t.Package != "" && slices.Contains(p.Remove, t.Package) })
			}
		}
		if s.Action != plan.Delete && s.After["path"] != "" {
			tk := facts.Toolkit{Path: s.After["path"], Version: s.After["version"], VersionFrom: predictedFrom, Layout: LayoutNVIDIA}
			nvcc := path.Join(tk.Path, "bin", "nvcc")
			if s.After["source"] == string(spec.SourceDistro) {
				tk.Layout, nvcc = LayoutDistro, "/usr/bin/nvcc"
			}
			tk.Nvcc = nvcc
			for _, op := range s.Operations {
				if p := op.Packages; p != nil && len(p.Install) > 0 {
					tk.Package = p.Install[0].Name
				}
			}
			tks = slices.DeleteFunc(tks, func(t facts.Toolkit) bool { return t.Path == tk.Path })
			tks = append(tks, tk)
			if major, minor, ok := nvidiarepo.ToolkitRelease(tk.Package); ok && nvidiarepo.ToolkitDir(major, minor) == tk.Path &&
				!slices.ContainsFunc(tks, func(t facts.Toolkit) bool { return t.Path == end.CUDA.Default }) {
				end.CUDA.Default = tk.Path
			}
		}
		end.CUDA.Toolkits = tks
	}
}
