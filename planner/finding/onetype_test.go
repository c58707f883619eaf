package finding_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// There is one finding type: a struct of the module's non-test code that
// has a summary and evidence, as a finding does, is a second one, and the
// commands would word its rules apart again. Only this package's own JSON
// shapes of a finding (the observation's problem, the plan's warning) may.
func TestOneFindingType(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "testdata" || n == ".git" || strings.HasPrefix(n, ".") && p != root {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		own := filepath.Dir(p) == filepath.Join(root, "planner", "finding")
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok || own {
				return true
			}
			fields := map[string]bool{}
			for _, fl := range st.Fields.List {
				for _, name := range fl.Names {
					fields[name.Name] = true
				}
			}
			if fields["Summary"] && fields["Evidence"] {
				t.Errorf("%s: type %s has a Summary and Evidence: a finding is a finding.Finding", fset.Position(ts.Pos()), ts.Name.Name)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// There is one rule book: an observation's problems are doctor's
// findings of stage observe (doctor.ObserveFindings). Code outside the
// doctor that sets or appends to a Problems field words a rule of its own
// again.
func TestOneRuleBook(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	doctorDir := filepath.Join(root, "planner", "doctor")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "testdata" || p == doctorDir || strings.HasPrefix(n, ".") && p != root {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		// Without type information a Problems field of another type (a
		// count, a file's list of faults) is told apart by its file: only
		// one importing the planner's packages can hold an observation.
		planner := slices.ContainsFunc(f.Imports, func(s *ast.ImportSpec) bool {
			return strings.HasPrefix(s.Path.Value, `"github.com/gpuenv/gpuenv/planner/`)
		})
		ast.Inspect(f, func(n ast.Node) bool {
			as, ok := n.(*ast.AssignStmt)
			if !ok || !planner {
				return true
			}
			for i, l := range as.Lhs {
				sel, ok := l.(*ast.SelectorExpr)
				if !ok || sel.Sel.Name != "Problems" {
					continue
				}
				if i < len(as.Rhs) && !makesList(as.Rhs[i]) {
					continue
				}
				t.Errorf("%s: sets Problems itself: an observation's problems are doctor.ObserveFindings", fset.Position(as.Pos()))
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// makesList reports whether e builds a list of problems itself: an
// append, a literal, or a call of anything but doctor.ObserveFindings.
func makesList(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.CompositeLit:
		return true
	case *ast.CallExpr:
		sel, ok := e.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		pkg, ok := sel.X.(*ast.Ident)
		return !ok || pkg.Name != "doctor" || sel.Sel.Name != "ObserveFindings"
	}
	return false
}
