package pydeps

import (
	"fmt"
	"strings"
)

// Environment holds the marker variables of one Python environment. A
// variable it lacks makes any marker that reads it undecided.
type Environment map[string]string

// errUndecided is a marker that reads a variable the environment lacks.
var errUndecided = fmt.Errorf("undecided")

// EvalMarker evaluates a PEP 508 environment marker. ok is false when the
// marker reads a variable env does not know (an extra, a platform detail
// gpuenv did not observe) or cannot be parsed: such a requirement is not
// judged.
func EvalMarker(marker string, env Environment) (result, ok bool) {
	p := &markerParser{toks: tokenize(marker), env: env}
	v, err := p.or()
	if err != nil || p.i != len(p.toks) {
		return false, false
	}
	return v, true
}

type markerParser struct {
	toks []string
	i    int
	env  Environment
}

func (p *markerParser) peek() string {
	if p.i < len(p.toks) {
		return p.toks[p.i]
	}
	return ""
}

func (p *markerParser) next() string { t := p.peek(); p.i++; return t }

// or and and keep evaluating after an undecided operand: "A or B" is
// decided when either is true, "A and B" when either is false.
func (p *markerParser) or() (bool, error) {
	l, lerr := p.and()
	for p.peek() == "or" {
		p.next()
		r, rerr := p.and()
		switch {
		case lerr == nil && l, rerr == nil && r:
			l, lerr = true, nil
		case lerr != nil || rerr != nil:
			if lerr != errUndecided && lerr != nil || rerr != errUndecided && rerr != nil {
				return false, fmt.Errorf("bad marker")
			}
			lerr = errUndecided
		default:
			l = false
		}
	}
	return l, lerr
}

func (p *markerParser) and() (bool, error) {
	l, lerr := p.atom()
	for p.peek() == "and" {
		p.next()
		r, rerr := p.atom()
		switch {
		case lerr == nil && !l, rerr == nil && !r:
			l, lerr = false, nil
		case lerr != nil || rerr != nil:
			if lerr != errUndecided && lerr != nil || rerr != errUndecided && rerr != nil {
				return false, fmt.Errorf("bad marker")
			}
			lerr = errUndecided
		default:
			l = true
		}
	}
	return l, lerr
}

func (p *markerParser) atom() (bool, error) {
	if p.peek() == "(" {
		p.next()
		v, err := p.or()
		if p.next() != ")" {
			return false, fmt.Errorf("bad marker")
		}
		return v, err
	}
	l := p.next()
	op := p.next()
	if op == "not" {
		if p.next() != "in" {
			return false, fmt.Errorf("bad marker")
		}
		op = "not in"
	}
	r := p.next()
	lv, lerr := p.value(l)
	rv, rerr := p.value(r)
	if lerr != nil {
		return false, lerr
	}
	if rerr != nil {
		return false, rerr
	}
	isVersion := strings.HasSuffix(l, "_version") || strings.HasSuffix(r, "_version")
	switch op {
	case "==", "!=", "<", "<=", ">", ">=", "~=", "===":
		if isVersion {
			specs, err := ParseSpecifiers(op + rv)
			v, verr := ParseVersion(lv)
			if err == nil && verr == nil {
				return Allows(specs, v, lv), nil
			}
		}
		switch op {
		case "==", "===":
			return lv == rv, nil
		case "!=":
			return lv != rv, nil
		}
		return false, fmt.Errorf("bad marker")
	case "in":
		return strings.Contains(rv, lv), nil
	case "not in":
		return !strings.Contains(rv, lv), nil
	}
	return false, fmt.Errorf("bad marker")
}

// value is a quoted string's text or a variable's value.
func (p *markerParser) value(t string) (string, error) {
	if len(t) >= 2 && (t[0] == '"' || t[0] == '\'') && t[len(t)-1] == t[0] {
		return t[1 : len(t)-1], nil
	}
	v, ok := p.env[t]
	if !ok {
		if t == "" {
			return "", fmt.Errorf("bad marker")
		}
		return "", errUndecided
	}
	return v, nil
}

func tokenize(s string) []string {
	var out []string
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			i++
		case c == '(' || c == ')':
			out = append(out, string(c))
			i++
		case c == '"' || c == '\'':
			j := strings.IndexByte(s[i+1:], c)
			if j < 0 {
				return append(out, s[i:])
			}
			out = append(out, s[i:i+j+2])
			i += j + 2
		case strings.ContainsRune("=!<>~", rune(c)):
			j := i
			for j < len(s) && strings.ContainsRune("=!<>~", rune(s[j])) {
				j++
			}
			out = append(out, s[i:j])
			i = j
		default:
			j := i
			for j < len(s) && !strings.ContainsRune(" \t()\"'=!<>~", rune(s[j])) {
				j++
			}
			out = append(out, s[i:j])
			i = j
		}
	}
	return out
}
