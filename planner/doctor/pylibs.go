package doctor

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuenv/gpuenv/planner/compat"
	"github.com/gpuenv/gpuenv/planner/facts"
)

// pythonLibraries judges, in each Python environment, the GPU libraries
// besides the frameworks and the GPU requirements the installed
// distributions do not meet.
func (d *doctor) pythonLibraries() {
	for _, env := range d.obs.Python {
		d.onnxruntime(env)
		d.cupy(env)
		d.jaxPluginVersions(env)
		d.requirements(env)
	}
}

// pipIn is the pip command of an environment.
func pipIn(env facts.PythonEnv) string {
	if env.Interpreter != "" {
		return env.Interpreter + " -m pip"
	}
	return "pip"
}

// onnxruntime: the CPU wheel (onnxruntime) and a GPU wheel
// (onnxruntime-gpu) install the same onnxruntime package directory, so
// whichever was installed last overwrote the other's files, and
// uninstalling either removes files both need. With the CPU wheel's
// files, only the CPU provider exists ("Specified provider
// 'CUDAExecutionProvider' is not in available provider names").
func (d *doctor) onnxruntime(env facts.PythonEnv) {
	var cpu, gpu []facts.PythonLibrary
	for _, l := range env.Libraries {
		if l.Name != "onnxruntime" {
			continue
		}
		switch l.Distribution {
		case "onnxruntime":
			cpu = append(cpu, l)
		case "onnxruntime-gpu":
			gpu = append(gpu, l)
		}
	}
	if len(cpu) == 0 || len(gpu) == 0 {
		return
	}
	c := Check{ID: "framework.onnxruntime:" + env.Interpreter, Group: GroupFrameworks}
	for _, l := range append(cpu, gpu...) {
		c.Evidence = append(c.Evidence, fmt.Sprintf("%s: %s %s", l.Location, l.Distribution, l.Version))
	}
	c.Status = Problem
	c.Summary = fmt.Sprintf("onnxruntime %s (CPU) and onnxruntime-gpu %s are both installed in %s: they share the onnxruntime package directory, so the files of whichever was installed last win, and with the CPU wheel's there is no CUDAExecutionProvider", cpu[0].Version, gpu[0].Version, env.Prefix)
	pip := pipIn(env)
	c.Fix = &Fix{Text: "Remove both, then install the GPU wheel alone (removing only the CPU wheel would delete files the GPU wheel shares):",
		Commands: []string{pip + " uninstall -y onnxruntime onnxruntime-gpu", pip + " install onnxruntime-gpu==" + gpu[0].Version}}
	d.add(c)
}

// cupy: CuPy's binary wheels are one per CUDA major (cupy-cuda11x,
// cupy-cuda12x); two installed at once share the cupy package (CuPy
// warns and the last one's files win), and one built for a CUDA newer
// than the driver runs fails at its first kernel.
func (d *doctor) cupy(env facts.PythonEnv) {
	var ls []facts.PythonLibrary
	for _, l := range env.Libraries {
		if l.Name == "cupy" {
			ls = append(ls, l)
		}
	}
	if len(ls) == 0 {
		return
	}
	c := Check{ID: "framework.cupy:" + env.Interpreter, Group: GroupFrameworks}
	for _, l := range ls {
		c.Evidence = append(c.Evidence, fmt.Sprintf("%s: %s %s", l.Location, l.Distribution, l.Version))
	}
	pip := pipIn(env)
	if len(ls) > 1 {
		var names []string
		for _, l := range ls {
			names = append(names, l.Distribution)
		}
		c.Status = Problem
		c.Summary = fmt.Sprintf("%d CuPy packages are installed in %s (%s): they share the cupy package directory and the files of whichever was installed last win", len(ls), env.Prefix, strings.Join(names, ", "))
		keep := d.cupyForDriver()
		c.Fix = &Fix{Text: "Remove them all and install the one for the CUDA major the driver runs:",
			Commands: []string{pip + " uninstall -y " + strings.Join(names, " "), pip + " install " + keep}}
		d.add(c)
		return
	}
	l := ls[0]
	drv, from := d.driverVersion()
	if l.CUDA == "" || drv.IsZero() {
		d.skip(c, fmt.Sprintf("%s %s: no CUDA major or no driver to judge it against", l.Distribution, l.Version))
		return
	}
	maxCUDA := compat.MaxCUDAForDriver(drv)
	major, err := strconv.ParseUint(l.CUDA, 10, 64)
	if maxCUDA.IsZero() || err != nil {
		d.skip(c, fmt.Sprintf("%s %s: the driver's CUDA is unknown", l.Distribution, l.Version))
		return
	}
	c.Evidence = append(c.Evidence, fmt.Sprintf("%s: driver %s runs CUDA %s and older", from, drv, maxCUDA))
	if major <= maxCUDA.Major() {
		c.Status, c.Summary = OK, fmt.Sprintf("%s %s is built for CUDA %d, which driver %s runs", l.Distribution, l.Version, major, drv)
		d.add(c)
		return
	}
	c.Status = Problem
	c.Summary = fmt.Sprintf("%s %s is built for CUDA %d, but driver %s runs CUDA %s at most: CuPy fails with cudaErrorInsufficientDriver", l.Distribution, l.Version, major, drv, maxCUDA)
	c.Fix = &Fix{Text: "Install the CuPy wheel for the driver's CUDA major, or upgrade the driver:",
		Commands: []string{pip + " uninstall -y " + l.Distribution, pip + " install " + d.cupyForDriver()}}
	d.add(c)
}

// cupyForDriver is the CuPy wheel for the CUDA major the driver runs.
func (d *doctor) cupyForDriver() string {
	drv, _ := d.driverVersion()
	if m := compat.MaxCUDAForDriver(drv); !m.IsZero() {
		return fmt.Sprintf("cupy-cuda%dx", m.Major())
	}
	return "cupy-cuda12x"
}

// jaxPluginVersions: JAX uses its CUDA plugin (jax-cuda12-plugin, with
// the PJRT plugin jax-cuda12-pjrt) only at jaxlib's own version; with
// another it says "JAX plugin jax_cuda12_plugin version X is installed,
// but it is not compatible with the installed jaxlib version Y, so it
// will not be used", and runs on the CPU.
func (d *doctor) jaxPluginVersions(env facts.PythonEnv) {
	for _, fw := range env.Frameworks {
		if fw.Name != "jax" || len(fw.Plugins) < 2 {
			continue
		}
		jaxlib := ""
		for _, p := range fw.Plugins {
			if path.Base(p.Path) == "jaxlib" {
				jaxlib = p.Version
			}
		}
		if jaxlib == "" {
			continue
		}
		c := Check{ID: "framework.jax-plugin:" + FrameworkID(env.Interpreter, fw.Name), Group: GroupFrameworks}
		c.Evidence = append(c.Evidence, fmt.Sprintf("%s: jaxlib %s", env.Prefix, jaxlib))
		var off []string
		var names []string
		for _, p := range fw.Plugins {
			base := path.Base(p.Path)
			if base == "jaxlib" || p.Version == "" {
				continue
			}
			name := pluginDistribution(p.Path)
			names = append(names, name)
			c.Evidence = append(c.Evidence, fmt.Sprintf("%s: %s %s", p.Path, name, p.Version))
			if publicVersion(p.Version) != publicVersion(jaxlib) {
				off = append(off, fmt.Sprintf("%s %s", name, p.Version))
			}
		}
		if len(names) == 0 {
			continue
		}
		if len(off) == 0 {
			c.Status, c.Summary = OK, fmt.Sprintf("JAX's CUDA plugins are at jaxlib's version %s", jaxlib)
			d.add(c)
			continue
		}
		c.Status = Problem
		c.Summary = fmt.Sprintf("%s differ from jaxlib %s: JAX does not use a plugin of another version and runs on the CPU", strings.Join(off, ", "), jaxlib)
		var pins []string
		for _, n := range names {
			pins = append(pins, n+"=="+publicVersion(jaxlib))
		}
		c.Fix = &Fix{Text: "Install the plugins at jaxlib's version:", Commands: []string{pipIn(env) + " install " + strings.Join(pins, " ")}}
		d.add(c)
	}
}

// pluginDistribution names the distribution of a JAX plugin directory:
// jax_cuda12_plugin is jax-cuda12-plugin, jax_plugins/xla_cuda12 is
// jax-cuda12-pjrt.
func pluginDistribution(p string) string {
	base := path.Base(p)
	if m, ok := strings.CutPrefix(base, "xla_cuda"); ok {
		return "jax-cuda" + m + "-pjrt"
	}
	return strings.ReplaceAll(base, "_", "-")
}

func publicVersion(v string) string {
	p, _, _ := strings.Cut(v, "+")
	return p
}

// requirements reports the GPU requirements of installed distributions
// that the environment does not meet, as pip check would. Two
// distributions pinning one library to different releases cannot share
// an environment: only one of them is satisfied, and in one process the
// first one imported loads the library (libcudnn.so.9 …) the other then
// gets too.
func (d *doctor) requirements(env facts.PythonEnv) {
	if len(env.Unmet) == 0 {
		return
	}
	c := Check{ID: "framework.requirements:" + env.Interpreter, Group: GroupFrameworks}
	var said []string
	byTarget := map[string][]facts.UnmetRequirement{}
	var targets []string
	for _, u := range env.Unmet {
		inst := "which is not installed"
		if u.Installed != "" {
			inst = "but " + u.Target + " " + u.Installed + " is installed"
		}
		c.Evidence = append(c.Evidence, fmt.Sprintf("%s: %s %s requires %s, %s", u.File, u.Distribution, u.Version, u.Requirement, inst))
		said = append(said, fmt.Sprintf("%s %s requires %s, %s", u.Distribution, u.Version, u.Requirement, inst))
		if _, ok := byTarget[u.Target]; !ok {
			targets = append(targets, u.Target)
		}
		byTarget[u.Target] = append(byTarget[u.Target], u)
	}
	c.Status = Problem
	c.Summary = "Installed packages need GPU libraries the environment does not have (as pip check says): " + strings.Join(said, "; ")
	// The other side of a conflict: distributions whose requirement on
	// the same library the installed release meets.
	var conflicts []string
	for _, t := range targets {
		for _, u := range byTarget[t] {
			for _, other := range u.InstalledFor {
				if e := fmt.Sprintf("%s %s (for %s)", t, u.Installed, other); u.Installed != "" && !slices.Contains(conflicts, e) {
					conflicts = append(conflicts, e)
				}
			}
		}
	}
	// Two distributions left unmet on one library pin it differently:
	// no one release satisfies both.
	for _, t := range targets {
		var who []string
		for _, u := range byTarget[t] {
			if !slices.Contains(who, u.Distribution) {
				who = append(who, u.Distribution)
			}
		}
		if len(who) > 1 {
			conflicts = append(conflicts, fmt.Sprintf("%s (required differently by %s)", t, strings.Join(who, " and ")))
		}
	}
	var cmds []string
	for _, u := range env.Unmet {
		cmds = append(cmds, fmt.Sprintf("%s install '%s'", pipIn(env), u.Requirement))
	}
	text := "Install what each requires"
	if len(conflicts) > 0 {
		text = fmt.Sprintf("No one release satisfies them all: %s. In one process the framework imported first loads its release of the library and the others run against it, so give them separate environments (a venv each), or choose releases of them that require the same one; otherwise, one at a time", strings.Join(conflicts, "; "))
	}
	c.Fix = &Fix{Text: text + ":", Commands: cmds}
	d.add(c)
}
