package spec

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/gpuenv/gpuenv/spec/version"
)

// body reads the attributes of one resource block.
type body struct {
	l     *loader
	block *hcl.Block
	attrs hcl.Attributes
}

func (l *loader) openBlock(b *hcl.Block, names ...string) *body {
	schema := &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "absent"}}}
	for _, n := range names {
		schema.Attributes = append(schema.Attributes, hcl.AttributeSchema{Name: n})
	}
	content, diags := b.Body.Content(schema)
	l.diags = append(l.diags, diags...)
	return &body{l: l, block: b, attrs: content.Attributes}
}

// value evaluates the attribute name and converts it to ty. ok is false when
// the attribute is not set, is null, or is wrong (which has been reported).
func (b *body) value(name string, ty cty.Type) (val cty.Value, attr *hcl.Attribute, ok bool) {
	attr, present := b.attrs[name]
	if !present {
		return cty.NilVal, nil, false
	}
	val, ok = b.l.eval(attr.Expr)
	if !ok || val.IsNull() {
		return cty.NilVal, attr, false
	}
	conv, err := convert.Convert(val, ty)
	if err != nil {
		b.typeError(attr, "%s", err)
		return cty.NilVal, attr, false
	}
	if ty.IsCollectionType() {
		i := 0
		for it := conv.ElementIterator(); it.Next(); i++ {
			if _, elem := it.Element(); elem.IsNull() {
				b.typeError(attr, "element %d is null", i)
				return cty.NilVal, attr, false
			}
		}
	}
	return conv, attr, true
}

// valueError reports a problem with an attribute's value. The expression
// and evaluation context let the diagnostic show the values of the
// variables the expression refers to, such as var.cuda as "12.5".
func (b *body) valueError(attr *hcl.Attribute, subject hcl.Range, summary, format string, args ...any) {
	b.l.diags = append(b.l.diags, &hcl.Diagnostic{
		Severity:    hcl.DiagError,
		Summary:     summary,
		Detail:      fmt.Sprintf(format, args...),
		Subject:     subject.Ptr(),
		Context:     attr.Range.Ptr(),
		Expression:  attr.Expr,
		EvalContext: b.l.ctx,
	})
}

func (b *body) typeError(attr *hcl.Attribute, format string, args ...any) {
	b.l.diags = append(b.l.diags, &hcl.Diagnostic{
		Severity:    hcl.DiagError,
		Summary:     "Incorrect attribute value type",
		Detail:      fmt.Sprintf("Inappropriate value for attribute %q: %s.", attr.Name, fmt.Sprintf(format, args...)),
		Subject:     attr.Expr.Range().Ptr(),
		Context:     attr.Range.Ptr(),
		Expression:  attr.Expr,
		EvalContext: b.l.ctx,
	})
}

func (b *body) boolean(name string) Attr[bool] {
	val, attr, ok := b.value(name, cty.Bool)
	if !ok {
		return Attr[bool]{}
	}
	return setAttr(val.True(), attr.Expr.Range())
}

func (b *body) str(name string) (Attr[string], *hcl.Attribute) {
	val, attr, ok := b.value(name, cty.String)
	if !ok {
		return Attr[string]{}, attr
	}
	return setAttr(val.AsString(), attr.Expr.Range()), attr
}

func (b *body) path(name string) Attr[string] {
	a, attr := b.str(name)
	if !a.Set {
		return a
	}
	if p := checkPath(a.Value); p != "" {
		b.valueError(attr, attr.Expr.Range(), "Invalid path", "%s", p)
		return Attr[string]{}
	}
	a.Value = cleanPath(a.Value)
	return a
}

func (b *body) url(name string, schemes ...string) Attr[string] {
	a, attr := b.str(name)
	if !a.Set {
		return a
	}
	if p := checkURL(a.Value, schemes...); p != "" {
		b.valueError(attr, attr.Expr.Range(), "Invalid URL", "%s", p)
		return Attr[string]{}
	}
	return a
}

// enum reads a string attribute that must be one of allowed.
func (b *body) enum(name string, allowed ...string) Attr[string] {
	a, attr := b.str(name)
	if !a.Set {
		return a
	}
	if !slices.Contains(allowed, a.Value) {
		b.valueError(attr, attr.Expr.Range(), "Invalid "+name+" value",
			"The allowed values for %s are %s; %q is not one of them.%s",
			name, joinList(quoteAll(allowed), "and"), a.Value, didYouMean(a.Value, allowed))
		return Attr[string]{}
	}
	return a
}

func (b *body) integer(name string, lo, hi int) Attr[int] {
	val, attr, ok := b.value(name, cty.Number)
	if !ok {
		return Attr[int]{}
	}
	bf := val.AsBigFloat()
	if !bf.IsInt() {
		b.typeError(attr, "a whole number is required")
		return Attr[int]{}
	}
	n, _ := bf.Int64()
	if n < int64(lo) || n > int64(hi) || n == math.MinInt64 {
		b.valueError(attr, attr.Expr.Range(), "Invalid "+name+" value", "The %s must be between %d and %d.", name, lo, hi)
		return Attr[int]{}
	}
	return setAttr(int(n), attr.Expr.Range())
}

// list reads a list of strings, checking each element with check, which
// returns a diagnostic Detail for a bad element. Diagnostics about an
// element point at the element when the list is written out literally.
func (b *body) list(name, summary string, check func(string) string) (Attr[[]string], []hcl.Range) {
	val, attr, ok := b.value(name, cty.List(cty.String))
	if !ok {
		return Attr[[]string]{}, nil
	}
	items := make([]string, 0, val.LengthInt())
	for it := val.ElementIterator(); it.Next(); {
		_, e := it.Element()
		items = append(items, e.AsString())
	}
	ranges := elemRanges(attr.Expr, len(items))
	good := true
	if check != nil {
		for i, s := range items {
			if p := check(s); p != "" {
				b.valueError(attr, ranges[i], summary, "%s", p)
				good = false
			}
		}
	}
	if !good {
		return Attr[[]string]{}, ranges
	}
	return setAttr(items, attr.Expr.Range()), ranges
}

func elemRanges(expr hcl.Expression, n int) []hcl.Range {
	ranges := make([]hcl.Range, n)
	exprs, diags := hcl.ExprList(expr)
	for i := range ranges {
		if !diags.HasErrors() && len(exprs) == n {
			ranges[i] = exprs[i].Range()
		} else {
			ranges[i] = expr.Range()
		}
	}
	return ranges
}

// versionText reads a string attribute holding a version or constraint.
// HCL would read an unquoted 12.10 as the number 12.1, so numbers are
// refused rather than converted.
func (b *body) versionText(name string) (string, *hcl.Attribute, bool) {
	attr, present := b.attrs[name]
	if !present {
		return "", nil, false
	}
	val, ok := b.l.eval(attr.Expr)
	if !ok || val.IsNull() {
		return "", attr, false
	}
	if val.Type() == cty.Number {
		written := string(attr.Expr.Range().SliceBytes(b.l.parser.Sources()[attr.Expr.Range().Filename]))
		if written == "" {
			written = val.AsBigFloat().Text('f', -1)
		}
		b.typeError(attr, "a string is required. Write versions in quotes, such as %q: HCL reads an unquoted version as a number, and the number 12.10 is 12.1", written)
		return "", attr, false
	}
	conv, err := convert.Convert(val, cty.String)
	if err != nil {
		b.typeError(attr, "%s", err)
		return "", attr, false
	}
	s := conv.AsString()
	if p := checkVersionText(s); p != "" {
		b.valueError(attr, attr.Expr.Range(), "Invalid version", "%s", p)
		return "", attr, false
	}
	return s, attr, true
}

func (b *body) constraint(name string) Attr[version.Constraint] {
	s, attr, ok := b.versionText(name)
	if !ok {
		return Attr[version.Constraint]{}
	}
	rng := attr.Expr.Range()
	c, err := version.ParseConstraint(s)
	if err != nil {
		b.valueError(attr, rng, "Invalid version constraint",
			"%q is not a valid version or version constraint: %s. Write an exact version such as \"535.261.03\", a wildcard such as \"550.*\", or operators such as \">= 535, < 560\" or \"~12.4\".", s, strings.TrimPrefix(err.Error(), fmt.Sprintf("invalid constraint %q: ", s)))
		return Attr[version.Constraint]{}
	}
	if !c.Satisfiable() {
		b.valueError(attr, rng, "Unsatisfiable version constraint",
			"No version can satisfy %q: its bounds exclude each other. Check the comparison operators and the numbers.", s)
		return Attr[version.Constraint]{}
	}
	return setAttr(c, rng)
}

func (b *body) version(name string) Attr[version.Version] {
	s, attr, ok := b.versionText(name)
	if !ok {
		return Attr[version.Version]{}
	}
	rng := attr.Expr.Range()
	v, err := version.Parse(s)
	if err != nil {
		b.valueError(attr, rng, "Invalid version", "%q is not a valid version: %s.", s, strings.TrimPrefix(err.Error(), fmt.Sprintf("invalid version %q: ", s)))
		return Attr[version.Version]{}
	}
	return setAttr(v, rng)
}

// checkAbsent reports attributes that make no sense in a block with
// absent = true, which removes what the block describes. keep names the
// attributes that identify what to remove.
func (b *body) checkAbsent(absent Attr[bool], what string, keep ...string) {
	if !absent.Value {
		return
	}
	for _, a := range sortedAttrs(b.attrs) {
		if a.Name == "absent" || slices.Contains(keep, a.Name) {
			continue
		}
		b.l.errorf(a.NameRange.Ptr(), "Attribute not allowed with absent = true",
			"This %s block has absent = true, which removes %s, so %q has no meaning here. Remove %q, or remove absent = true to manage %s.",
			b.block.Type, what, a.Name, a.Name, what)
	}
}

func sortedAttrs(attrs hcl.Attributes) []*hcl.Attribute {
	list := make([]*hcl.Attribute, 0, len(attrs))
	for _, a := range attrs {
		list = append(list, a)
	}
	slices.SortFunc(list, func(a, b *hcl.Attribute) int { return a.Range.Start.Byte - b.Range.Start.Byte })
	return list
}

var (
	packageSources   = []string{string(SourceDistro), string(SourceNVIDIA)}
	frameworkSources = []string{string(SourcePip), string(SourceDistro)}
	frameworkNames   = []string{string(PyTorch), string(TensorFlow), string(JAX)}
	kernelModules    = []string{string(KernelModulesOpen), string(KernelModulesProprietary), string(KernelModulesNone)}
	deviceOrders     = []string{string(DeviceOrderPCIBusID), string(DeviceOrderFastestFirst)}
	computeModes     = []string{string(ComputeModeDefault), string(ComputeModeExclusiveProcess), string(ComputeModeProhibited)}
	engineNames      = []string{string(EngineDocker), string(EngineContainerd), string(EngineCRIO), string(EnginePodman)}
)

func enumAttr[T ~string](a Attr[string]) Attr[T] {
	return Attr[T]{Value: T(a.Value), Set: a.Set, Range: a.Range}
}

func (l *loader) decodeResources(blocks hcl.Blocks) {
	singletons := map[string]*hcl.Block{}
	frameworks := map[string]*Framework{}
	repos := map[string]*Repository{}
	groups := map[string]*Group{}
	devices := map[string]*Device{}
	migs := map[string]*MIG{}
	teams := map[string]*Team{}

	for _, blk := range blocks {
		switch blk.Type {
		case "driver", "cuda", "cudnn", "environment", "container_toolkit":
			if prev, ok := singletons[blk.Type]; ok {
				l.errorf(blk.DefRange.Ptr(), "Duplicate "+blk.Type+" block",
					"A spec may contain only one %s block; the first one is at %s.", blk.Type, prev.DefRange)
				continue
			}
			singletons[blk.Type] = blk
		}

		switch blk.Type {
		case "driver":
			l.spec.Driver = l.decodeDriver(blk)
		case "cuda":
			l.spec.CUDA = l.decodeCUDA(blk)
		case "cudnn":
			l.spec.CuDNN = l.decodeCuDNN(blk)
		case "environment":
			l.spec.Environment = l.decodeEnvironment(blk)
		case "container_toolkit":
			l.spec.ContainerToolkit = l.decodeContainerToolkit(blk)
		case "framework":
			f := l.decodeFramework(blk)
			if f == nil {
				continue
			}
			key := string(f.Name) + "\x00" + f.EnvironmentKey()
			if prev, ok := frameworks[key]; ok {
				l.errorf(blk.DefRange.Ptr(), "Duplicate framework block",
					"The framework %q for %s was already declared at %s. Each framework may appear once per Python environment.",
					f.Name, describeEnvironment(f), prev.DefRange)
				continue
			}
			frameworks[key] = f
			l.spec.Frameworks = append(l.spec.Frameworks, f)
		case "repository":
			r := l.decodeRepository(blk)
			if r == nil {
				continue
			}
			if prev, ok := repos[r.Name]; ok {
				l.errorf(blk.DefRange.Ptr(), "Duplicate repository block",
					"A repository named %q was already declared at %s. Repository names must be unique within a spec.", r.Name, prev.DefRange)
				continue
			}
			repos[r.Name] = r
			l.spec.Repositories = append(l.spec.Repositories, r)
		case "group":
			g := l.decodeGroup(blk)
			if g == nil {
				continue
			}
			if prev, ok := groups[g.Name]; ok {
				l.errorf(blk.DefRange.Ptr(), "Duplicate group block",
					"A group named %q was already declared at %s. Write all of a group's members in one group block.", g.Name, prev.DefRange)
				continue
			}
			groups[g.Name] = g
			l.spec.Groups = append(l.spec.Groups, g)
		case "device":
			d, key := l.decodeDevice(blk)
			if d == nil {
				continue
			}
			if prev, ok := devices[key]; ok {
				same := ""
				if prev.Selector != d.Selector {
					same = fmt.Sprintf(" (the same device as %q)", prev.Selector)
				}
				l.errorf(blk.DefRange.Ptr(), "Duplicate device block",
					"A device block for %q%s was already declared at %s. Write all settings for a device in one block.", d.Selector, same, prev.DefRange)
				continue
			}
			devices[key] = d
			l.spec.Devices = append(l.spec.Devices, d)
		case "team":
			t := l.decodeTeam(blk)
			if t == nil {
				continue
			}
			if prev, ok := teams[t.Group]; ok {
				l.errorf(blk.DefRange.Ptr(), "Duplicate team block",
					"A team of the group %q was already declared at %s. A group's members get one CUDA_VISIBLE_DEVICES: write the team's devices in one team block.", t.Group, prev.DefRange)
				continue
			}
			teams[t.Group] = t
			l.spec.Teams = append(l.spec.Teams, t)
		case "mig":
			m, key := l.decodeMIG(blk)
			if m == nil {
				continue
			}
			if prev, ok := migs[key]; ok {
				l.errorf(blk.DefRange.Ptr(), "Duplicate mig block",
					"A mig block for %q was already declared at %s. Write a GPU's whole layout in one block.", m.Selector, prev.DefRange)
				continue
			}
			migs[key] = m
			l.spec.MIG = append(l.spec.MIG, m)
		}
	}
}

func describeEnvironment(f *Framework) string {
	switch {
	case f.Source.Value == SourceDistro:
		return "the distribution's Python"
	case f.Python.Set:
		return "the interpreter " + f.Python.Value
	case f.Venv.Set:
		return "the virtual environment " + f.Venv.Value
	}
	return "the same Python environment"
}

func (l *loader) decodeDriver(blk *hcl.Block) *Driver {
	b := l.openBlock(blk, "version", "kernel_modules", "source", "persistence_mode", "blacklist_nouveau", "hold")
	d := &Driver{Block: Block{DefRange: blk.DefRange, Absent: b.boolean("absent")}}
	d.Version = b.constraint("version")
	d.KernelModules = enumAttr[KernelModules](b.enum("kernel_modules", kernelModules...))
	d.Source = enumAttr[Source](b.enum("source", packageSources...))
	d.PersistenceMode = b.boolean("persistence_mode")
	d.BlacklistNouveau = b.boolean("blacklist_nouveau")
	d.Hold = b.boolean("hold")
	b.checkAbsent(d.Absent, "the NVIDIA driver", "source")
	return d
}

func (l *loader) decodeCUDA(blk *hcl.Block) *CUDA {
	b := l.openBlock(blk, "version", "source", "path", "set_environment")
	c := &CUDA{Block: Block{DefRange: blk.DefRange, Absent: b.boolean("absent")}}
	c.Version = b.constraint("version")
	c.Source = enumAttr[Source](b.enum("source", packageSources...))
	c.Path = b.path("path")
	c.SetEnvironment = b.boolean("set_environment")
	b.checkAbsent(c.Absent, "the CUDA toolkit", "source", "path")
	return c
}

func (l *loader) decodeCuDNN(blk *hcl.Block) *CuDNN {
	b := l.openBlock(blk, "version", "source")
	c := &CuDNN{Block: Block{DefRange: blk.DefRange, Absent: b.boolean("absent")}}
	c.Version = b.constraint("version")
	c.Source = enumAttr[Source](b.enum("source", packageSources...))
	b.checkAbsent(c.Absent, "cuDNN", "source")
	return c
}

func (l *loader) decodeFramework(blk *hcl.Block) *Framework {
	b := l.openBlock(blk, "version", "source", "python", "venv", "cuda", "index_url", "extras")
	name := blk.Labels[0]
	f := &Framework{
		Block:     Block{DefRange: blk.DefRange, Absent: b.boolean("absent")},
		Name:      FrameworkName(name),
		NameRange: blk.LabelRanges[0],
	}
	known := slices.Contains(frameworkNames, name)
	if !known {
		l.errorf(blk.LabelRanges[0].Ptr(), "Unknown framework",
			"gpuenv manages the frameworks %s; %q is not one of them.%s",
			joinList(quoteAll(frameworkNames), "and"), name, didYouMean(name, frameworkNames))
	}
	f.Version = b.constraint("version")
	f.Source = enumAttr[Source](b.enum("source", frameworkSources...))
	f.Python = b.path("python")
	f.Venv = b.path("venv")
	f.CUDA = b.version("cuda")
	if v := f.CUDA.Value; f.CUDA.Set && (len(v.Parts()) < 2 || v.Local() != "" || v.IsPrerelease()) {
		l.errorf(f.CUDA.Range.Ptr(), "Invalid CUDA version",
			"The cuda attribute names the CUDA release the framework build targets as major.minor, such as \"12.4\" for PyTorch's cu124 wheels; %q is not of that form.", v)
		f.CUDA = Attr[version.Version]{}
	}
	f.IndexURL = b.url("index_url", IndexURLSchemes...)
	f.Extras, _ = b.list("extras", "Invalid extra", checkExtra)
	b.checkAbsent(f.Absent, "the framework", "source", "python", "venv")

	pythonAttr, hasPython := b.attrs["python"]
	venvAttr, hasVenv := b.attrs["venv"]
	if f.Python.Set && f.Venv.Set {
		second := venvAttr
		if venvAttr.Range.Start.Byte < pythonAttr.Range.Start.Byte {
			second = pythonAttr
		}
		l.errorf(second.NameRange.Ptr(), "Conflicting framework attributes",
			"A framework block names either python, the interpreter of an existing virtual environment, or venv, a directory where gpuenv creates one; not both.")
	}
	if f.Source.Value == SourceDistro {
		for _, a := range sortedAttrs(b.attrs) {
			switch a.Name {
			case "python", "venv", "cuda", "index_url", "extras":
				l.errorf(a.NameRange.Ptr(), "Attribute not allowed with source = \"distro\"",
					"With source = \"distro\" the framework is the distribution's package (such as Debian's python3-torch), installed for the system's Python as the distribution built it, so %q has no meaning here. Use source = \"pip\" to install into a virtual environment.", a.Name)
			}
		}
	} else if !hasPython && !hasVenv {
		l.errorf(blk.DefRange.Ptr(), "Missing Python environment",
			"A framework installed with pip needs a virtual environment: set python to an existing virtual environment's interpreter, or venv to a directory where gpuenv creates one. The system's Python refuses pip installs (PEP 668).")
	}
	if !known {
		return nil
	}
	return f
}

func (l *loader) decodeRepository(blk *hcl.Block) *Repository {
	b := l.openBlock(blk, "url", "keyring", "key_fingerprint", "suites", "components", "priority")
	r := &Repository{
		Block:     Block{DefRange: blk.DefRange, Absent: b.boolean("absent")},
		Name:      blk.Labels[0],
		NameRange: blk.LabelRanges[0],
	}
	valid := true
	if p := checkRepositoryName(r.Name); p != "" {
		l.errorf(blk.LabelRanges[0].Ptr(), "Invalid repository name", "%s", p)
		valid = false
	}
	r.URL = b.url("url", "https", "http", "file")
	if keyring, attr := b.str("keyring"); keyring.Set {
		var p string
		if strings.Contains(keyring.Value, "://") {
			p = checkURL(keyring.Value, "https", "file")
		} else {
			p = checkPath(keyring.Value)
			keyring.Value = cleanPath(keyring.Value)
		}
		if p != "" {
			b.valueError(attr, attr.Expr.Range(), "Invalid keyring", "%s", p)
		} else {
			r.Keyring = keyring
		}
	}
	if fp, attr := b.str("key_fingerprint"); fp.Set {
		norm, p := checkFingerprint(fp.Value)
		switch {
		case p != "":
			b.valueError(attr, attr.Expr.Range(), "Invalid key fingerprint", "%s", p)
		case r.Absent.Value:
			// checkAbsent says that it has no place here.
		case !r.Keyring.Set || strings.Contains(r.Keyring.Value, "://"):
			if _, ok := b.attrs["keyring"]; !ok || r.Keyring.Set {
				l.errorf(attr.NameRange.Ptr(), "Key fingerprint without a keyring file",
					"key_fingerprint names the key that the repository's keyring must hold, and gpuenv checks it in the keyring file on the host: set keyring to that file's absolute path, such as \"/usr/share/keyrings/cuda-archive-keyring.gpg\". A keyring URL is fetched by the package manager, where gpuenv cannot check it.")
			}
		default:
			fp.Value = norm
			r.KeyFingerprint = fp
		}
	}
	var suiteRanges, compRanges []hcl.Range
	r.Suites, suiteRanges = b.list("suites", "Invalid suite", checkSuite)
	r.Components, compRanges = b.list("components", "Invalid component", checkComponent)
	r.Priority = b.integer("priority", math.MinInt16, math.MaxInt16)
	b.checkAbsent(r.Absent, "the repository")
	if !r.Absent.Value {
		if _, ok := b.attrs["url"]; !ok {
			l.errorf(blk.DefRange.Ptr(), "Missing required argument",
				"The argument \"url\" is required, but no definition was found.")
		}
		l.checkRepositoryLayout(r, suiteRanges, compRanges)
	}
	if !valid {
		return nil
	}
	return r
}

// checkRepositoryLayout checks suites against components: a flat
// repository (suite ending in "/", like NVIDIA's CUDA repository) has no
// components, and a distribution suite needs at least one.
func (l *loader) checkRepositoryLayout(r *Repository, suiteRanges, compRanges []hcl.Range) {
	suites := r.Suites.Or(DefaultSuites)
	if r.Suites.Set && len(suites) == 0 {
		l.errorf(r.Suites.Range.Ptr(), "Missing suite",
			"A repository needs at least one suite: a distribution such as \"bookworm\", or \"/\" for a flat repository.")
		return
	}
	flat, dist := -1, -1
	for i, s := range suites {
		if strings.HasSuffix(s, "/") {
			if flat < 0 {
				flat = i
			}
		} else if dist < 0 {
			dist = i
		}
	}
	switch {
	case flat >= 0 && dist >= 0:
		l.errorf(suiteRanges[max(flat, dist)].Ptr(), "Mixed repository layouts",
			"The suite %q names a flat repository and %q a distribution; one repository block describes one layout. Declare a second repository block for the other.",
			suites[flat], suites[dist])
	case flat >= 0 && len(r.Components.Value) > 0:
		l.errorf(compRanges[0].Ptr(), "Components in a flat repository",
			"The suite %q names a flat repository, which has no components. Remove components, or name a distribution suite such as \"bookworm\".", suites[flat])
	case dist >= 0 && r.Components.Set && len(r.Components.Value) == 0, dist >= 0 && !r.Components.Set:
		rng := r.Suites.Range
		if r.Components.Set {
			rng = r.Components.Range
		}
		l.errorf(rng.Ptr(), "Missing components",
			"The suite %q is a distribution suite, which needs at least one component, such as \"main\".", suites[dist])
	}
}

func (l *loader) decodeGroup(blk *hcl.Block) *Group {
	b := l.openBlock(blk, "members", "exclusive")
	g := &Group{
		Block:     Block{DefRange: blk.DefRange, Absent: b.boolean("absent")},
		Name:      blk.Labels[0],
		NameRange: blk.LabelRanges[0],
	}
	valid := true
	if p := checkAccountName("group", g.Name); p != "" {
		l.errorf(blk.LabelRanges[0].Ptr(), "Invalid group name", "%s", p)
		valid = false
	}
	members, ranges := b.list("members", "Invalid user name", func(s string) string { return checkAccountName("user", s) })
	if members.Set {
		seen := map[string]int{}
		for i, m := range members.Value {
			if j, dup := seen[m]; dup {
				l.errorf(ranges[i].Ptr(), "Duplicate group member",
					"The user %q is listed twice in members; the first is at %s.", m, ranges[j])
				continue
			}
			seen[m] = i
		}
	}
	g.Members = members
	g.Exclusive = b.boolean("exclusive")
	b.checkAbsent(g.Absent, "the group")
	if !valid {
		return nil
	}
	return g
}

// Variables that the environment block sets through its own attributes.
var reservedEnvVars = map[string]string{
	"CUDA_VISIBLE_DEVICES": "cuda_visible_devices",
	"CUDA_DEVICE_ORDER":    "cuda_device_order",
}

func (l *loader) decodeEnvironment(blk *hcl.Block) *Environment {
	b := l.openBlock(blk, "cuda_visible_devices", "cuda_device_order", "variables")
	e := &Environment{Block: Block{DefRange: blk.DefRange, Absent: b.boolean("absent")}}
	devices, _ := b.visibleDevices()
	e.CUDAVisibleDevices = devices
	e.CUDADeviceOrder = enumAttr[DeviceOrder](b.enum("cuda_device_order", deviceOrders...))
	e.Variables = b.variables("variables")
	b.checkAbsent(e.Absent, "the environment gpuenv wrote")
	return e
}

func (b *body) variables(name string) Attr[map[string]string] {
	val, attr, ok := b.value(name, cty.Map(cty.String))
	if !ok {
		return Attr[map[string]string]{}
	}
	// Diagnostics about one variable point at its key or value when the
	// map is written out literally.
	keyRanges := map[string]hcl.Range{}
	valueRanges := map[string]hcl.Range{}
	if pairs, diags := hcl.ExprMap(attr.Expr); !diags.HasErrors() {
		for _, p := range pairs {
			if k, diags := p.Key.Value(b.l.ctx); !diags.HasErrors() && k.Type() == cty.String && k.IsKnown() && !k.IsNull() {
				keyRanges[k.AsString()] = p.Key.Range()
				valueRanges[k.AsString()] = p.Value.Range()
			}
		}
	}
	rangeOf := func(m map[string]hcl.Range, k string) *hcl.Range {
		if r, ok := m[k]; ok {
			return r.Ptr()
		}
		return attr.Expr.Range().Ptr()
	}
	vars := map[string]string{}
	good := true
	for it := val.ElementIterator(); it.Next(); {
		k, v := it.Element()
		key, value := k.AsString(), v.AsString()
		if p := checkEnvName(key); p != "" {
			b.l.errorf(rangeOf(keyRanges, key), "Invalid environment variable name", "%s", p)
			good = false
			continue
		}
		if a, ok := reservedEnvVars[key]; ok {
			b.l.errorf(rangeOf(keyRanges, key), "Reserved environment variable",
				"%s is set with the %s attribute of the environment block, which checks its value; set it there instead.", key, a)
			good = false
			continue
		}
		if p := checkEnvValue(key, value); p != "" {
			b.l.errorf(rangeOf(valueRanges, key), "Invalid environment variable value", "%s", p)
			good = false
			continue
		}
		if key == "LD_LIBRARY_PATH" {
			b.l.warnf(rangeOf(keyRanges, key), "System-wide LD_LIBRARY_PATH",
				"A system-wide LD_LIBRARY_PATH overrides the libraries that pip wheels bring with them, such as PyTorch's own cuDNN. gpuenv adds library directories to the dynamic linker's configuration instead: set cuda { set_environment = true } for the CUDA toolkit.")
		}
		vars[key] = value
	}
	if !good {
		return Attr[map[string]string]{}
	}
	return setAttr(vars, attr.Expr.Range())
}

func (l *loader) decodeDevice(blk *hcl.Block) (*Device, string) {
	b := l.openBlock(blk, "compute_mode")
	d := &Device{
		Block:         Block{DefRange: blk.DefRange, Absent: b.boolean("absent")},
		Selector:      blk.Labels[0],
		SelectorRange: blk.LabelRanges[0],
	}
	key := d.Selector
	if key != AllDevices {
		key = deviceID(d.Selector, false)
	}
	d.ComputeMode = enumAttr[ComputeMode](b.enum("compute_mode", computeModes...))
	b.checkAbsent(d.Absent, "gpuenv's settings for the device")
	if key == "" {
		l.errorf(blk.LabelRanges[0].Ptr(), "Invalid device selector",
			"%q is not a device selector: write \"all\", a device index such as \"0\", or a GPU UUID such as \"GPU-5d5a1ee2-2f2a-4b33-9ac3-5b3e8f1b2c4d\", as nvidia-smi -L lists them.", d.Selector)
		return nil, ""
	}
	return d, key
}
