package planner

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
)

// DiffersError says that a saved plan is not the plan its own spec and
// flags make on the host now: the file was edited after plan --out wrote
// it, or another gpuenv wrote it.
type DiffersError struct {
	// Path names the first difference ("step environment operation 1
	// file.content").
	Path string
	// Saved and Now are the two values, quoted, shortened around the
	// difference; "absent" where one side has none.
	Saved, Now string
}

func (e *DiffersError) Error() string {
	return fmt.Sprintf("saved plan differs from a new plan of its spec: %s differs: saved %s, planned now %s", e.Path, e.Saved, e.Now)
}

// Diagnostic is the error as apply shows it.
func (e *DiffersError) Diagnostic() *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Saved plan differs from a new plan",
		Detail: fmt.Sprintf("Planned again from the spec and flags the saved plan keeps, on this host, gpuenv makes a different plan: %s differs: saved %s, planned now %s. "+
			"The plan file was changed after gpuenv plan --out wrote it, or another version of gpuenv wrote it. Nothing was changed. "+
			"Make the plan again with gpuenv plan --out and review it.", e.Path, e.Saved, e.Now),
	}
}

// CompareSaved compares saved, the bytes of a saved plan file, with now,
// the saved plan that plan --out would write for the same spec and flags
// on the host as it is: every member of the file, those this gpuenv does
// not read included, must be there with the same value. The first
// difference is a *DiffersError. Comparing the documents rather than a
// digest of them means that an edit that keeps the plan consistent with
// itself (an operation's content together with the value shown for it)
// is refused all the same, and named.
func CompareSaved(saved []byte, now *SavedPlan) error {
	a, err := decodeGeneric(saved)
	if err != nil {
		return fmt.Errorf("reading the saved plan: %w", err)
	}
	nb, err := json.Marshal(now)
	if err != nil {
		return err
	}
	b, err := decodeGeneric(nb)
	if err != nil {
		return err
	}
	if d := firstDifference(nil, a, b); d != nil {
		return d
	}
	return nil
}

func decodeGeneric(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// keyOrder lists the members compared first, where they are: the layout
// and what the plan was made from, then what apply runs (steps and their
// operations, transactions) before what it shows; the rest follow by
// name.
var keyOrder = []string{
	"gpuenv_saved_plan", "format_version", "planned_from", "facts_fingerprint", "spec_digest",
	"steps", "transactions", "address", "action", "kind", "operations",
}

// itemNames name an array's items in a difference's path.
var itemNames = map[string]string{
	"steps": "step", "operations": "operation", "transactions": "transaction", "warnings": "warning",
	"inferred": "inferred value", "files": "file", "var_files": "var file", "sections": "section",
}

// firstDifference walks a (the saved document) and b (the new one) in the
// same order and returns the first place they differ.
func firstDifference(path []string, a, b any) *DiffersError {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			break
		}
		keys := slices.Collect(maps.Keys(av))
		for k := range bv {
			if _, ok := av[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.SortFunc(keys, func(x, y string) int {
			ix, iy := rank(x), rank(y)
			if ix != iy {
				return ix - iy
			}
			return strings.Compare(x, y)
		})
		for _, k := range keys {
			x, inA := av[k]
			y, inB := bv[k]
			p := append(slices.Clone(path), k)
			if !inA || !inB {
				return differs(p, x, inA, y, inB)
			}
			if d := firstDifference(p, x, y); d != nil {
				return d
			}
		}
		return nil
	case []any:
		bv, ok := b.([]any)
		if !ok {
			break
		}
		for i := range max(len(av), len(bv)) {
			var x, y any
			inA, inB := i < len(av), i < len(bv)
			if inA {
				x = av[i]
			}
			if inB {
				y = bv[i]
			}
			p := item(path, i, x, y)
			if !inA || !inB {
				return differs(p, x, inA, y, inB)
			}
			if d := firstDifference(p, x, y); d != nil {
				return d
			}
		}
		return nil
	default:
		if sameScalar(a, b) {
			return nil
		}
	}
	return differs(path, a, true, b, true)
}

func rank(key string) int {
	if i := slices.Index(keyOrder, key); i >= 0 {
		return i
	}
	return len(keyOrder)
}

// sameScalar compares two JSON scalars (strings, json.Numbers as written,
// booleans, null) of the same type.
func sameScalar(a, b any) bool {
	switch a.(type) {
	case string, json.Number, bool, nil:
		return a == b
	}
	return false
}

// item names the i-th item of the array that ends path: a step by its
// address when both sides agree on it, any other item by its number.
func item(path []string, i int, x, y any) []string {
	p := slices.Clone(path)
	key := ""
	if len(p) > 0 {
		key = p[len(p)-1]
		p = p[:len(p)-1]
	}
	name, ok := itemNames[key]
	if !ok {
		return append(p, key, fmt.Sprintf("[%d]", i+1))
	}
	if key == "steps" {
		xa, _ := mapOf(x)["address"].(string)
		ya, _ := mapOf(y)["address"].(string)
		if xa != "" && xa == ya {
			return append(p, "\x00"+name+" "+xa)
		}
	}
	return append(p, fmt.Sprintf("\x00%s %d", name, i+1))
}

func mapOf(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func differs(path []string, a any, inA bool, b any, inB bool) *DiffersError {
	d := &DiffersError{Path: renderPath(path), Saved: "absent", Now: "absent"}
	as, aStr := a.(string)
	bs, bStr := b.(string)
	if aStr && bStr && inA && inB {
		d.Saved, d.Now = quoteAround(as, bs)
		return d
	}
	if inA {
		d.Saved = shortJSON(a)
	}
	if inB {
		d.Now = shortJSON(b)
	}
	return d
}

// renderPath joins a difference's path: items ("step environment",
// "operation 1") with spaces, the members within one with dots.
func renderPath(path []string) string {
	var b strings.Builder
	prevItem := true
	for _, p := range path {
		isItem := strings.HasPrefix(p, "\x00")
		switch {
		case b.Len() == 0:
		case isItem || prevItem:
			b.WriteByte(' ')
		case strings.HasPrefix(p, "["):
		default:
			b.WriteByte('.')
		}
		b.WriteString(strings.TrimPrefix(p, "\x00"))
		prevItem = isItem
	}
	if b.Len() == 0 {
		return "the document"
	}
	return b.String()
}

// quoteWindow is how many characters of a long string a difference shows.
const quoteWindow = 60

// quoteAround quotes a and b, shortened to a window that starts a little
// before the first byte where they differ, so that a long file content
// shows its edited line. Control characters come out escaped.
func quoteAround(a, b string) (string, string) {
	if len(a) <= quoteWindow && len(b) <= quoteWindow {
		return quoteWindowed(a, 0), quoteWindowed(b, 0)
	}
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	start := max(0, n-20)
	for start > 0 && !utf8.RuneStart(a[start]) {
		start--
	}
	return quoteWindowed(a, start), quoteWindowed(b, start)
}

func quoteWindowed(s string, start int) string {
	if start > len(s) {
		start = len(s)
	}
	end := len(s)
	if end-start > quoteWindow {
		end = start + quoteWindow
		for end > start && end < len(s) && !utf8.RuneStart(s[end]) {
			end--
		}
	}
	q := strconv.Quote(s[start:end])
	q = q[1 : len(q)-1]
	if start > 0 {
		q = "…" + q
	}
	if end < len(s) {
		q += "…"
	}
	return `"` + q + `"`
}

// shortJSON writes v as compact JSON, at most quoteWindow bytes of it.
func shortJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	s := string(b)
	if len(s) > quoteWindow {
		end := quoteWindow
		for end > 0 && !utf8.RuneStart(s[end]) {
			end--
		}
		s = s[:end] + "…"
	}
	// JSON escapes the C0 control characters but not DEL or the C1
	// ones, which a terminal may act on.
	if strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) {
		return strconv.QuoteToASCII(s)
	}
	return s
}
