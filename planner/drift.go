package planner

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
)

// SectionDrift is what changed in one section of the facts between two
// observations (plan -refresh-only): the same sections a saved plan's
// fingerprint covers, without what moves by the minute (memory in use,
// running processes, module reference counts).
type SectionDrift struct {
	Section string        `json:"section"`
	Changes []DriftChange `json:"changes"`
	// More counts the changes left out after MaxDriftChanges.
	More int `json:"more,omitempty"`
}

// DriftChange is one value that changed, appeared or went, at Path: the
// section's members joined with dots, a list's items by their name (or
// path, interpreter, unit, UUID) in brackets, else by position.
type DriftChange struct {
	Path string `json:"path"`
	// Before is absent for a value that appeared, After for one that went.
	Before *string `json:"before,omitempty"`
	After  *string `json:"after,omitempty"`
}

// MaxDriftChanges bounds the changes listed per section: a package
// database rebuilt from scratch would otherwise print every field.
const MaxDriftChanges = 50

// Drift compares the sections of two observations of one host, in the
// fingerprint's order, and returns those that differ.
func Drift(before, now *facts.Observation) []SectionDrift {
	var out []SectionDrift
	for _, name := range allSections {
		a, b := flatSection(name, before), flatSection(name, now)
		var changes []DriftChange
		for _, k := range slices.Sorted(maps.Keys(union(a, b))) {
			va, inA := a[k]
			vb, inB := b[k]
			if inA && inB && va == vb {
				continue
			}
			c := DriftChange{Path: k}
			if inA {
				c.Before = &va
			}
			if inB {
				c.After = &vb
			}
			changes = append(changes, c)
		}
		if len(changes) == 0 {
			continue
		}
		sd := SectionDrift{Section: name, Changes: changes}
		if len(changes) > MaxDriftChanges {
			sd.Changes, sd.More = changes[:MaxDriftChanges], len(changes)-MaxDriftChanges
		}
		out = append(out, sd)
	}
	return out
}

func union(a, b map[string]string) map[string]bool {
	u := make(map[string]bool, len(a)+len(b))
	for k := range a {
		u[k] = true
	}
	for k := range b {
		u[k] = true
	}
	return u
}

// flatSection is a section of obs as leaf values by path.
func flatSection(name string, obs *facts.Observation) map[string]string {
	out := map[string]string{}
	if obs == nil {
		return out
	}
	b, err := json.Marshal(section(name, obs))
	if err != nil {
		// The facts are plain data, which always encodes.
		panic("encoding facts: " + err.Error())
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		panic("decoding facts: " + err.Error())
	}
	flatten(name, v, out)
	return out
}

// itemKeys are the members that name an item of a list, in the order
// they are tried.
var itemKeys = []string{"uuid", "name", "path", "interpreter", "prefix", "unit", "address", "id", "file"}

func flatten(prefix string, v any, out map[string]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			flatten(prefix+"."+k, e, out)
		}
	case []any:
		seen := map[string]int{}
		for i, e := range x {
			key := fmt.Sprint(i)
			if m, ok := e.(map[string]any); ok {
				for _, k := range itemKeys {
					if s, ok := m[k].(string); ok && s != "" {
						key = s
						break
					}
				}
			}
			// Two items of one name (a package of two architectures)
			// stay apart.
			if n := seen[key]; n > 0 {
				seen[key]++
				key = fmt.Sprintf("%s#%d", key, n+1)
			} else {
				seen[key] = 1
			}
			flatten(prefix+"["+key+"]", e, out)
		}
	case nil:
		// An absent value is no value: null and a missing member read
		// alike.
	default:
		b, _ := json.Marshal(x)
		s := string(b)
		if str, ok := x.(string); ok {
			s = str
		}
		if s == "" || s == "false" || s == "0" {
			// omitempty writes these as nothing; so does the flat form,
			// so that an observation of another gpuenv version compares.
			return
		}
		out[prefix] = s
	}
}

// String is the change as one line: "path: before → after", "+ path =
// after", "- path = before".
func (c DriftChange) String() string {
	switch {
	case c.Before == nil:
		return "+ " + c.Path + " = " + *c.After
	case c.After == nil:
		return "- " + c.Path + " = " + *c.Before
	}
	return "~ " + c.Path + ": " + *c.Before + " → " + *c.After
}

// DriftSummary counts the sections and values that drifted.
func DriftSummary(d []SectionDrift) string {
	n := 0
	for _, s := range d {
		n += len(s.Changes) + s.More
	}
	names := make([]string, len(d))
	for i, s := range d {
		names[i] = s.Section
	}
	return fmt.Sprintf("%s changed in %s (%s)", plural(n, "value", "values"), plural(len(d), "section", "sections"), strings.Join(names, ", "))
}
