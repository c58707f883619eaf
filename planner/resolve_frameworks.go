package planner

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpuenv/gpuenv/planner/compat"
	"github.com/gpuenv/gpuenv/planner/doctor"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/spec"
	"github.com/gpuenv/gpuenv/spec/version"
)

// pipPackages are the pip distributions of each framework.
var pipPackages = map[spec.FrameworkName]string{
	spec.PyTorch:    "torch",
	spec.TensorFlow: "tensorflow",
	spec.JAX:        "jax",
}

// resolveFrameworks resolves every framework block to one exact build.
func (r *resolver) resolveFrameworks() {
	count := map[spec.FrameworkName]int{}
	for _, f := range r.spec.Frameworks {
		count[f.Name]++
	}
	for _, f := range r.spec.Frameworks {
		df := &DesiredFramework{
			Block:    f,
			Name:     f.Name,
			Address:  "framework." + string(f.Name),
			Absent:   f.IsAbsent(),
			Source:   f.Source.Or(spec.DefaultFrameworkSource),
			Versions: f.Version.Value,
			Extras:   slices.Clone(f.Extras.Value),
			Package:  pipPackages[f.Name],
		}
		if count[f.Name] > 1 {
			df.Address += "[" + environmentLabel(f) + "]"
		}
		switch {
		case f.Python.Set:
			df.Python = f.Python.Value
		case f.Venv.Set:
			df.Venv = f.Venv.Value
			df.Python = path.Join(f.Venv.Value, "bin", "python")
			df.BasePython = SystemPython
		}
		r.d.Frameworks = append(r.d.Frameworks, df)
		if df.Source == spec.SourceDistro {
			if !r.specOnly {
				r.distroFramework(df)
			}
			continue
		}
		if df.Absent {
			continue
		}
		df.IndexURL = f.IndexURL.Or(spec.DefaultIndexURL)
		switch f.Name {
		case spec.PyTorch:
			r.resolveTorch(df)
		case spec.TensorFlow:
			r.resolveTensorFlow(df)
		case spec.JAX:
			r.resolveJAX(df)
		}
	}
}

// environmentLabel names a framework's Python environment in an address.
func environmentLabel(f *spec.Framework) string {
	switch {
	case f.Source.Value == spec.SourceDistro:
		return string(spec.SourceDistro)
	case f.Python.Set:
		return f.Python.Value
	case f.Venv.Set:
		return f.Venv.Value
	}
	return ""
}

// pythonVersion is the Python the framework will run with, when the
// observation knows it: the environment's own, or for a venv still to be
// created, the system's.
func (r *resolver) pythonVersion(df *DesiredFramework) (version.Version, string) {
	var system *facts.PythonEnv
	for i, env := range r.obs.Python {
		if env.Version == "" {
			continue
		}
		if env.Interpreter == df.Python || (df.Venv != "" && env.Prefix == df.Venv) {
			v, err := version.Parse(env.Version)
			if err == nil {
				return mm(v), env.Interpreter
			}
		}
		if env.System && system == nil {
			system = &r.obs.Python[i]
		}
	}
	if df.Venv != "" && system != nil {
		if v, err := version.Parse(system.Version); err == nil {
			return mm(v), system.Interpreter
		}
	}
	return version.Version{}, ""
}

// driverFloor is the oldest driver that runs programs built with CUDA
// cuda: its family's minor-version compatibility minimum where there is
// one, else the release's own driver.
func driverFloor(cuda version.Version) (version.Version, compat.Source) {
	if f, ok := compat.CUDAFamilyFor(cuda.Major()); ok && !f.MinorCompatMin.IsZero() {
		return f.MinorCompatMin, f.Source
	}
	exact, _, row, err := compat.MinDriverForCUDA(cuda)
	if err != nil {
		return version.Version{}, compat.Source{}
	}
	return exact, row.Source
}

// driverAllows reports whether the driver the spec asks for (or, when it
// does not manage the driver, the installed one) can be floor or newer,
// and describes that driver for messages.
func (r *resolver) driverAllows(floor version.Version) (bool, string, bool) {
	if b := r.spec.Driver; b != nil && !b.IsAbsent() {
		return admitsFrom(b.Version.Value, floor), fmt.Sprintf("the driver block allows %s (%s)", b.Version.Value.Quoted(), at(b.Version.RangeOr(b.DefRange))), true
	}
	have, from := doctor.DriverVersion(r.obs)
	if have.IsZero() {
		return true, "", false
	}
	return have.Compare(floor) >= 0, fmt.Sprintf("the host's driver is %s (%s) and the spec does not manage the driver", have, from), false
}

type torchBuild struct {
	rel     compat.PyTorchRelease
	patch   version.Version
	variant compat.PyTorchVariant
}

func (t torchBuild) pin() version.Version {
	return version.MustParse(t.patch.String() + "+" + t.variant.Variant)
}

// describeTorch says which CUDA versions a set of builds is published
// for: "torch 2.5.1 is published for CUDA 11.8, 12.1 and 12.4".
func describeTorch(builds []torchBuild) string {
	newest := builds[len(builds)-1]
	var cudas []string
	for _, b := range builds {
		if b.patch.Equal(newest.patch) && !slices.Contains(cudas, b.variant.CUDA.String()) {
			cudas = append(cudas, b.variant.CUDA.String())
		}
	}
	return fmt.Sprintf("torch %s is published for CUDA %s (%s)", newest.patch, joinAnd(cudas), newest.rel.Source)
}

// resolveTorch picks the release, patch and CUDA wheel variant.
func (r *resolver) resolveTorch(df *DesiredFramework) {
	f := df.Block
	vsub := f.Version.RangeOr(f.DefRange)
	var builds []torchBuild
	for _, rel := range compat.TorchReleases() {
		for _, p := range rel.Patches {
			for _, v := range rel.Variants {
				b := torchBuild{rel: rel, patch: p, variant: v}
				if df.Versions.Check(b.pin()) {
					builds = append(builds, b)
				}
			}
		}
	}
	if len(builds) == 0 {
		rels := compat.TorchReleases()
		r.errorf(vsub, "Unknown torch version",
			"No torch CUDA build in gpuenv's tables matches %s; the tables know torch %s to %s.",
			df.Versions.Quoted(), rels[0].Release, rels[len(rels)-1].Release)
		return
	}
	keep := func(pred func(torchBuild) bool) []torchBuild {
		var out []torchBuild
		for _, b := range builds {
			if pred(b) {
				out = append(out, b)
			}
		}
		return out
	}

	// The CUDA the spec asks for: the framework's own attribute, else the
	// toolkit's line, so that the two agree.
	var wantCUDA version.Version
	var wantWhere hcl.Range
	if f.CUDA.Set {
		wantCUDA, wantWhere = mm(f.CUDA.Value), f.CUDA.Range
	} else if dc := r.d.CUDA; dc != nil && !dc.Absent && !dc.Minor.IsZero() {
		wantCUDA, wantWhere = dc.Minor, dc.Block.Version.RangeOr(dc.Block.DefRange)
	}
	if !wantCUDA.IsZero() {
		next := keep(func(b torchBuild) bool { return mm(b.variant.CUDA).Equal(wantCUDA) })
		if len(next) == 0 {
			r.errorf(vsub, "No torch build for CUDA "+wantCUDA.String(),
				"%s; the spec asks for CUDA %s (%s).", describeTorch(builds), wantCUDA, at(wantWhere))
			return
		}
		builds = next
	}

	for _, g := range r.d.GPUs {
		if g.CC.IsZero() {
			continue
		}
		next := keep(func(b torchBuild) bool {
			ok, _ := compat.TorchVariantSupportsCC(b.rel.Release, b.variant.Variant, g.CC)
			return ok
		})
		if len(next) == 0 {
			last := builds[len(builds)-1]
			_, why := compat.TorchVariantSupportsCC(last.rel.Release, last.variant.Variant, g.CC)
			r.errorf(vsub, "No torch build runs on the GPU",
				"The host has %s, and none of the torch builds the spec allows runs on it: %s.%s",
				g.Describe(), why, firstTorchFor(g.CC))
			return
		}
		builds = next
	}

	next := keep(func(b torchBuild) bool {
		floor, _ := driverFloor(b.variant.CUDA)
		ok, _, _ := r.driverAllows(floor)
		return ok
	})
	if len(next) == 0 {
		last := builds[len(builds)-1]
		floor, src := driverFloor(last.variant.CUDA)
		_, what, managed := r.driverAllows(floor)
		if managed {
			r.errorf(vsub, "Driver too old for torch",
				"torch %s+%s (CUDA %s) needs driver %s or newer (%s), and %s.",
				last.patch, last.variant.Variant, last.variant.CUDA, floor, src, what)
			return
		}
		r.warnf(vsub, "The installed driver is too old for torch",
			"torch %s+%s (CUDA %s) needs driver %s or newer (%s), and %s: the wheels will not find a GPU until the driver is upgraded.",
			last.patch, last.variant.Variant, last.variant.CUDA, floor, src, what)
	} else {
		builds = next
	}

	if py, interp := r.pythonVersion(df); !py.IsZero() {
		next := keep(func(b torchBuild) bool {
			return b.rel.PythonMin.Compare(py) <= 0 && py.Compare(b.rel.PythonMax) <= 0
		})
		if len(next) == 0 {
			last := builds[len(builds)-1]
			r.errorf(vsub, "No torch build for this Python",
				"torch %s supports Python %s to %s (%s); %s is Python %s.",
				last.rel.Release, last.rel.PythonMin, last.rel.PythonMax, last.rel.Source, interp, py)
			return
		}
		builds = next
	}

	pick := chooseTorch(builds)
	df.Version = pick.pin()
	if f.IndexURL.Set && strings.TrimSuffix(f.IndexURL.Value, "/") == spec.DefaultIndexURL && pick.variant.Variant == pick.rel.DefaultVariant {
		// PyPI serves the release's default build without a local
		// version label: torch==2.5.1, not 2.5.1+cu124.
		df.Version = pick.patch
	}
	df.Variant = pick.variant.Variant
	df.CUDA = pick.variant.CUDA
	if e, ok := df.Versions.Exact(); !ok || len(e.Parts()) < 3 {
		r.infer(df.Address, "version", pick.patch.String(), pick.rel.Source)
	}
	if !f.CUDA.Set {
		r.infer(df.Address, "cuda", pick.variant.CUDA.String(), pick.variant.Source)
	}
	if !f.IndexURL.Set {
		df.IndexURL = pick.variant.IndexURL()
		r.infer(df.Address, "index_url", df.IndexURL, pick.variant.Source)
	}
	floor, src := driverFloor(pick.variant.CUDA)
	if !floor.IsZero() {
		r.needs = append(r.needs, driverNeed{Exact: floor, Who: fmt.Sprintf("torch %s (CUDA %s)", df.Version, df.CUDA), Range: vsub, From: src})
	}
}

// chooseTorch prefers the newest release and patch, and within it the
// build plain pip gets from PyPI, else the newest stable one.
func chooseTorch(builds []torchBuild) torchBuild {
	newest := builds[len(builds)-1]
	var same []torchBuild
	for _, b := range builds {
		if b.rel.Release.Equal(newest.rel.Release) && b.patch.Equal(newest.patch) {
			same = append(same, b)
		}
	}
	for _, b := range same {
		if b.variant.Variant == b.rel.DefaultVariant {
			return b
		}
	}
	for i := len(same) - 1; i >= 0; i-- {
		if same[i].variant.Stable {
			return same[i]
		}
	}
	return same[len(same)-1]
}

// firstTorchFor names the oldest torch build that runs on a compute
// capability, as advice.
func firstTorchFor(cc version.Version) string {
	for _, rel := range compat.TorchReleases() {
		for _, v := range rel.Variants {
			if ok, _ := compat.TorchVariantSupportsCC(rel.Release, v.Variant, cc); ok {
				return fmt.Sprintf(" The first torch build for compute capability %s is torch %s with %s (%s).", mm(cc), rel.Release, v.Variant, v.Source)
			}
		}
	}
	return ""
}

// resolveTensorFlow picks the release and checks the CUDA and cuDNN it
// was built with against the system's, unless its wheels bring their own.
func (r *resolver) resolveTensorFlow(df *DesiredFramework) {
	f := df.Block
	vsub := f.Version.RangeOr(f.DefRange)
	var row compat.TensorFlowBuild
	pin := version.Version{}
	if e, ok := df.Versions.Exact(); ok && len(e.Parts()) >= 3 {
		b, err := compat.TensorFlowRelease(e)
		if err == nil {
			row, pin = b, e
		}
	} else {
		for _, b := range compat.TensorFlowReleases() {
			if df.Versions.Check(b.Release) {
				row, pin = b, b.Release
			}
		}
		if !pin.IsZero() {
			r.infer(df.Address, "version", pin.String(), row.Source)
		}
	}
	if pin.IsZero() {
		rows := compat.TensorFlowReleases()
		r.errorf(vsub, "Unknown TensorFlow version",
			"No TensorFlow release in gpuenv's tables matches %s; the tables know TensorFlow %s to %s.",
			df.Versions.Quoted(), rows[0].Release, rows[len(rows)-1].Release)
		return
	}
	df.Version = pin
	df.CUDA = row.CUDA
	built := fmt.Sprintf("TensorFlow %s was built and tested with CUDA %s and cuDNN %s (%s)", mm(row.Release), row.CUDA, row.CuDNN, row.Source)
	if py, interp := r.pythonVersion(df); !py.IsZero() && (py.Compare(row.PythonMin) < 0 || py.Compare(row.PythonMax) > 0) {
		r.errorf(vsub, "No TensorFlow build for this Python",
			"TensorFlow %s supports Python %s to %s (%s); %s is Python %s.", mm(row.Release), row.PythonMin, row.PythonMax, row.Source, interp, py)
	}
	floor, src := driverFloor(row.CUDA)
	if !floor.IsZero() {
		r.needs = append(r.needs, driverNeed{Exact: floor, Who: fmt.Sprintf("TensorFlow %s (CUDA %s)", pin, row.CUDA), Range: vsub, From: src})
	}
	if slices.Contains(df.Extras, "and-cuda") {
		return
	}
	df.NeedsCuDNN = row.CuDNN
	if cuda, why := r.toolkitCUDA(); !cuda.IsZero() {
		switch {
		case cuda.Major() != row.CUDA.Major():
			r.errorf(vsub, "TensorFlow needs another CUDA", "%s; %s.", built, why)
		case cuda.Compare(row.CUDA) < 0:
			r.warnf(vsub, "CUDA older than TensorFlow's",
				"%s; %s. TensorFlow may fail to load libraries of an older CUDA 12 release.", built, why)
		}
	} else if r.spec.CUDA == nil && !r.noHost {
		r.warnf(vsub, "TensorFlow will not find CUDA",
			"%s, and uses the system's CUDA libraries unless installed with the and-cuda extra; the host has no CUDA toolkit and the spec has no cuda block. Add one, or set extras = [\"and-cuda\"].", built)
	}
	cudnnMinor := fmt.Sprintf(">= %s, < %d", row.CuDNN, row.CuDNN.Major()+1)
	if dn := r.d.CuDNN; dn != nil && !dn.Absent {
		if _, ok := narrow(dn.Versions, cudnnMinor); !ok {
			r.errorf(vsub, "TensorFlow needs another cuDNN",
				"%s, and needs cuDNN %d.x at %s or newer; the cudnn block asks for %s (%s).",
				built, row.CuDNN.Major(), row.CuDNN, dn.Versions.Quoted(), at(dn.Block.Version.RangeOr(dn.Block.DefRange)))
		}
		return
	}
	if r.spec.CuDNN != nil || r.noHost {
		return
	}
	want := version.MustParseConstraint(cudnnMinor)
	var seen []string
	for _, in := range r.obs.CuDNN.Installs {
		v, err := version.Parse(in.Version)
		if err == nil && want.Check(v) {
			return
		}
		seen = append(seen, in.Version)
	}
	have := "the host has no cuDNN"
	if len(seen) > 0 {
		have = "the host has cuDNN " + strings.Join(seen, ", ")
	}
	r.warnf(vsub, "TensorFlow will not find cuDNN",
		"%s; %s and the spec has no cudnn block, so TensorFlow will run on the CPU only. Add a cudnn block, or set extras = [\"and-cuda\"] to install cuDNN from pip.", built, have)
}

// resolveJAX checks an exact JAX release against its CUDA plugin's needs.
func (r *resolver) resolveJAX(df *DesiredFramework) {
	f := df.Block
	vsub := f.Version.RangeOr(f.DefRange)
	e, ok := df.Versions.Exact()
	if !ok || len(e.Parts()) < 3 {
		r.errorf(vsub, "JAX version must be exact",
			"gpuenv's tables hold JAX's CUDA plugins, not every JAX release, and a plan pins the exact wheel: write the release, such as version = \"0.6.2\", instead of %s.", df.Versions.Quoted())
		return
	}
	df.Version = e
	plugins := compat.JAXPluginsFor(e)
	if len(plugins) == 0 {
		r.errorf(vsub, "No JAX CUDA plugin for this release",
			"jax %s is older than every CUDA plugin in gpuenv's tables (the first is for jax %s).", e, compat.JAXPlugins()[0].From)
		return
	}
	var majors []string
	for _, p := range plugins {
		majors = append(majors, fmt.Sprint(p.CUDAMajor))
	}
	var want uint64
	var wantWhy string
	switch {
	case f.CUDA.Set:
		want, wantWhy = f.CUDA.Value.Major(), fmt.Sprintf("the spec asks for CUDA %s (%s)", f.CUDA.Value, at(f.CUDA.Range))
	default:
		if cuda, why := r.toolkitCUDA(); !cuda.IsZero() {
			want, wantWhy = cuda.Major(), why
		}
	}
	var pick *compat.JAXCUDA
	for i := len(plugins) - 1; i >= 0; i-- {
		p := plugins[i]
		if want != 0 && p.CUDAMajor != want {
			continue
		}
		if want == 0 {
			if ok, _, _ := r.driverAllows(p.MinDriver); !ok {
				continue
			}
			if !r.gpusAtLeast(p.MinCC) {
				continue
			}
		}
		pick = &plugins[i]
		break
	}
	if pick == nil {
		if want != 0 {
			r.errorf(vsub, "No JAX CUDA plugin for this CUDA",
				"jax %s has CUDA plugins for CUDA %s (%s); %s.", e, joinAnd(majors), plugins[len(plugins)-1].Source, wantWhy)
		} else {
			r.errorf(vsub, "No JAX CUDA plugin for this host",
				"jax %s has CUDA plugins for CUDA %s (%s), and none fits the driver and GPUs of this spec and host.", e, joinAnd(majors), plugins[len(plugins)-1].Source)
		}
		return
	}
	df.CUDA = version.MustParse(fmt.Sprint(pick.CUDAMajor))
	if !f.CUDA.Set {
		r.infer(df.Address, "cuda", df.CUDA.String(), pick.Source)
	}
	for _, g := range r.d.GPUs {
		if !pick.MinCC.IsZero() && !g.CC.IsZero() && g.CC.Compare(pick.MinCC) < 0 {
			r.errorf(vsub, "JAX's CUDA plugin does not run on the GPU",
				"jax %s's CUDA %d plugin needs compute capability %s or newer (%s); the host has %s.", e, pick.CUDAMajor, pick.MinCC, pick.Source, g.Describe())
		}
	}
	if !f.Extras.Set {
		df.Extras = []string{pick.Extra}
		r.infer(df.Address, "extras", pick.Extra, pick.Source)
	}
	if slices.Contains(df.Extras, pick.LocalExtra) {
		df.NeedsCuDNN = pick.MinCuDNN
		if dn := r.d.CuDNN; dn != nil && !dn.Absent {
			if _, ok := narrow(dn.Versions, fmt.Sprintf(">= %s, < %s", pick.MinCuDNN, pick.MaxCuDNN)); !ok {
				r.errorf(vsub, "JAX needs another cuDNN",
					"jax %s with the %s extra uses the system's cuDNN and needs %s or newer, below %s (%s); the cudnn block asks for %s (%s).",
					e, pick.LocalExtra, pick.MinCuDNN, pick.MaxCuDNN, pick.Source, dn.Versions.Quoted(), at(dn.Block.Version.RangeOr(dn.Block.DefRange)))
			}
		}
	}
	r.needs = append(r.needs, driverNeed{Exact: pick.MinDriver, Who: fmt.Sprintf("jax %s (CUDA %d plugin)", e, pick.CUDAMajor), Range: vsub, From: pick.Source})
}

// gpusAtLeast reports whether every GPU of known capability has at least
// cc; a zero cc is no floor.
func (r *resolver) gpusAtLeast(cc version.Version) bool {
	if cc.IsZero() {
		return true
	}
	for _, g := range r.d.GPUs {
		if !g.CC.IsZero() && g.CC.Compare(cc) < 0 {
			return false
		}
	}
	return true
}

// distroFramework resolves a framework from the distribution's archive.
func (r *resolver) distroFramework(df *DesiredFramework) {
	f := df.Block
	rows := r.os.rowsFor(compat.RepoDistro, string(f.Name))
	if len(rows) == 0 {
		r.errorf(f.Source.RangeOr(f.DefRange), "Framework not in the distribution's archive",
			"gpuenv knows no %s package in %s's own archive. Use source = \"pip\" with a venv.", f.Name, r.os.Title)
		return
	}
	row := rows[0]
	df.Package = row.Name
	if df.Absent {
		return
	}
	if row.CPUOnly() && !doctor.HasGPU(r.obs) {
		// Where there is a GPU, doctor's framework.cpu-only judges the
		// build the plan leaves (the end state predicts it); without
		// one, as on a machine that builds an image, only the table
		// can say that the spec chose a build that never uses one.
		r.warnf(f.DefRange, "The distribution's "+row.Name+" does not use the GPU",
			"%s's %s is a CPU-only build (%s): programs importing it will not see a GPU. Use source = \"pip\" with a venv for a CUDA build.", r.os.Title, row.Name, row.Source)
	}
	if df.Versions.IsZero() {
		return
	}
	seen := compat.DistroPackages(r.os.ID, r.os.Version, row.Name)
	if len(seen) == 0 {
		return
	}
	var have []string
	for _, p := range seen {
		v, err := version.FromDebian(p.Version)
		if err != nil {
			continue
		}
		if df.Versions.Check(v) {
			return
		}
		have = append(have, v.String())
	}
	r.errorf(f.Version.RangeOr(f.DefRange), "Framework version not in the distribution's archive",
		"%s's archive has %s %s (%s); the spec asks for %s.", r.os.Title, row.Name, joinAnd(have), seen[len(seen)-1].Source, df.Versions.Quoted())
}
