package doctor

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuenv/gpuenv/planner/compat"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/spec/version"
)

func (d *doctor) frameworks() {
	found := false
	for _, env := range d.obs.Python {
		for _, fw := range env.Frameworks {
			found = true
			d.framework(env, fw)
		}
	}
	if !found {
		d.skip(Check{ID: "framework", Group: GroupFrameworks}, "No PyTorch, TensorFlow or JAX found (name a virtual environment's interpreter with --python)")
	}
}

// FrameworkID is the suffix of the checks about one framework in one
// environment, as verify looks them up.
func FrameworkID(interpreter, name string) string { return interpreter + ":" + name }

func (d *doctor) framework(env facts.PythonEnv, fw facts.Framework) {
	subject := FrameworkID(env.Interpreter, fw.Name)
	what := fmt.Sprintf("%s %s in %s", fw.Name, fw.Version, env.Interpreter)
	base := []string{fmt.Sprintf("%s: %s %s", fw.Location, fw.Name, fw.Version) + buildText(fw)}
	check := func(id string) Check {
		return Check{ID: id + ":" + subject, Group: GroupFrameworks, Evidence: slices.Clone(base)}
	}
	if !d.hasGPU() {
		c := check("framework")
		d.skip(c, what+": no GPU to use")
		return
	}
	if fw.CPUOnly || fw.CUDA == "" {
		c := check("framework.cpu-only")
		c.Status = Problem
		c.Summary = what + " is a CPU-only build: it never uses the GPU"
		if d.obs.OS.Arch == "aarch64" && fw.Name == "pytorch" {
			c.Evidence = append(c.Evidence, "the root is aarch64, where PyPI's torch is a CPU-only build; CUDA wheels for aarch64 come from PyTorch's own indexes (torch_variants, aarch64 column)")
		}
		c.Fix = d.gpuBuildFix(env, fw)
		d.add(c)
		return
	}
	reported := false
	drv, from := d.driverVersion()
	cuda, err := version.Parse(fw.CUDA)
	if err == nil && !drv.IsZero() {
		c := check("framework.driver")
		c.Evidence = append(c.Evidence, fmt.Sprintf("%s: driver %s", from, drv))
		if len(cuda.Parts()) < 2 {
			// Only the major is known (JAX's plugins): judge by the driver
			// floor of that major.
			d.judgeCUDAMajor(&c, drv, fw, cuda.Major(), what)
		} else {
			d.judgeCUDA(&c, drv, cuda, fmt.Sprintf("%s (built for CUDA %s)", what, fw.CUDA))
		}
		if c.Status != OK {
			reported = true
			if c.Status == Problem {
				c.Fix = d.gpuBuildFix(env, fw)
				if c.Fix == nil {
					c.Fix = &Fix{}
				}
				if exact, _, _, err := compat.MinDriverForCUDA(cuda); err == nil && !exact.IsZero() {
					c.Fix.Text = strings.TrimSpace(c.Fix.Text + " Or upgrade the driver to " + exact.String() + " or newer.")
				}
			}
			d.add(c)
		}
	}
	if c, ok := d.frameworkArch(check("framework.arch"), fw, what); ok {
		reported = true
		c.Fix = d.gpuBuildFix(env, fw)
		d.add(c)
	}
	if fw.Name == "jax" && !d.sharesCuDNN(env) {
		if c, ok := d.jaxCuDNN(check("framework.cudnn"), env, fw, what); ok {
			reported = true
			d.add(c)
		}
	}
	if fw.Name == "tensorflow" {
		if c, ok := d.tensorflowLibraries(check("framework.libraries"), env, fw, what); ok {
			reported = true
			d.add(c)
		}
	}
	if !reported {
		c := check("framework")
		c.Status = OK
		c.Summary = fmt.Sprintf("%s is built for CUDA %s, which the driver runs on these GPUs", what, fw.CUDA)
		d.add(c)
	}
}

func buildText(fw facts.Framework) string {
	var parts []string
	if fw.CPUOnly || fw.CUDA == "" {
		parts = append(parts, "CPU-only build")
	} else {
		parts = append(parts, "built for CUDA "+fw.CUDA)
	}
	if fw.CuDNN != "" {
		parts = append(parts, "cuDNN "+fw.CuDNN)
	}
	if fw.Installer != "" {
		parts = append(parts, "installed by "+fw.Installer)
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// frameworkArch reports a GPU whose compute capability the build carries
// no code for. It returns false when every GPU is covered or the build's
// architectures are unknown.
func (d *doctor) frameworkArch(c Check, fw facts.Framework, what string) (Check, bool) {
	ccs := d.gpuCCs()
	if len(ccs) == 0 {
		return c, false
	}
	var missing []string
	for _, g := range ccs {
		cc, err := version.Parse(g.cc)
		if err != nil {
			continue
		}
		ok, how := true, ""
		switch {
		case len(fw.CUDAArchs) > 0:
			// The build's own files beat the release table: they hold
			// for builds the table does not know (a distribution's, Nix's,
			// one from source).
			ok = archsCover(fw.CUDAArchs, cc)
			if !ok {
				how = fmt.Sprintf("the build carries %s", strings.Join(fw.CUDAArchs, ", "))
			}
		case fw.Name == "pytorch":
			rel, err := version.Parse(fw.Version)
			if err != nil {
				continue
			}
			variant := fw.Variant
			if variant == "" {
				variant = torchVariantOf(rel, fw.CUDA)
			}
			if variant == "" {
				continue
			}
			if _, err := compat.TorchVariant(rel, variant); err != nil {
				continue
			}
			ok, how = compat.TorchVariantSupportsCC(rel, variant, cc)
		case fw.Name == "jax":
			row, ok2 := jaxPlugin(fw)
			if !ok2 || row.MinCC.IsZero() {
				continue
			}
			if cc.Compare(row.MinCC) < 0 {
				ok, how = false, fmt.Sprintf("JAX's CUDA %d plugin needs compute capability %s or newer (%s)", row.CUDAMajor, row.MinCC, row.Source)
			}
		default:
			continue
		}
		if !ok {
			missing = append(missing, fmt.Sprintf("compute capability %s (%s)", g.cc, strings.Join(g.gpus, ", ")))
			c.Evidence = append(c.Evidence, how)
			if fw.Name == "pytorch" {
				c.Evidence = append(c.Evidence, dropEvidence(cc)...)
			}
		}
	}
	if len(missing) == 0 {
		return c, false
	}
	c.Status = Problem
	c.Summary = fmt.Sprintf("%s carries no code for %s: \"no kernel image is available for execution on the device\"", what, strings.Join(missing, "; "))
	return c, true
}

// sharesCuDNN reports whether another CUDA framework shares env's cuDNN:
// then loader.cudnn judges the environment as a whole.
func (d *doctor) sharesCuDNN(env facts.PythonEnv) bool {
	n := 0
	for _, fw := range env.Frameworks {
		if !fw.CPUOnly && fw.CUDA != "" {
			n++
		}
	}
	return n > 1
}

// jaxCuDNN judges the cuDNN wheel of JAX's environment against the range
// its CUDA plugin was built for: an older minor fails at the first
// convolution ("Loaded runtime CuDNN library: 9.1.0 but source was
// compiled with: 9.8.0") and JAX's own check leaves it on the CPU.
func (d *doctor) jaxCuDNN(c Check, env facts.PythonEnv, fw facts.Framework, what string) (Check, bool) {
	row, ok := jaxPlugin(fw)
	if !ok || row.MinCuDNN.IsZero() || fw.CuDNN == "" {
		return c, false
	}
	have, err := version.Parse(fw.CuDNN)
	if err != nil {
		return c, false
	}
	c.Evidence = append(c.Evidence, fmt.Sprintf("the environment's nvidia-cudnn wheel: cuDNN %s", have),
		fmt.Sprintf("JAX %s's CUDA %d plugin needs cuDNN >= %s, < %s (%s)", fw.Version, row.CUDAMajor, row.MinCuDNN, row.MaxCuDNN, row.Source))
	tooNew := !row.MaxCuDNN.IsZero() && have.Compare(row.MaxCuDNN) >= 0
	if have.Compare(row.MinCuDNN) >= 0 && !tooNew {
		return c, false
	}
	c.Status = Problem
	if tooNew {
		c.Summary = fmt.Sprintf("%s was built for cuDNN below %s and the environment has %s: JAX falls back to the CPU", what, row.MaxCuDNN, have)
	} else {
		c.Summary = fmt.Sprintf("%s was built with cuDNN %s and the environment has %s: \"Loaded runtime CuDNN library: %s but source was compiled with: %s\", and JAX falls back to the CPU", what, row.MinCuDNN, have, have.Trunc(3), row.MinCuDNN.Trunc(3))
	}
	c.Fix = &Fix{Text: fmt.Sprintf("Install the cuDNN wheel JAX's plugin was built for into %s:", env.Interpreter),
		Commands: []string{fmt.Sprintf("%s -m pip install 'nvidia-cudnn-cu%d>=%s,<%s'", env.Interpreter, row.CUDAMajor, row.MinCuDNN, row.MaxCuDNN)}}
	return c, true
}

// dropEvidence says where a compute capability left the builds: the last
// CUDA release that targets it and the newest PyTorch wheel that carries
// code for it.
func dropEvidence(cc version.Version) []string {
	var out []string
	if a, ok := compat.CUDAArchFor(cc); ok && !a.LastCUDA.IsZero() {
		out = append(out, fmt.Sprintf("CUDA %s is the last CUDA release that builds for compute capability %s (%s)", a.LastCUDA, a.CC, a.Source))
	}
	last := ""
	for _, r := range compat.TorchReleases() {
		for _, pv := range r.Variants {
			if ok, _ := compat.TorchVariantSupportsCC(r.Release, pv.Variant, cc); ok {
				last = fmt.Sprintf("torch %s (%s, %s)", r.Release, pv.Variant, pv.Source)
			}
		}
	}
	if last == "" {
		out = append(out, fmt.Sprintf("no PyTorch wheel in gpuenv's tables (1.0 and later) carries code for compute capability %s", cc.Trunc(2)))
	} else {
		out = append(out, fmt.Sprintf("the newest PyTorch wheel with code for compute capability %s: %s", cc.Trunc(2), last))
	}
	return out
}

// torchVariantOf names the variant of a torch without a local version:
// torch.version.cuda says which CUDA it was built with (1.x wheels on
// PyPI carried no +cuXYZ), else the release's PyPI default applies.
func torchVariantOf(rel version.Version, cuda string) string {
	if cv, err := version.Parse(cuda); err == nil {
		name := compat.TorchVariantName(cv)
		if _, err := compat.TorchVariant(rel, name); err == nil {
			return name
		}
	}
	if r, err := compat.TorchRelease(rel); err == nil {
		return r.DefaultVariant
	}
	return ""
}

// judgeCUDAMajor judges a build known only by its CUDA major: JAX's
// plugin states its own driver floor; otherwise the major's
// minor-version compatibility floor applies.
func (d *doctor) judgeCUDAMajor(c *Check, drv version.Version, fw facts.Framework, major uint64, what string) {
	floor, src := version.Version{}, ""
	if row, ok := jaxPlugin(fw); ok && !row.MinDriver.IsZero() {
		floor, src = row.MinDriver, row.Source.String()
	} else if fam, ok := compat.CUDAFamilyFor(major); ok {
		floor, src = fam.MinorCompatMin, fam.Source.String()
	}
	if floor.IsZero() {
		c.Status, c.Summary = Skipped, fmt.Sprintf("%s: no known driver floor for CUDA %d", what, major)
		return
	}
	c.Evidence = append(c.Evidence, fmt.Sprintf("CUDA %d builds need driver %s or newer (%s)", major, floor, src))
	if drv.Compare(floor) < 0 {
		c.Status = Problem
		c.Summary = fmt.Sprintf("%s (built for CUDA %d) needs a newer driver than %s: %s or newer", what, major, drv, floor)
		return
	}
	c.Status = OK
	c.Summary = fmt.Sprintf("Driver %s runs %s (built for CUDA %d)", drv, what, major)
}

// jaxPlugin is the compatibility row of the CUDA plugin a JAX install
// uses, from the CUDA major its build or plugin names.
func jaxPlugin(fw facts.Framework) (compat.JAXCUDA, bool) {
	v, err := version.Parse(fw.Version)
	if err != nil {
		return compat.JAXCUDA{}, false
	}
	major := uint64(0)
	if cv, err := version.Parse(fw.CUDA); err == nil {
		major = cv.Major()
	}
	for _, p := range fw.Plugins {
		for _, m := range []uint64{11, 12, 13} {
			if strings.Contains(p.Path, fmt.Sprintf("cuda%d", m)) {
				major = m
			}
		}
	}
	if major == 0 {
		return compat.JAXCUDA{}, false
	}
	row, err := compat.JAXPlugin(v, major)
	return row, err == nil
}

// archsCover applies CUDA's rules to a build's architecture list ("sm_80",
// "compute_90"): machine code for X.y runs on X.z, z >= y; PTX compiles
// for any equal or newer capability.
func archsCover(archs []string, cc version.Version) bool {
	for _, a := range archs {
		kind, digits, ok := strings.Cut(a, "_")
		if !ok || len(digits) < 2 {
			continue
		}
		v, err := version.Parse(digits[:len(digits)-1] + "." + digits[len(digits)-1:])
		if err != nil {
			continue
		}
		switch kind {
		case "sm":
			if v.Major() == cc.Major() && v.Minor() <= cc.Minor() {
				return true
			}
		case "compute":
			if v.Compare(cc.Trunc(2)) <= 0 {
				return true
			}
		}
	}
	return false
}

// gpuBuildFix is the spec block that installs a GPU build of fw the
// driver runs, in fw's environment (or a new one for a distribution
// package).
func (d *doctor) gpuBuildFix(env facts.PythonEnv, fw facts.Framework) *Fix {
	drv, _ := d.driverVersion()
	where := fmt.Sprintf("  python  = %q", env.Interpreter)
	text := fmt.Sprintf("Install a CUDA build of %s in %s; with gpuenv:", fw.Name, env.Interpreter)
	if !env.Virtual || fw.Installer == "debian" || fw.Installer == "rpm" {
		where = fmt.Sprintf("  venv    = %q", "/opt/"+fw.Name)
		owner := "the system's Python"
		if !env.System {
			owner = env.Interpreter
		}
		// A CUDA build reaches here when it lacks the GPUs' code or
		// needs a newer driver: it has CUDA support, just not this one.
		lacks := "has no CUDA support"
		if fw.CUDA != "" && !fw.CPUOnly {
			lacks = "cannot run on these GPUs"
		}
		text = fmt.Sprintf("The %s build of %s %s; install a CUDA build with pip into a virtual environment; with gpuenv:", fw.Name, owner, lacks)
	}
	v, err := version.Parse(fw.Version)
	if err != nil {
		return &Fix{Text: text}
	}
	minor := v.Trunc(2).String()
	switch fw.Name {
	case "pytorch":
		// The newest variant the driver runs exactly, else the newest it
		// runs through minor-version compatibility (the wheels bring their
		// own CUDA runtime, which that covers).
		var best, compatible compat.PyTorchVariant
		if rel, err := compat.TorchRelease(v); err == nil {
			for _, pv := range rel.Variants {
				if !d.variantCoversGPUs(v, pv.Variant) || !d.wheelsForRoot(pv) {
					continue
				}
				if drv.IsZero() {
					best = pv
					continue
				}
				switch ok, how := compat.DriverSupportsCUDA(drv, pv.CUDA); {
				case ok && how == compat.HowExact:
					best = pv
				case ok:
					compatible = pv
				}
			}
		}
		if best.Variant == "" {
			best = compatible
		}
		if best.Variant == "" {
			rel, pv, ok := d.torchThatRuns()
			if !ok {
				return d.noTorchFix(text)
			}
			if r, err := compat.TorchRelease(rel); err == nil && r.IndexFlag == compat.FindLinks {
				return findLinksFix(text, minor, r, pv)
			}
			return &Fix{Text: fmt.Sprintf("%s no CUDA build of torch %s runs on this driver and GPU; torch %s from %s does:", text, minor, rel, pv.IndexURL()),
				Spec: fmt.Sprintf("framework \"pytorch\" {\n  version = \"%s.*\"\n%s\n  cuda    = %q\n}", rel, where, pv.CUDA.Trunc(2).String())}
		}
		return &Fix{Text: fmt.Sprintf("%s torch %s from %s:", strings.TrimSuffix(text, ":"), minor, best.IndexURL()), Spec: fmt.Sprintf("framework \"pytorch\" {\n  version = \"%s.*\"\n%s\n  cuda    = %q\n}", minor, where, best.CUDA.Trunc(2).String())}
	case "tensorflow":
		return &Fix{Text: fmt.Sprintf("Install TensorFlow's [and-cuda] extra in %s: it brings the CUDA and cuDNN libraries the build loads as pip wheels; with gpuenv:", env.Interpreter),
			Spec: fmt.Sprintf("framework \"tensorflow\" {\n  version = %q\n%s\n  extras  = [\"and-cuda\"]\n}", fw.Version, where)}
	case "jax":
		extra := "cuda12"
		if maxCUDA := compat.MaxCUDAForDriver(drv); !maxCUDA.IsZero() && maxCUDA.Major() >= 13 {
			if _, err := compat.JAXPlugin(v, 13); err == nil {
				extra = "cuda13"
			}
		}
		return &Fix{Text: text, Spec: fmt.Sprintf("framework \"jax\" {\n  version = %q\n%s\n  extras  = [%q]\n}", fw.Version, where, extra)}
	}
	return &Fix{Text: text}
}

// findLinksFix names a release older than PyTorch's per-variant indexes:
// pip finds its wheels, by local version, through the find-links page,
// which gpuenv's framework block (an index) cannot name.
func findLinksFix(text, minor string, r compat.PyTorchRelease, pv compat.PyTorchVariant) *Fix {
	patch := r.Patches[len(r.Patches)-1]
	return &Fix{
		Text: fmt.Sprintf("%s: no CUDA build of torch %s runs on this driver and GPU; torch %s (%s build, Python %s to %s) does. It predates PyTorch's wheel indexes: pip finds it through %s.",
			strings.TrimSuffix(text, "; with gpuenv:"), minor, patch, pv.Variant, r.PythonMin, r.PythonMax, compat.TorchFindLinksURL),
		Commands: []string{fmt.Sprintf("pip install torch==%s+%s -f %s", patch, pv.Variant, compat.TorchFindLinksURL)},
	}
}

// noTorchFix is the fix when no PyTorch build in the tables runs here:
// where a GPU's capability is in no wheel at all, a driver cannot help.
func (d *doctor) noTorchFix(text string) *Fix {
	var none []string
	for _, g := range d.gpuCCs() {
		cc, err := version.Parse(g.cc)
		if err != nil {
			continue
		}
		covered := false
		for _, r := range compat.TorchReleases() {
			for _, pv := range r.Variants {
				if ok, _ := compat.TorchVariantSupportsCC(r.Release, pv.Variant, cc); ok {
					covered = true
				}
			}
		}
		if !covered {
			none = append(none, fmt.Sprintf("%s (%s)", g.cc, strings.Join(g.gpus, ", ")))
		}
	}
	if len(none) > 0 {
		return &Fix{Text: fmt.Sprintf("No PyTorch wheel, of any release gpuenv's tables list, carries code for compute capability %s. Build PyTorch from source with TORCH_CUDA_ARCH_LIST naming that capability and a CUDA release that still targets it, or run on a newer GPU.", strings.Join(none, ", "))}
	}
	return &Fix{Text: text + " no CUDA build of torch in gpuenv's tables runs on this driver and GPU; upgrade the driver."}
}

// wheelsForRoot reports whether a variant's index has CUDA wheels for the
// root's architecture: on aarch64 (Grace, SBSA servers) only the indexes
// the tables mark do, and PyPI's torch there is a CPU-only build.
func (d *doctor) wheelsForRoot(pv compat.PyTorchVariant) bool {
	if d.obs.OS.Arch != "aarch64" {
		return true
	}
	return pv.AArch64 == "yes"
}

func (d *doctor) variantCoversGPUs(rel version.Version, variant string) bool {
	for _, g := range d.gpuCCs() {
		cc, err := version.Parse(g.cc)
		if err != nil {
			continue
		}
		if ok, _ := compat.TorchVariantSupportsCC(rel, variant, cc); !ok {
			return false
		}
	}
	return true
}

// tensorflowLibraries reports the CUDA and cuDNN libraries a TensorFlow
// build loads at import that the host lacks. TensorFlow, unlike PyTorch,
// brings them only with its [and-cuda] extra.
func (d *doctor) tensorflowLibraries(c Check, env facts.PythonEnv, fw facts.Framework, what string) (Check, bool) {
	var missing []string
	// wheel reports whether the environment has NVIDIA's wheel of lib
	// for the given major, as [and-cuda] installs it.
	wheel := func(lib, major string) bool {
		return slices.ContainsFunc(fw.Plugins, func(l facts.Library) bool {
			return path.Base(l.Path) == lib && strings.SplitN(l.Version, ".", 2)[0] == major
		})
	}
	if fw.CuDNN != "" {
		want := strings.SplitN(fw.CuDNN, ".", 2)[0]
		has := slices.ContainsFunc(d.obs.CuDNN.Installs, func(in facts.CuDNNInstall) bool {
			return strings.SplitN(in.Version, ".", 2)[0] == want
		}) || wheel("cudnn", want)
		if !has {
			missing = append(missing, fmt.Sprintf("cuDNN %s (libcudnn.so.%s)", want, want))
			var seen []string
			for _, in := range d.obs.CuDNN.Installs {
				seen = append(seen, in.Version)
			}
			if len(seen) == 0 {
				c.Evidence = append(c.Evidence, "no cuDNN in the package database, in the include directories or among the loader's libraries")
			} else {
				c.Evidence = append(c.Evidence, "cuDNN installed: "+strings.Join(seen, ", "))
			}
		}
	}
	if cv, err := version.Parse(fw.CUDA); err == nil {
		has := slices.ContainsFunc(d.obs.CUDA.Toolkits, func(tk facts.Toolkit) bool {
			v, ok := toolkitVersion(tk)
			return ok && v.Major() == cv.Major()
		}) || (wheel("cuda_runtime", strconv.FormatUint(cv.Major(), 10)) && wheel("cublas", strconv.FormatUint(cv.Major(), 10)))
		if !has {
			missing = append(missing, fmt.Sprintf("the CUDA %d libraries (libcudart.so.%d, libcublas.so.%d)", cv.Major(), cv.Major(), cv.Major()))
			c.Evidence = append(c.Evidence, fmt.Sprintf("no CUDA %d toolkit installed", cv.Major()))
		}
	}
	if len(missing) == 0 {
		return c, false
	}
	c.Status = Problem
	c.Summary = fmt.Sprintf("%s needs %s, which the host lacks: TensorFlow falls back to the CPU (\"Could not load dynamic library\")", what, strings.Join(missing, " and "))
	c.Fix = d.tensorflowLoaderFix(env, fw)
	return c, true
}

// torchThatRuns is the newest PyTorch release with a CUDA variant that
// the driver runs (exactly, else through minor-version compatibility) and
// that carries code for every GPU: the release and wheel index a fix
// names.
func (d *doctor) torchThatRuns() (version.Version, compat.PyTorchVariant, bool) {
	drv, _ := d.driverVersion()
	for _, r := range slices.Backward(compat.TorchReleases()) {
		var pick compat.PyTorchVariant
		for _, pv := range slices.Backward(r.Variants) {
			if !d.variantCoversGPUs(r.Release, pv.Variant) || !d.wheelsForRoot(pv) {
				continue
			}
			if !drv.IsZero() {
				if ok, _ := compat.DriverSupportsCUDA(drv, pv.CUDA); !ok {
					continue
				}
			}
			pick = pv
			break
		}
		if pick.Variant != "" {
			return r.Release, pick, true
		}
	}
	return version.Version{}, compat.PyTorchVariant{}, false
}
