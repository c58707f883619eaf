package environment

import "github.com/gpuenv/gpuenv/spec"

// Variables are the variables an environment block sets, as NAME and
// value pairs in the order gpuenv writes them: what a program started from
// a login shell, or by systemd, sees once the spec is applied.
func Variables(e *spec.Environment) [][2]string {
	if e == nil || e.IsAbsent() {
		return nil
	}
	return planVariables(e)
}
