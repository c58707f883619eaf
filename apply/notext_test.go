package apply_test

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gpuenv/gpuenv/apply"
	"github.com/gpuenv/gpuenv/apply/applytest"
)

// The engine has no text output of its own: what a person reads is a view
// of its events, in cmd. Its source names neither standard output nor
// standard error and prints nothing; the options of a run take no writer
// for prose.
func TestEngineWritesNoText(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, imp := range f.Imports {
			if p := strings.Trim(imp.Path.Value, `"`); p == "log" || p == "log/slog" {
				t.Errorf("%s imports %s: the engine says what happens as events, to its hook", name, p)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				pkg, ok := n.X.(*ast.Ident)
				if !ok {
					break
				}
				switch {
				case pkg.Name == "os" && (n.Sel.Name == "Stdout" || n.Sel.Name == "Stderr"):
					t.Errorf("%s: the engine uses os.%s; what it says goes to its hook as events", fset.Position(n.Pos()), n.Sel.Name)
				case pkg.Name == "fmt" && strings.HasPrefix(n.Sel.Name, "Print"):
					t.Errorf("%s: the engine calls fmt.%s; what it says goes to its hook as events", fset.Position(n.Pos()), n.Sel.Name)
				}
			case *ast.CallExpr:
				if id, ok := n.Fun.(*ast.Ident); ok && (id.Name == "print" || id.Name == "println") {
					t.Errorf("%s: the engine calls %s", fset.Position(n.Pos()), id.Name)
				}
			}
			return true
		})
	}
	if checked < 20 {
		t.Fatalf("checked %d files of package apply: not run in its directory?", checked)
	}
	writer := reflect.TypeFor[io.Writer]()
	for _, opts := range []reflect.Type{reflect.TypeFor[apply.Options](), reflect.TypeFor[apply.RollbackOptions]()} {
		for i := 0; i < opts.NumField(); i++ {
			if f := opts.Field(i); f.Type.Implements(writer) || f.Type == writer {
				t.Errorf("%s.%s is a writer: a run's text is a view of its events, made in cmd", opts.Name(), f.Name)
			}
		}
	}
}

// An apply that fails and reverts, one that succeeds and the rollback of
// it, run with standard output and standard error going to a file: the
// file stays empty, and the hook gets every step, in order — the
// generation's message, each operation's start, run and end, the revert
// between its start and end.
func TestEngineSaysEverythingAsEvents(t *testing.T) {
	fx := newFixture(t)
	fx.runner.Env = append(fx.runner.Env, applytest.EnvFail+"=gpasswd")
	var failed, applied, rolledBack eventLog
	var results [3]*apply.Result
	var rollbackErr error
	// Nothing is reported while the descriptors are redirected: with -v,
	// the test's own log would go to the file.
	printed := silenced(t, func() {
		o := fx.opts(nil)
		o.Hook = &failed
		results[0], _ = apply.Apply(context.Background(), fx.h, applytest.StandardPlan(fx.Index), o)
		o.Hook = &applied
		results[1], _ = apply.Apply(context.Background(), fx.h, applytest.StandardPlan(fx.Index), o)
		results[2], rollbackErr = apply.Rollback(context.Background(), fx.h, apply.RollbackOptions{StateDir: stateDir, To: -1, Hook: &rolledBack})
	})
	if printed != "" {
		t.Errorf("the engine wrote to standard output or standard error:\n%s", printed)
	}
	for i, want := range []apply.Status{apply.StatusReverted, apply.StatusApplied, apply.StatusDone} {
		if results[i] == nil || results[i].Status != want {
			t.Fatalf("run %d: %+v (rollback: %v), want %s\n%s%s%s", i+1, results[i], rollbackErr, want, failed.String(), applied.String(), rolledBack.String())
		}
	}
	checkRun(t, "the failed apply", failed.Events(), "Applying generation 1: 13 operations. ", 8, 7)
	checkRun(t, "the apply", applied.Events(), "Applying generation 2: 13 operations. ", 13, -1)
	checkRun(t, "the rollback", rolledBack.Events(), "Rolling back (generation 3): 11 inverses. ", 0, 11)
}

// checkRun checks the events of one run: the message that starts it
// first; apply's operations 1 to ran, each started, run (unless skipped
// or failed before it ran) and ended, with only notes between; then,
// when reverted is not -1, the revert of that many inverses. A run whose
// last operation failed says so before its revert.
func checkRun(t *testing.T, what string, evs []apply.RunEvent, first string, ran, reverted int) {
	t.Helper()
	fail := func(i int, format string, args ...any) {
		t.Helper()
		var b strings.Builder
		for k, e := range evs {
			mark := "  "
			if k == i {
				mark = "> "
			}
			b.WriteString(mark + e.Type + " " + e.Line + e.Outcome + " " + e.Error + "\n")
		}
		t.Fatalf("%s: event %d: "+format+"\n%s", append(append([]any{what, i}, args...), b.String())...)
	}
	i := 0
	next := func() apply.RunEvent {
		t.Helper()
		for i < len(evs) && evs[i].Type == apply.RunNote {
			i++
		}
		if i == len(evs) {
			fail(i, "the events end early")
		}
		i++
		return evs[i-1]
	}
	if e := next(); e.Type != apply.RunMessage || !strings.HasPrefix(e.Line, first) {
		fail(i-1, "want the message %q…", first)
	}
	operation := func(undoes bool) (outcome string) {
		t.Helper()
		start := next()
		if start.Type != apply.RunOperationStart || (start.Operation.Undoes != 0) != undoes {
			fail(i-1, "want an operation's start (an inverse: %v)", undoes)
		}
		e := next()
		if e.Type == apply.RunOperationRun {
			if undoes || e.Operation != start.Operation {
				fail(i-1, "an inverse's, or another operation's, run")
			}
			e = next()
		}
		if e.Type != apply.RunOperationEnd || e.Operation != start.Operation {
			fail(i-1, "want the end of the operation started")
		}
		if ran := evs[i-2].Type == apply.RunOperationRun; e.Outcome == "done" && !undoes && !ran {
			fail(i-1, "an operation done without running")
		}
		return e.Outcome
	}
	for n := 1; n <= ran; n++ {
		outcome := operation(false)
		if n == ran && reverted >= 0 && outcome != "failed" {
			fail(i-1, "want the operation failed")
		}
	}
	if reverted >= 0 {
		if ran > 0 {
			if e := next(); e.Type != apply.RunMessage || !strings.HasPrefix(e.Line, "Reverting ") {
				fail(i-1, "want the revert announced")
			}
		}
		if e := next(); e.Type != apply.RunRevertStart || e.Count != reverted {
			fail(i-1, "want the revert of %d operations to start", reverted)
		}
		for n := 0; n < reverted; n++ {
			if outcome := operation(true); outcome != "done" {
				fail(i-1, "an inverse %s", outcome)
			}
		}
		if e := next(); e.Type != apply.RunRevertEnd || e.Outcome != "reverted" || e.Count != reverted {
			fail(i-1, "want the revert of %d operations to end reverted", reverted)
		}
	}
	for ; i < len(evs); i++ {
		if evs[i].Type != apply.RunNote {
			fail(i, "more after the run's end")
		}
	}
}

// silenced runs f with this process's standard output and standard error
// (the descriptors, so that child processes and os.Stdout alike are
// caught) going to a file, and returns what was written there.
func silenced(t *testing.T, f func()) string {
	t.Helper()
	file, err := os.CreateTemp(t.TempDir(), "printed")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	var saved [3]int
	for _, fd := range []int{1, 2} {
		if saved[fd], err = unix.Dup(fd); err != nil {
			t.Fatal(err)
		}
		if err := unix.Dup2(int(file.Fd()), fd); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		for _, fd := range []int{1, 2} {
			unix.Dup2(saved[fd], fd)
			unix.Close(saved[fd])
		}
	}()
	f()
	data, err := os.ReadFile(file.Name())
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// uncheckedExecutor finds the package database not as it should be.
type uncheckedExecutor struct{ apply.Executor }

func (uncheckedExecutor) Check(context.Context, *apply.Workspace, []apply.Expectation) error {
	return errors.New("nvidia-smi is at 535.309.01-1, not 535.261.03-1")
}

// A rollback whose inverses all ran but whose package check fails says
// so as an event of its own, which the text shows under the inverses,
// before the revert's end, failed, says it again for the JSON stream.
func TestRevertCheckFailedIsAnEvent(t *testing.T) {
	fx := newFixture(t)
	fx.applies(applytest.StandardPlan(fx.Index))
	var ev eventLog
	res, err := apply.Rollback(context.Background(), fx.h, apply.RollbackOptions{StateDir: stateDir, To: -1, Executor: uncheckedExecutor{fx.executor()}, Hook: &ev})
	if err != nil || res.Status != apply.StatusFailed || res.RevertFailed == nil || res.RevertFailed.What != "checking the package database" {
		t.Fatalf("rollback: %v %+v\n%s", err, res, ev.String())
	}
	evs := ev.Events()
	n := len(evs)
	if n < 2 || evs[n-2].Type != apply.RunRevertCheckFailed || evs[n-2].Error != "nvidia-smi is at 535.309.01-1, not 535.261.03-1" ||
		evs[n-1].Type != apply.RunRevertEnd || evs[n-1].Outcome != "failed" {
		t.Errorf("want the check's failure, then the revert's end, failed, last:\n%s", ev.String())
	}
}
