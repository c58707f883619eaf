package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/gpuenv/gpuenv/planner/doctor"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
)

// hostile is what a document or a host may hold to take over a
// terminal: a title change, a cursor move that rewrites the line above,
// a forged line, a reversed run of text, and a byte that is not UTF-8.
const hostile = "evil\x1b]0;owned\x07\x1b[1A\r\nFORGED LINE\u202e\xff\x9b"

func TestEsc(t *testing.T) {
	for in, want := range map[string]string{
		"plain":             "plain",
		"ümlaut ok → 漢字":    "ümlaut ok → 漢字",
		"a\nb":              `a\nb`,
		"\x1b[31mred":       `\x1b[31mred`,
		"tab\there\r":       `tab\there\r`,
		"bad\xffutf8":       `bad\xffutf8`,
		"c1\u0085\u009b":    `c1\u0085\u009b`,
		"rlo\u202eoverride": `rlo\u202eoverride`,
		"zero\u200bwidth":   `zero\u200bwidth`,
		"del\x7f":           `del\x7f`,
		"back\\slash stays": `back\slash stays`,
	} {
		if got := esc(in); got != want {
			t.Errorf("esc(%q) = %q, want %q", in, got, want)
		}
	}
	if got := escLines("one\x1b\ntwo\r"); got != "one\\x1b\ntwo\\r" {
		t.Errorf("escLines kept or lost the wrong things: %q", got)
	}
}

// scanTerminalSafe fails the test for every line of out that holds a
// control character (other than the view's own colour codes, when
// colour is on, which these tests leave off) or text that is not UTF-8,
// and when the forged line stands as a line of its own. Texts gpuenv
// writes around values (a step's reason, a fix's spec) keep their own
// lines, indented under what they belong to: a value in one may start an
// indented line, never one at the left margin.
func scanTerminalSafe(t *testing.T, view, out string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Errorf("%s: the output is not UTF-8", view)
	}
	for i, line := range strings.Split(out, "\n") {
		for _, r := range line {
			if unicode.IsControl(r) && r != '\t' || unicode.Is(unicode.Cf, r) {
				t.Errorf("%s: line %d holds %U: %q", view, i+1, r, line)
				break
			}
		}
		if strings.HasPrefix(line, "FORGED") {
			t.Errorf("%s: line %d is forged by a value: %q", view, i+1, line)
		}
	}
	if !strings.Contains(out, `evil\x1b]0;owned\x07\x1b[1A\r\nFORGED LINE`) {
		t.Errorf("%s: the hostile value is not shown escaped:\n%s", view, out)
	}
}

// fill sets every string reachable from v (fields, slice and map
// elements, map keys, pointers' targets) to s, with one element in
// every slice and map, down to a few levels.
func fill(v reflect.Value, s string, depth int) {
	if depth > 6 {
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		fill(v.Elem(), s, depth+1)
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Field(i); f.CanSet() {
				fill(f, s, depth+1)
			}
		}
	case reflect.Slice:
		e := reflect.New(v.Type().Elem()).Elem()
		fill(e, s, depth+1)
		v.Set(reflect.Append(reflect.MakeSlice(v.Type(), 0, 1), e))
	case reflect.Map:
		k := reflect.New(v.Type().Key()).Elem()
		e := reflect.New(v.Type().Elem()).Elem()
		fill(k, s, depth+1)
		fill(e, s, depth+1)
		m := reflect.MakeMap(v.Type())
		m.SetMapIndex(k, e)
		v.Set(m)
	}
}

// TestHumanViewsEscapeHostileStrings renders observe's, doctor's and
// plan's human views of documents whose every string is hostile: no
// control character reaches the output and no value makes a line.
func TestHumanViewsEscapeHostileStrings(t *testing.T) {
	var obs facts.Observation
	fill(reflect.ValueOf(&obs).Elem(), hostile, 0)
	var buf bytes.Buffer
	v := &observeHuman{printer: printer{w: &buf}, root: "/"}
	if err := v.Observation(&obs); err != nil {
		t.Fatal(err)
	}
	scanTerminalSafe(t, "observe", buf.String())

	var rep doctor.Report
	fill(reflect.ValueOf(&rep).Elem(), hostile, 0)
	for i := range rep.Checks {
		rep.Checks[i].Status = doctor.Problem
	}
	buf.Reset()
	if err := (&doctorHuman{w: &buf, root: "/"}).Report(&rep); err != nil {
		t.Fatal(err)
	}
	scanTerminalSafe(t, "doctor", buf.String())

	var pl plan.Plan
	fill(reflect.ValueOf(&pl).Elem(), hostile, 0)
	for i := range pl.Steps {
		pl.Steps[i].Action = plan.Update
	}
	buf.Reset()
	if err := (&humanPlan{w: &buf}).render(&pl); err != nil {
		t.Fatal(err)
	}
	scanTerminalSafe(t, "plan", buf.String())
}

// TestPlanFactsEscapesHostnames: plan --facts names hosts by the
// hostname their document gives, and refused ones by their file's name;
// either printed raw could drive the terminal or forge a summary line.
func TestPlanFactsEscapesHostnames(t *testing.T) {
	dir := t.TempDir()
	doc := `{"schema_version":1,"schema_minor":1,"hostname":"` + jsonEscape(hostile) + `",` +
		`"os":{"id":"debian","version_id":"12","family":"deb"},` +
		`"groups":[{"name":"video","gid":44,"members":[]}],"repositories":[],"init":{},"repository_files":{},"units":[],` +
		`"package_indexes":{"indexes":[],"packages":[]},"context":{},"loader":{},"containers":{}}`
	if err := os.WriteFile(filepath.Join(dir, "a.json"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	// A file's name may hold the same: it names a refused host.
	if err := os.WriteFile(filepath.Join(dir, hostile+".json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(t.TempDir(), "s.hcl")
	os.WriteFile(spec, []byte("group \"video\" {\n  members = [\"alice\"]\n}\n"), 0o644)
	var stdout, stderr bytes.Buffer
	run(context.Background(), []string{"plan", "--facts", dir, spec}, strings.NewReader(""), &stdout, &stderr, nil)
	out := stdout.String() + stderr.String()
	scanTerminalSafe(t, "plan --facts", out)
}

// jsonEscape writes s as the inside of a JSON string, every byte of it
// kept: control characters as \u escapes, a byte that is not UTF-8 as
// itself.
func jsonEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte("0123456789abcdef"[c>>4])
			b.WriteByte("0123456789abcdef"[c&15])
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
