package spec

import (
	"fmt"
	"sort"
	"sync"

	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

// functions is the set of functions a spec may call. It is curated: only
// pure functions that cannot read the host or the clock, so that a spec means
// the same on every machine and every day. It is built on first use: the
// wrappers below are cty functions whose construction is not free, and
// most commands never load a spec.
var functions = sync.OnceValue(func() map[string]function.Function {
	return map[string]function.Function{
		"abs":          stdlib.AbsoluteFunc,
		"ceil":         stdlib.CeilFunc,
		"chomp":        stdlib.ChompFunc,
		"coalesce":     stdlib.CoalesceFunc,
		"coalescelist": stdlib.CoalesceListFunc,
		"compact":      stdlib.CompactFunc,
		"concat":       stdlib.ConcatFunc,
		"contains":     stdlib.ContainsFunc,
		"distinct":     stdlib.DistinctFunc,
		"element":      stdlib.ElementFunc,
		"flatten":      stdlib.FlattenFunc,
		"floor":        stdlib.FloorFunc,
		"format":       limitFormat(stdlib.FormatFunc),
		"formatlist":   limitFormat(stdlib.FormatListFunc),
		"join":         stdlib.JoinFunc,
		"keys":         stdlib.KeysFunc,
		"length":       lengthFunc(),
		"lookup":       stdlib.LookupFunc,
		"lower":        stdlib.LowerFunc,
		"max":          stdlib.MaxFunc,
		"merge":        stdlib.MergeFunc,
		"min":          stdlib.MinFunc,
		"regex":        stdlib.RegexFunc,
		"regexall":     stdlib.RegexAllFunc,
		"replace":      stdlib.ReplaceFunc,
		"reverse":      stdlib.ReverseListFunc,
		"slice":        stdlib.SliceFunc,
		"sort":         stdlib.SortFunc,
		"split":        stdlib.SplitFunc,
		"strrev":       stdlib.ReverseFunc,
		"substr":       stdlib.SubstrFunc,
		"title":        stdlib.TitleFunc,
		"tobool":       stdlib.MakeToFunc(cty.Bool),
		"tolist":       stdlib.MakeToFunc(cty.List(cty.DynamicPseudoType)),
		"tomap":        stdlib.MakeToFunc(cty.Map(cty.DynamicPseudoType)),
		"tonumber":     stdlib.MakeToFunc(cty.Number),
		"toset":        stdlib.MakeToFunc(cty.Set(cty.DynamicPseudoType)),
		"tostring":     stdlib.MakeToFunc(cty.String),
		"trim":         stdlib.TrimFunc,
		"trimprefix":   stdlib.TrimPrefixFunc,
		"trimspace":    stdlib.TrimSpaceFunc,
		"trimsuffix":   stdlib.TrimSuffixFunc,
		"upper":        stdlib.UpperFunc,
		"values":       stdlib.ValuesFunc,
		"zipmap":       stdlib.ZipmapFunc,
	}
})

// FunctionNames lists the functions a spec may call, sorted.
func FunctionNames() []string {
	names := make([]string, 0, len(functions()))
	for n := range functions() {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// lengthFunc counts the characters of a string or the elements of a
// collection, as Terraform's length does; cty's own length takes only
// collections.
var lengthFunc = sync.OnceValue(func() function.Function {
	return function.New(&function.Spec{
		Params: []function.Parameter{{
			Name:             "value",
			Type:             cty.DynamicPseudoType,
			AllowDynamicType: true,
			AllowUnknown:     true,
			AllowMarked:      true,
		}},
		Type: func(args []cty.Value) (cty.Type, error) {
			ty := args[0].Type()
			switch {
			case ty == cty.String || ty == cty.DynamicPseudoType:
				return cty.Number, nil
			case ty.IsTupleType() || ty.IsObjectType() || ty.IsListType() || ty.IsMapType() || ty.IsSetType():
				return cty.Number, nil
			}
			return cty.Number, function.NewArgErrorf(0, "argument must be a string, a collection type, or a structural type")
		},
		Impl: func(args []cty.Value, retType cty.Type) (cty.Value, error) {
			v := args[0]
			if v.Type() == cty.String {
				return stdlib.Strlen(v)
			}
			if v.Type().IsTupleType() || v.Type().IsObjectType() {
				return cty.NumberIntVal(int64(v.LengthInt())), nil
			}
			return v.Length(), nil
		},
	})
})

// maxFormatWidth bounds the width and precision in a format verb: cty pads
// to any width it is given, and "%999999999d" would take a gigabyte.
const maxFormatWidth = 1000

func limitFormat(f function.Function) function.Function {
	return function.New(&function.Spec{
		Params:   f.Params(),
		VarParam: f.VarParam(),
		Type: func(args []cty.Value) (cty.Type, error) {
			return f.ReturnTypeForValues(args)
		},
		Impl: func(args []cty.Value, retType cty.Type) (cty.Value, error) {
			if len(args) > 0 && args[0].IsKnown() && !args[0].IsNull() && args[0].Type() == cty.String {
				if err := checkFormatWidths(args[0].AsString()); err != nil {
					return cty.NilVal, function.NewArgError(0, err)
				}
			}
			return f.Call(args)
		},
	})
}

func checkFormatWidths(s string) error {
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			continue
		}
		n := 0
		for i++; i < len(s); i++ {
			c := s[i]
			if c >= '0' && c <= '9' {
				n = n*10 + int(c-'0')
				if n > maxFormatWidth {
					return fmt.Errorf("width or precision over %d in a format verb", maxFormatWidth)
				}
				continue
			}
			n = 0
			if c == '.' || c == '+' || c == '-' || c == '#' || c == ' ' || c == '[' || c == ']' {
				continue
			}
			break
		}
	}
	return nil
}
