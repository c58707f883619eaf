package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
)

// event is one line of go test -json (cmd/test2json's TestEvent, and the
// build events go test adds).
type event struct {
	Action     string
	Package    string
	ImportPath string // build-output and build-fail
	Test       string
	Output     string
}

// skip is a test that was skipped, with the reason it logged.
type skip struct {
	pkg, test, reason string
}

// report turns the events back into go test's usual output: each
// package's closing line, and the output of the tests that failed.
type report struct {
	out     io.Writer
	verbose bool
	pkgs    map[string]*pkgOutput
	// order is the packages not yet printed, as they started: go test
	// prints each package's output whole, in its list's order.
	order []string

	packages int
	failed   bool
	skips    []skip
}

// pkgOutput is one package's output, held until the package ends, as go
// test holds it when it runs several.
type pkgOutput struct {
	lines []string // what go test would print, in order
	done  bool
	tests map[string][]string // each running test's own output
	order []string            // the running tests, in the order they started
}

func newReport(out io.Writer, verbose bool) *report {
	return &report{out: out, verbose: verbose, pkgs: map[string]*pkgOutput{}}
}

func (r *report) read(in io.Reader) error {
	br := bufio.NewReader(in)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			r.line(line)
		}
		if errors.Is(err, io.EOF) {
			// Packages that never ended (go test was killed): what
			// they printed is all there is.
			for _, name := range r.order {
				r.pkgs[name].done = true
			}
			r.flush()
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func (r *report) line(line []byte) {
	var e event
	if !bytes.HasPrefix(line, []byte("{")) || json.Unmarshal(line, &e) != nil || e.Action == "" {
		// Not an event: whatever go test printed besides, as it was.
		r.out.Write(line)
		return
	}
	switch e.Action {
	case "build-output":
		io.WriteString(r.out, e.Output)
		return
	case "build-fail":
		r.failed = true
		return
	}
	if e.Package == "" {
		return
	}
	p := r.pkg(e.Package)
	switch e.Action {
	case "run":
		if _, ok := p.tests[e.Test]; !ok && e.Test != "" {
			p.tests[e.Test] = nil
			p.order = append(p.order, e.Test)
		}
	case "output":
		if r.verbose {
			io.WriteString(r.out, e.Output)
			return
		}
		if e.Test == "" {
			if e.Output != "PASS\n" && !isProgress(e.Output) {
				p.lines = append(p.lines, e.Output)
			}
			return
		}
		if _, ok := p.tests[e.Test]; !ok {
			p.order = append(p.order, e.Test)
		}
		p.tests[e.Test] = append(p.tests[e.Test], e.Output)
	case "pass", "fail", "skip":
		if e.Test == "" {
			r.endPackage(e)
			return
		}
		if e.Action == "fail" {
			r.failed = true
			// go test prints a failed subtest inside its parent's
			// report, where the parent's log has got to.
			block := failedLines(p.tests[e.Test])
			if parent := p.parent(e.Test); parent != "" {
				for _, l := range block {
					p.tests[parent] = append(p.tests[parent], "    "+l)
				}
			} else {
				p.lines = append(p.lines, block...)
			}
		}
		if e.Action == "skip" {
			r.skips = append(r.skips, skip{pkg: e.Package, test: e.Test, reason: skipReason(p.tests[e.Test])})
		}
		p.end(e.Test)
	}
}

func (r *report) pkg(name string) *pkgOutput {
	p := r.pkgs[name]
	if p == nil {
		p = &pkgOutput{tests: map[string][]string{}}
		r.pkgs[name] = p
		r.order = append(r.order, name)
	}
	return p
}

// endPackage prints a finished package's output. Tests still running
// when a package fails (a panic, the timeout) print what they wrote:
// it is where the failure is.
func (r *report) endPackage(e event) {
	r.packages++
	p := r.pkg(e.Package)
	p.done = true
	if e.Action == "fail" {
		r.failed = true
		var open []string
		for _, t := range p.order {
			open = append(open, testLines(p.tests[t])...)
		}
		p.lines = append(open, p.lines...)
	}
	r.flush()
}

// flush prints the finished packages that no unfinished one precedes.
func (r *report) flush() {
	for len(r.order) > 0 && r.pkgs[r.order[0]].done {
		name := r.order[0]
		for _, l := range r.pkgs[name].lines {
			io.WriteString(r.out, l)
		}
		delete(r.pkgs, name)
		r.order = r.order[1:]
	}
}

// parent is the running test whose subtest test is, or "".
func (p *pkgOutput) parent(test string) string {
	for i := strings.LastIndexByte(test, '/'); i > 0; i = strings.LastIndexByte(test[:i], '/') {
		if _, ok := p.tests[test[:i]]; ok {
			return test[:i]
		}
	}
	return ""
}

func (p *pkgOutput) end(test string) {
	delete(p.tests, test)
	for i, t := range p.order {
		if t == test {
			p.order = append(p.order[:i], p.order[i+1:]...)
			break
		}
	}
}

// isProgress is a line go test -v prints and go test does not.
func isProgress(line string) bool {
	for _, prefix := range []string{"=== RUN", "=== PAUSE", "=== CONT", "=== NAME"} {
		if strings.HasPrefix(line, prefix) {
			return true
		}
	}
	return false
}

// failedLines is a failed test's report as go test prints it: the
// --- FAIL line, which -json's verbose run writes last, first.
func failedLines(lines []string) []string {
	out := testLines(lines)
	// Its subtests' reports, already in it, are indented.
	for i := len(out) - 1; i >= 0; i-- {
		if strings.HasPrefix(out[i], "--- FAIL: ") {
			return slices.Concat([]string{out[i]}, out[:i], out[i+1:])
		}
	}
	return out
}

func testLines(lines []string) []string {
	var out []string
	for _, l := range lines {
		if !isProgress(l) {
			out = append(out, l)
		}
	}
	return out
}

// skipReason is what the test logged last before its --- SKIP line: the
// t.Skip message.
func skipReason(lines []string) string {
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if l == "" || isProgress(l) || strings.HasPrefix(l, "--- SKIP") {
			continue
		}
		return l
	}
	return "(no reason given)"
}
