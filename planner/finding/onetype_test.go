package finding_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
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
