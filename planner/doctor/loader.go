package doctor

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/gpuenv/gpuenv/planner/compat"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/spec/version"
)

// GroupPrograms holds the checks of native programs named with
// doctor --program, after the host's own stages.
var GroupPrograms = Group{Number: 10, Name: "Programs"}

// The loader checks judge facts.Loader: which file ld.so takes for each
// soname a framework, the toolkit or a program needs.

// consumerID is the subject of a loader check.
func consumerID(c facts.LoaderResolution) string {
	if c.Kind == "framework" {
		return FrameworkID(c.Python, c.Framework)
	}
	return c.Subject
}

func (d *doctor) loaderConsumer(kind, python, framework, subject string) (facts.LoaderResolution, bool) {
	for _, c := range d.obs.Loader.Consumers {
		if c.Kind == kind && c.Python == python && c.Framework == framework && (subject == "" || c.Subject == subject) {
			return c, true
		}
	}
	return facts.LoaderResolution{}, false
}

// libText describes a resolved library for evidence.
func libText(l facts.ResolvedLibrary) string {
	if l.Path == "" {
		return l.Soname + ": not found"
	}
	return fmt.Sprintf("%s → %s%s (%s)", l.Soname, l.Path, versionText(l.Version), viaText(l.Via, l.From))
}

func candidateText(c facts.LibraryCandidate) string {
	return fmt.Sprintf("shadowed: %s%s (%s)", c.Path, versionText(c.Version), viaText(c.Via, c.From))
}

func versionText(v string) string {
	if v == "" {
		return ""
	}
	return " " + v
}

func viaText(via, from string) string {
	if from == "" {
		return via
	}
	return via + ", " + from
}

// own reports whether a candidate is the consumer's own copy: found
// through its RPATH or RUNPATH, or inside the toolkit it is.
func own(c facts.LoaderResolution, via, p, real string) bool {
	if via == "RPATH" || via == "RUNPATH" {
		return true
	}
	switch c.Kind {
	case "toolkit":
		return strings.HasPrefix(p, c.Subject+"/") || strings.HasPrefix(real, c.Subject+"/")
	case "framework":
		// The framework's own directory and the NVIDIA wheels beside it,
		// however the search reached them (TensorFlow before [and-cuda]
		// reached its wheels only through LD_LIBRARY_PATH).
		site := path.Dir(c.Subject)
		return strings.HasPrefix(p, c.Subject+"/") || strings.HasPrefix(p, site+"/nvidia/")
	}
	return false
}

// olderThan reports whether version a is below b, and whether both parse.
func olderThan(a, b string) (older, known bool) {
	va, err1 := version.Parse(a)
	vb, err2 := version.Parse(b)
	if err1 != nil || err2 != nil {
		return false, false
	}
	return va.Compare(vb) < 0, true
}

// undefinedSymbol is the error an older library of soname gives code
// built against version want, as users see it.
func undefinedSymbol(soname, want string) string {
	if strings.HasPrefix(soname, "libnvJitLink.so.") {
		if v, err := version.Parse(want); err == nil && len(v.Parts()) >= 2 {
			return fmt.Sprintf("undefined symbol: __nvJitLinkComplete_%d_%d, version %s", v.Major(), v.Minor(), soname)
		}
	}
	return "undefined symbol: …, version " + soname
}

// loaderChecks judges the consumers of kind in group.
func (d *doctor) loaderChecks(c facts.LoaderResolution, group Group, skipMissing bool) {
	id := consumerID(c)
	what := d.consumerName(c)
	base := []string{fmt.Sprintf("%s: needs %s (from %s)", c.Subject, strings.Join(c.Needed, ", "), c.NeededFrom)}
	reported := false

	shadow := Check{ID: "loader.shadowed:" + id, Group: group, Evidence: slices.Clone(base)}
	var bad, unsure []string
	var dirs []facts.ResolvedLibrary
	for _, l := range c.Libraries {
		if l.Path == "" || own(c, l.Via, l.Path, l.Real) {
			continue
		}
		for _, s := range l.Shadows {
			if !own(c, s.Via, s.Path, s.Real) {
				continue
			}
			older, known := olderThan(l.Version, s.Version)
			switch {
			case older:
				bad = append(bad, fmt.Sprintf("%s %s from %s hides %s %s (\"%s\")", l.Soname, l.Version, path.Dir(l.Path), path.Dir(s.Path), s.Version, undefinedSymbol(l.Soname, s.Version)))
			case !known && l.Via == "LD_LIBRARY_PATH":
				unsure = append(unsure, fmt.Sprintf("%s from %s hides the one in %s", l.Soname, path.Dir(l.Path), path.Dir(s.Path)))
			default:
				continue
			}
			shadow.Evidence = append(shadow.Evidence, libText(l), candidateText(s))
			dirs = append(dirs, l)
			break
		}
	}
	if len(bad)+len(unsure) > 0 {
		reported = true
		shadow.Status = Problem
		shadow.Summary = fmt.Sprintf("%s loads an older library than its own: %s", what, strings.Join(bad, "; "))
		if len(bad) == 0 {
			shadow.Status = Warning
			shadow.Summary = fmt.Sprintf("%s may load another library than its own: %s", what, strings.Join(unsure, "; "))
		}
		shadow.Fix = d.removeFromPathFix(dirs)
		d.add(shadow)
	}

	var missing, uncached []string
	miss := Check{ID: "loader.missing:" + id, Group: group, Evidence: slices.Clone(base)}
	var elsewhere []string
	for _, l := range c.Libraries {
		if l.Path != "" {
			continue
		}
		if l.Soname == "libcuda.so.1" && !d.driverExpected() {
			continue
		}
		miss.Evidence = append(miss.Evidence, libText(l))
		if i := slices.IndexFunc(l.Shadows, func(s facts.LibraryCandidate) bool { return s.Via == "ld.so.conf, not in ld.so.cache" }); i >= 0 {
			uncached = append(uncached, fmt.Sprintf("%s (in %s, which %s configures)", l.Soname, path.Dir(l.Shadows[i].Path), l.Shadows[i].From))
			continue
		}
		missing = append(missing, l.Soname)
		for _, e := range l.Elsewhere {
			miss.Evidence = append(miss.Evidence, "outside the search order: "+e)
			elsewhere = append(elsewhere, e)
		}
	}
	switch {
	case skipMissing || len(missing)+len(uncached) == 0:
	case len(uncached) > 0 && len(missing) == 0:
		reported = true
		miss.Status = Problem
		miss.Summary = fmt.Sprintf("%s cannot load %s: ldconfig has not run since the directory was configured, so /etc/ld.so.cache does not list it", what, strings.Join(uncached, ", "))
		miss.Fix = &Fix{Text: "Rebuild the loader's cache:", Commands: []string{"ldconfig"}}
		d.add(miss)
	default:
		reported = true
		miss.Status = Problem
		miss.Summary = d.missingSummary(c, what, missing, uncached)
		miss.Fix = d.missingFix(c, missing, elsewhere)
		d.add(miss)
	}
	if !reported {
		ok := Check{ID: "loader:" + id, Group: group, Status: OK, Evidence: base}
		for _, l := range c.Libraries {
			if l.Path != "" {
				ok.Evidence = append(ok.Evidence, libText(l))
			}
		}
		ok.Summary = fmt.Sprintf("%s loads its own libraries (%d resolved)", what, len(ok.Evidence)-1)
		d.add(ok)
	}
}

func (d *doctor) consumerName(c facts.LoaderResolution) string {
	switch c.Kind {
	case "framework":
		for _, env := range d.obs.Python {
			for _, fw := range env.Frameworks {
				if env.Interpreter == c.Python && fw.Name == c.Framework {
					return fmt.Sprintf("%s %s in %s", fw.Name, fw.Version, env.Interpreter)
				}
			}
		}
		return c.Framework + " in " + c.Python
	case "toolkit":
		return "Code built with the toolkit in " + c.Subject
	}
	return c.Subject
}

// driverExpected reports whether the driver's libcuda.so.1 should be on
// the root: a driver runs, or its libraries are installed.
func (d *doctor) driverExpected() bool {
	return d.moduleLoaded() || len(d.obs.Driver.Libraries) > 0 || d.obs.Driver.LibraryVersion != ""
}

func (d *doctor) missingSummary(c facts.LoaderResolution, what string, missing, uncached []string) string {
	s := fmt.Sprintf("%s needs %s, which no directory the loader searches provides", what, strings.Join(missing, ", "))
	if len(uncached) > 0 {
		s += "; and " + strings.Join(uncached, ", ") + " only after ldconfig runs"
	}
	switch {
	case c.Kind == "program":
		s += fmt.Sprintf(": \"error while loading shared libraries: %s: cannot open shared object file\"", missing[0])
	case c.Framework == "tensorflow":
		if row, ok := d.frameworkRow(c); ok && row.Load == "import" {
			s += fmt.Sprintf(": the import fails (\"ImportError: %s: cannot open shared object file\")", missing[0])
		} else {
			s += fmt.Sprintf(": TensorFlow runs on the CPU (\"Could not load dynamic library '%s'\")", missing[0])
		}
	case c.Framework != "":
		s += fmt.Sprintf(": the import fails (\"%s: cannot open shared object file\")", missing[0])
	}
	return s
}

func (d *doctor) frameworkRow(c facts.LoaderResolution) (compat.FrameworkLibraries, bool) {
	fw, ok := d.consumerFramework(c)
	if !ok {
		return compat.FrameworkLibraries{}, false
	}
	rel, err1 := version.Parse(fw.Version)
	cuda, err2 := version.Parse(fw.CUDA)
	if err1 != nil || err2 != nil {
		return compat.FrameworkLibraries{}, false
	}
	row, err := compat.FrameworkLibrariesFor(fw.Name, rel, cuda)
	return row, err == nil
}

func (d *doctor) consumerFramework(c facts.LoaderResolution) (facts.Framework, bool) {
	for _, env := range d.obs.Python {
		if env.Interpreter != c.Python {
			continue
		}
		for _, fw := range env.Frameworks {
			if fw.Name == c.Framework {
				return fw, true
			}
		}
	}
	return facts.Framework{}, false
}

// missingFix says how to provide missing libraries: for a program, the
// directory that already holds them, given to the loader; for
// TensorFlow, the CUDA release the build loads or its [and-cuda] wheels;
// for a wheel framework, its wheels reinstalled; the driver's libcuda
// from the driver of the running module.
func (d *doctor) missingFix(c facts.LoaderResolution, missing, elsewhere []string) *Fix {
	if slices.Equal(missing, []string{"libcuda.so.1"}) {
		if v := d.obs.Driver.ModuleVersion; v != "" {
			return &Fix{Text: "Install the driver's user-space libraries of the running module's version; with gpuenv:", Spec: fmt.Sprintf("driver {\n  version = %q\n}", v)}
		}
		return &Fix{Text: "Install the NVIDIA driver's user-space libraries (libcuda.so.1)."}
	}
	if c.Kind == "program" {
		if len(elsewhere) > 0 {
			dir := path.Dir(elsewhere[0])
			return &Fix{Text: fmt.Sprintf("%s has it, but only Python finds it there. Give the directory to the loader, after the system's, or install the library system-wide:", dir),
				Commands: []string{"echo " + dir + " > /etc/ld.so.conf.d/" + strings.ReplaceAll(strings.TrimPrefix(dir, "/"), "/", "-") + ".conf", "ldconfig"}}
		}
		return &Fix{Text: "Install the libraries the program was linked against (its package, or the CUDA release they belong to)."}
	}
	fw, ok := d.consumerFramework(c)
	if !ok {
		return nil
	}
	env := d.env(c.Python)
	for _, e := range elsewhere {
		for _, tk := range d.obs.CUDA.Toolkits {
			if strings.HasPrefix(e, tk.Path+"/") {
				return &Fix{Text: fmt.Sprintf("The toolkit in %s has them, but the loader is not configured for it: add its library directory to /etc/ld.so.conf.d; with gpuenv:", tk.Path),
					Spec: toolkitSpec(tk, "set_environment = true")}
			}
		}
	}
	if fw.Name == "tensorflow" {
		return d.tensorflowLoaderFix(env, fw)
	}
	f := d.gpuBuildFix(env, fw)
	if f != nil {
		f.Text = "Reinstall the framework with the NVIDIA wheels it depends on; " + f.Text
	}
	return f
}

func (d *doctor) env(python string) facts.PythonEnv {
	for _, e := range d.obs.Python {
		if e.Interpreter == python {
			return e
		}
	}
	return facts.PythonEnv{Interpreter: python}
}

// tensorflowLoaderFix names what provides the libraries a TensorFlow
// build loads: its [and-cuda] wheels where the release has them, else the
// CUDA release it was built with, or the release built with the CUDA the
// host has.
func (d *doctor) tensorflowLoaderFix(env facts.PythonEnv, fw facts.Framework) *Fix {
	rel, err := version.Parse(fw.Version)
	if err != nil {
		return d.gpuBuildFix(env, fw)
	}
	row, err := compat.TensorFlowRelease(rel)
	if err == nil && row.AndCUDA {
		return d.gpuBuildFix(env, fw)
	}
	cuda := fw.CUDA
	if err == nil {
		cuda = row.CUDA.Trunc(2).String()
	}
	text := fmt.Sprintf("Install CUDA %s, which tensorflow %s was built with; with gpuenv:", cuda, rel.Trunc(2))
	spec := fmt.Sprintf("cuda {\n  version = %q\n}", cuda)
	if tk := d.mainToolkit(); tk != nil {
		if tv, ok := toolkitVersion(*tk); ok {
			for _, b := range slices.Backward(compat.TensorFlowReleases()) {
				if b.CUDA.Trunc(2).Equal(tv.Trunc(2)) {
					text += fmt.Sprintf(" Or keep CUDA %s and install tensorflow %s, built with it:", tv.Trunc(2), b.Release.Trunc(2))
					spec += fmt.Sprintf("\n\nframework \"tensorflow\" {\n  version = \"%s.*\"\n  python  = %q\n}", b.Release.Trunc(2), env.Interpreter)
					break
				}
			}
		}
	}
	return &Fix{Text: text, Spec: spec}
}

// removeFromPathFix takes the directories of libs out of LD_LIBRARY_PATH,
// where they were set.
func (d *doctor) removeFromPathFix(libs []facts.ResolvedLibrary) *Fix {
	var where, remove []string
	for _, l := range libs {
		dir := path.Dir(l.Path)
		if !slices.Contains(remove, dir) {
			remove = append(remove, dir)
			w := l.From
			if w == "" {
				w = l.Via
			}
			where = append(where, fmt.Sprintf("%s (%s)", dir, w))
		}
	}
	f := &Fix{Text: "Remove " + strings.Join(where, ", ") + " from LD_LIBRARY_PATH: the framework's own libraries then load. A toolkit that other programs need belongs in /etc/ld.so.conf.d, which comes after them"}
	var keep []string
	session := false
	for _, sd := range d.obs.Loader.LibraryPath {
		if sd.From == "this session's environment" {
			session = true
		}
		if !slices.Contains(remove, sd.Dir) {
			keep = append(keep, sd.Dir)
		}
	}
	if session {
		if len(keep) == 0 {
			f.Commands = []string{"unset LD_LIBRARY_PATH"}
		} else {
			f.Commands = []string{"export LD_LIBRARY_PATH=" + strings.Join(keep, ":")}
		}
	}
	if len(d.obs.CUDA.Toolkits) > 0 {
		f.Text += "; with gpuenv:"
		f.Spec = "cuda {\n  set_environment = true\n}"
	} else {
		f.Text += "."
	}
	return f
}

// cudnnAgreement judges environments with several frameworks: they share
// one process's libcudnn, the first import's, and each needs its own
// major and at least its own minor.
func (d *doctor) cudnnAgreement(env facts.PythonEnv) {
	type need struct {
		fw   facts.Framework
		want version.Version
		from string
	}
	var needs []need
	for _, fw := range env.Frameworks {
		if fw.CPUOnly || fw.CUDA == "" {
			continue
		}
		rel, err := version.Parse(fw.Version)
		if err != nil {
			continue
		}
		switch fw.Name {
		case "tensorflow":
			if row, err := compat.TensorFlowRelease(rel); err == nil {
				needs = append(needs, need{fw, row.CuDNN, row.Source.String()})
			}
		case "pytorch":
			if fw.Variant == "" {
				continue
			}
			if pv, err := compat.TorchVariant(rel, fw.Variant); err == nil && !pv.CuDNN.IsZero() {
				needs = append(needs, need{fw, pv.CuDNN.Trunc(2), pv.Source.String()})
			}
		case "jax":
			if row, ok := jaxPlugin(fw); ok && !row.MinCuDNN.IsZero() {
				needs = append(needs, need{fw, row.MinCuDNN.Trunc(2), row.Source.String()})
			}
		}
	}
	if len(needs) < 2 {
		return
	}
	c := Check{ID: "loader.cudnn:" + env.Interpreter, Group: GroupFrameworks}
	have := ""
	for _, l := range d.obs.Loader.Consumers {
		if l.Python != env.Interpreter {
			continue
		}
		for _, r := range l.Libraries {
			if strings.HasPrefix(r.Soname, "libcudnn.so.") && r.Version != "" && have == "" {
				have = r.Version
				c.Evidence = append(c.Evidence, libText(r))
			}
		}
	}
	var losers []string
	for _, n := range needs {
		c.Evidence = append(c.Evidence, fmt.Sprintf("%s %s needs cuDNN %d.x, at least %s (%s)", n.fw.Name, n.fw.Version, n.want.Major(), n.want, n.from))
	}
	for i, a := range needs {
		for _, b := range needs[i+1:] {
			if a.want.Major() != b.want.Major() {
				losers = append(losers, fmt.Sprintf("%s needs cuDNN %d and %s cuDNN %d, and the environment's one nvidia-cudnn wheel holds one major", a.fw.Name, a.want.Major(), b.fw.Name, b.want.Major()))
			}
		}
	}
	if hv, err := version.Parse(have); err == nil && len(losers) == 0 {
		for _, n := range needs {
			if hv.Major() == n.want.Major() && hv.Trunc(2).Compare(n.want) < 0 {
				losers = append(losers, fmt.Sprintf("%s %s was built with cuDNN %s but the environment loads %s (\"Loaded runtime CuDNN library: %s but source was compiled with: %s\")", n.fw.Name, n.fw.Version, n.want, hv, hv.Trunc(3), n.want))
			}
		}
	}
	if len(losers) == 0 {
		c.Status, c.Summary = OK, "The frameworks in "+env.Interpreter+" agree on cuDNN"
		d.add(c)
		return
	}
	c.Status = Problem
	c.Summary = "The frameworks in " + env.Interpreter + " cannot share one cuDNN, and the first one imported decides which loads: " + strings.Join(losers, "; ")
	var blocks []string
	for _, n := range needs {
		blocks = append(blocks, fmt.Sprintf("framework %q {\n  version = %q\n  venv    = %q\n}", n.fw.Name, n.fw.Version, "/opt/"+n.fw.Name))
	}
	c.Fix = &Fix{Text: "Give each framework its own virtual environment, each with the cuDNN wheel it was built with; with gpuenv:", Spec: strings.Join(blocks, "\n\n")}
	d.add(c)
}

// driverLibrary judges the libcuda.so.1 programs load: a forward
// compatibility libcuda (cuda-compat) works only on data-center and
// professional GPUs and only over an older kernel driver.
func (d *doctor) driverLibrary() {
	var lib facts.ResolvedLibrary
	for _, c := range d.obs.Loader.Consumers {
		for _, l := range c.Libraries {
			if l.Soname == "libcuda.so.1" && l.Path != "" && lib.Path == "" {
				lib = l
			}
		}
	}
	real := lib.Real
	if real == "" {
		real = lib.Path
	}
	if lib.Path == "" || !strings.Contains(real, "/compat/") && !strings.Contains(lib.Path, "/compat/") {
		return
	}
	c := Check{ID: "loader.compat", Group: GroupCUDA, Evidence: []string{libText(lib)}}
	var why []string
	for _, g := range d.consumerGPUs() {
		c.Evidence = append(c.Evidence, g)
		if strings.Contains(g, "GeForce") || strings.Contains(g, "TITAN") {
			why = append(why, g+" does not support forward compatibility (\"forward compatibility was attempted on non supported HW\", CUDA error 804)")
		}
	}
	if mod := d.obs.Driver.ModuleVersion; mod != "" && lib.Version != "" {
		c.Evidence = append(c.Evidence, fmt.Sprintf("%s: kernel module %s", d.obs.Driver.ModuleVersionFrom, mod))
		if older, known := olderThan(lib.Version, mod); known && older {
			why = append(why, fmt.Sprintf("the compatibility libcuda %s is older than the kernel driver %s (\"system has unsupported display driver / cuda driver combination\", CUDA error 803)", lib.Version, mod))
		}
	}
	if len(why) == 0 {
		c.Status, c.Summary = OK, fmt.Sprintf("Programs load the forward-compatibility libcuda %s, which this GPU and driver support", lib.Version)
		d.add(c)
		return
	}
	c.Status = Problem
	c.Summary = "Programs load the forward-compatibility libcuda from " + path.Dir(lib.Path) + ", which cannot work here: " + strings.Join(why, "; ")
	c.Fix = &Fix{Text: fmt.Sprintf("Stop loading %s: remove it from LD_LIBRARY_PATH or /etc/ld.so.conf.d (or remove the cuda-compat package) so that the driver's own libcuda.so.1 loads; use a CUDA build the driver runs.", path.Dir(lib.Path)),
		Commands: []string{"ldconfig"}}
	d.add(c)
}

// consumerGPUs names the host's GPUs.
func (d *doctor) consumerGPUs() []string {
	var out []string
	for _, g := range d.obs.NVML.Devices {
		out = append(out, fmt.Sprintf("GPU %d (%s)", g.Index, g.Name))
	}
	if len(out) == 0 {
		for _, p := range d.obs.PCI {
			out = append(out, fmt.Sprintf("%s (%s)", p.Address, orUnknown(p.Model)))
		}
	}
	return out
}

// programs judges each native program named to doctor.
func (d *doctor) programs() {
	for _, c := range d.obs.Loader.Consumers {
		if c.Kind == "program" {
			d.loaderChecks(c, GroupPrograms, false)
		}
	}
}

// loaderToolkit judges the CUDA runtime that code built with the
// toolkit loads; a runtime the loader does not find at all is
// cuda.loader's finding.
func (d *doctor) loaderToolkit() {
	for _, c := range d.obs.Loader.Consumers {
		if c.Kind == "toolkit" {
			d.loaderChecks(c, GroupCUDA, true)
		}
	}
}

// loaderFrameworks judges each framework's libraries, then whether the
// frameworks of one environment agree on cuDNN.
func (d *doctor) loaderFrameworks() {
	for _, c := range d.obs.Loader.Consumers {
		if c.Kind != "framework" || !d.hasGPU() {
			continue
		}
		d.loaderChecks(c, GroupFrameworks, d.reportedLibraries(c))
	}
	for _, env := range d.obs.Python {
		d.cudnnAgreement(env)
	}
}

// reportedLibraries reports whether framework.libraries already named
// what c lacks.
func (d *doctor) reportedLibraries(c facts.LoaderResolution) bool {
	id := "framework.libraries:" + FrameworkID(c.Python, c.Framework)
	return slices.ContainsFunc(d.out, func(k Check) bool { return k.ID == id && k.Status == Problem })
}
