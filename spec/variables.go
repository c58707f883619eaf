package spec

import (
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

var variableSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "type"},
		{Name: "default"},
		{Name: "description"},
	},
}

func (l *loader) declareVariables(blocks hcl.Blocks) {
	l.vars = map[string]*Variable{}
	for _, b := range blocks {
		name := b.Labels[0]
		if !hclsyntax.ValidIdentifier(name) {
			l.errorf(b.LabelRanges[0].Ptr(), "Invalid variable name",
				"The name %q is not a valid variable name: a name starts with a letter and may contain letters, digits, underscores and hyphens.", name)
			continue
		}
		content, diags := b.Body.Content(variableSchema)
		l.diags = append(l.diags, diags...)
		v := &Variable{
			Name:     name,
			DefRange: b.DefRange,
			Type:     cty.DynamicPseudoType,
			Default:  cty.NilVal,
		}
		if prev, ok := l.vars[name]; ok {
			l.errorf(b.DefRange.Ptr(), "Duplicate variable declaration",
				"A variable named %q was already declared at %s. Variable names must be unique within a spec.", name, prev.DefRange)
			continue
		}
		l.vars[name] = v
		l.spec.Variables = append(l.spec.Variables, v)

		if attr, ok := content.Attributes["type"]; ok {
			ty, diags := typeexpr.TypeConstraint(attr.Expr)
			l.diags = append(l.diags, diags...)
			if diags.HasErrors() {
				// Without a type no value can be checked; the variable
				// counts as set so that it is not also reported missing.
				v.Default = cty.DynamicVal
				continue
			}
			v.Type = ty
		}
		if attr, ok := content.Attributes["description"]; ok {
			val, diags := attr.Expr.Value(nil)
			l.diags = append(l.diags, diags...)
			if !diags.HasErrors() {
				if s, err := convert.Convert(val, cty.String); err != nil || s.IsNull() {
					l.errorf(attr.Expr.Range().Ptr(), "Invalid variable description", "The description must be a string.")
				} else {
					v.Description = s.AsString()
				}
			}
		}
		if attr, ok := content.Attributes["default"]; ok {
			val, diags := attr.Expr.Value(nil)
			l.diags = append(l.diags, diags...)
			if diags.HasErrors() {
				// The variable then counts as set, so that it is not also
				// reported as missing a value.
				v.Default = cty.DynamicVal
				continue
			}
			if val.IsNull() {
				continue
			}
			conv, err := convert.Convert(val, v.Type)
			if err != nil {
				l.errorf(attr.Expr.Range().Ptr(), "Invalid default value for variable",
					"This default value is not compatible with the variable's type constraint: %s.", err)
				v.Default = cty.DynamicVal
				continue
			}
			v.Default = conv
		}
	}
}

// assignVariables gives every variable its value: the default, then the
// environment, var files and --var, each overriding the one before.
func (l *loader) assignVariables() {
	for _, v := range l.vars {
		if v.Default != cty.NilVal {
			v.Value = v.Default
			v.ValueFrom = FromDefault
		}
	}

	var env []string
	for _, kv := range l.opts.Environ {
		if strings.HasPrefix(kv, EnvPrefix) {
			env = append(env, kv)
		}
	}
	sort.Strings(env)
	for _, kv := range env {
		name, raw, _ := strings.Cut(strings.TrimPrefix(kv, EnvPrefix), "=")
		// Like Terraform, an environment variable for a variable the spec
		// does not declare is ignored: the environment may be shared by
		// several specs.
		if v, ok := l.vars[name]; ok {
			l.assignRaw(v, raw, FromEnvironment, "the environment variable "+EnvPrefix+name)
		}
	}

	varFiles := l.opts.VarFiles
	if l.opts.Saved != nil {
		varFiles = nil
		for _, f := range l.opts.Saved.VarFiles {
			varFiles = append(varFiles, f.Name)
		}
	}
	for _, path := range varFiles {
		l.readVarFile(path)
	}

	names := make([]string, 0, len(l.opts.Vars))
	for n := range l.opts.Vars {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		v, ok := l.vars[name]
		if !ok {
			l.errorf(nil, "Value for undeclared variable",
				"A variable named %q was assigned with --var, but the spec does not declare it. Declare it with a variable %q block, or remove the assignment.%s",
				name, name, didYouMean(name, l.varNames()))
			continue
		}
		l.assignRaw(v, l.opts.Vars[name], FromCommandLine, "--var "+name)
	}

	for _, v := range l.spec.Variables {
		if v.Value == cty.NilVal {
			l.errorf(v.DefRange.Ptr(), "No value for required variable",
				"The variable %q has no default, so it needs a value: pass --var %s=VALUE, set it in a --var-file, or set the environment variable %s%s.",
				v.Name, v.Name, EnvPrefix, v.Name)
			v.Value = cty.DynamicVal
		}
	}
}

func (l *loader) varNames() []string {
	names := make([]string, 0, len(l.vars))
	for _, v := range l.spec.Variables {
		names = append(names, v.Name)
	}
	return names
}

// assignRaw sets a variable from a string given outside any file. As in
// Terraform, a variable of a primitive type takes the text as it is;
// any other type reads it as an HCL expression, such as ["0", "1"].
func (l *loader) assignRaw(v *Variable, raw string, from ValueSource, where string) {
	var val cty.Value
	if v.Type == cty.DynamicPseudoType || v.Type.IsPrimitiveType() {
		val = cty.StringVal(raw)
	} else {
		name := "<value for var." + v.Name + ">"
		var expr hclsyntax.Expression
		var diags hcl.Diagnostics
		if d := checkNesting([]byte(raw), name, hcl.InitialPos); d != nil {
			diags = hcl.Diagnostics{d}
		} else {
			expr, diags = hclsyntax.ParseExpression([]byte(raw), name, hcl.InitialPos)
		}
		if !diags.HasErrors() {
			var more hcl.Diagnostics
			val, more = expr.Value(nil)
			diags = append(diags, more...)
		}
		if diags.HasErrors() {
			l.errorf(nil, "Invalid value for variable",
				"The value given by %s is not valid for the variable %q declared at %s: %s",
				where, v.Name, v.DefRange, diags[0].Detail)
			v.Value = cty.DynamicVal
			return
		}
	}
	l.assign(v, val, from, where, nil)
}

func (l *loader) assign(v *Variable, val cty.Value, from ValueSource, where string, subject *hcl.Range) {
	if val.IsNull() {
		return
	}
	conv, err := convert.Convert(val, v.Type)
	if err != nil {
		l.errorf(subject, "Invalid value for variable",
			"The value given by %s is not valid for the variable %q declared at %s: %s.",
			where, v.Name, v.DefRange, err)
		v.Value = cty.DynamicVal
		v.ValueFrom = from
		return
	}
	v.Value = conv
	v.ValueFrom = from
}

func (l *loader) readVarFile(path string) {
	src, err := l.read(path, true)
	if err != nil {
		l.errorf(nil, "Cannot read var file", "Reading %s: %s.", path, plainErr(err))
		return
	}
	if d := checkText(src, path); d != nil {
		l.diags = append(l.diags, d)
		return
	}
	if d := checkNesting(src, path, hcl.InitialPos); d != nil {
		l.diags = append(l.diags, d)
		return
	}
	f, diags := l.parser.ParseHCL(src, path)
	l.diags = append(l.diags, diags...)
	if diags.HasErrors() || f == nil {
		return
	}
	for _, a := range l.attributes(f.Body) {
		v, ok := l.vars[a.Name]
		if !ok {
			l.warnf(a.NameRange.Ptr(), "Value for undeclared variable",
				"The spec does not declare a variable named %q, so this value is ignored.%s",
				a.Name, didYouMean(a.Name, l.varNames()))
			continue
		}
		val, diags := a.Expr.Value(nil)
		l.diags = append(l.diags, diags...)
		if diags.HasErrors() {
			v.Value = cty.DynamicVal
			continue
		}
		l.assign(v, val, FromVarFile, "the var file "+path, a.Expr.Range().Ptr())
	}
}

// attributes returns a body's attributes in the order they are written, so
// that what is reported about them comes in that order too.
func (l *loader) attributes(body hcl.Body) []*hcl.Attribute {
	attrs, diags := body.JustAttributes()
	l.diags = append(l.diags, diags...)
	list := slices.Collect(maps.Values(attrs))
	slices.SortFunc(list, func(a, b *hcl.Attribute) int { return a.Range.Start.Byte - b.Range.Start.Byte })
	return list
}

func (l *loader) varObject() cty.Value {
	vals := make(map[string]cty.Value, len(l.vars))
	for name, v := range l.vars {
		vals[name] = v.Value
	}
	return cty.ObjectVal(vals)
}

func (l *loader) localObject() cty.Value {
	return cty.ObjectVal(l.spec.Locals)
}

// evalLocals evaluates every local, each after the locals it refers to.
func (l *loader) evalLocals(blocks hcl.Blocks) {
	l.localDefs = map[string]*hcl.Attribute{}
	var order []string
	for _, b := range blocks {
		for _, a := range l.attributes(b.Body) {
			if prev, ok := l.localDefs[a.Name]; ok {
				l.errorf(a.NameRange.Ptr(), "Duplicate local value definition",
					"A local value named %q was already defined at %s. Local value names must be unique within a spec.", a.Name, prev.Range)
				continue
			}
			l.localDefs[a.Name] = a
			order = append(order, a.Name)
		}
	}

	const (
		unvisited = iota
		visiting
		done
	)
	state := make(map[string]int, len(order))
	var stack []string
	var visit func(name string)
	visit = func(name string) {
		switch state[name] {
		case done:
			return
		case visiting:
			i := slices.Index(stack, name)
			cycle := append(slices.Clone(stack[i:]), name)
			refs := make([]string, len(cycle))
			for j, n := range cycle {
				refs[j] = "local." + n
			}
			a := l.localDefs[name]
			l.errorf(a.Expr.Range().Ptr(), "Cycle in local values",
				"The local values refer to each other in a cycle: %s. A local value cannot depend on itself.", strings.Join(refs, " → "))
			for _, n := range cycle {
				l.spec.Locals[n] = cty.DynamicVal
			}
			return
		}
		state[name] = visiting
		stack = append(stack, name)
		a := l.localDefs[name]
		for _, t := range a.Expr.Variables() {
			if t.RootName() != "local" || len(t) < 2 {
				continue
			}
			if step, ok := t[1].(hcl.TraverseAttr); ok {
				if _, ok := l.localDefs[step.Name]; ok {
					visit(step.Name)
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[name] = done
		if _, failed := l.spec.Locals[name]; failed {
			return
		}
		l.ctx.Variables["local"] = l.localObject()
		val, _ := l.eval(a.Expr)
		l.spec.Locals[name] = val
	}
	for _, name := range order {
		visit(name)
	}
	l.ctx.Variables["local"] = l.localObject()
}

// eval evaluates expr after checking that everything it refers to exists.
// ok is false when the value is unusable; the reason has then been reported
// already, here or where the value it depends on failed.
func (l *loader) eval(expr hcl.Expression) (val cty.Value, ok bool) {
	if !l.checkRefs(expr) {
		return cty.DynamicVal, false
	}
	val, diags := expr.Value(l.ctx)
	l.diags = append(l.diags, diags...)
	if diags.HasErrors() || !val.IsWhollyKnown() {
		return cty.DynamicVal, false
	}
	return val, true
}

func (l *loader) checkRefs(expr hcl.Expression) bool {
	ok := true
	for _, t := range expr.Variables() {
		root := t.RootName()
		var name string
		hasName := false
		if len(t) >= 2 {
			if step, isAttr := t[1].(hcl.TraverseAttr); isAttr {
				name, hasName = step.Name, true
			}
		}
		switch root {
		case "var":
			if !hasName {
				continue
			}
			if _, declared := l.vars[name]; !declared {
				l.errorf(t.SourceRange().Ptr(), "Reference to undeclared input variable",
					"An input variable with the name %q has not been declared. This variable can be declared with a variable %q {} block.%s",
					name, name, didYouMean(name, l.varNames()))
				ok = false
			}
		case "local":
			if !hasName {
				continue
			}
			if _, defined := l.localDefs[name]; !defined {
				names := make([]string, 0, len(l.localDefs))
				for n := range l.localDefs {
					names = append(names, n)
				}
				sort.Strings(names)
				l.errorf(t.SourceRange().Ptr(), "Reference to undeclared local value",
					"A local value with the name %q has not been declared.%s", name, didYouMean(name, names))
				ok = false
			}
		default:
			l.errorf(t.SourceRange().Ptr(), "Invalid reference",
				"A reference to %q is not valid here: a spec refers to input variables as var.<name> and to local values as local.<name>.%s",
				root, didYouMean(root, []string{"var", "local"}))
			ok = false
		}
	}
	return ok
}
