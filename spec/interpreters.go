package spec

import (
	"path"
	"slices"
)

// Interpreters are the Python interpreters the spec's framework blocks
// name (python, or the venv's bin/python), each once, in the spec's
// order: the environments an observation must hold for the frameworks
// to be planned.
func (s *Spec) Interpreters() []string {
	var out []string
	for _, f := range s.Frameworks {
		var p string
		switch {
		case f.Python.Set:
			p = f.Python.Value
		case f.Venv.Set:
			p = path.Join(f.Venv.Value, "bin", "python")
		}
		if p != "" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}
