package spec

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// FuzzLoad loads arbitrary spec text, with arbitrary text as the value of
// input variables, and checks that the loader neither panics nor produces
// malformed diagnostics, and that Format is idempotent on what it accepts.
// Its seed corpus in testdata/fuzz/FuzzLoad runs with every go test.
func FuzzLoad(f *testing.F) {
	f.Add([]byte("driver {\n  version = \"550.*\"\n}\n"), "12.4")
	// One file per fuzzing process: the fuzz function runs sequentially
	// within a process, and a fresh directory per input would spend most
	// of the time creating and removing directories.
	path := filepath.Join(f.TempDir(), "spec.hcl")
	f.Fuzz(func(t *testing.T, src []byte, value string) {
		if err := os.WriteFile(path, src, 0o644); err != nil {
			t.Fatal(err)
		}
		s, diags := Load(path, LoadOptions{
			Vars:    map[string]string{"v": value},
			Environ: []string{EnvPrefix + "w=" + value},
		})
		if s == nil || s.Files == nil {
			t.Fatal("Load returned no Spec or no Files")
		}
		for _, d := range diags {
			if d.Summary == "" || (d.Severity != hcl.DiagError && d.Severity != hcl.DiagWarning) {
				t.Errorf("malformed diagnostic %#v", d)
			}
			if d.Subject != nil && d.Subject.Filename != "" && d.Subject.Filename != path && s.Files[d.Subject.Filename] == nil {
				if _, err := os.Stat(d.Subject.Filename); err == nil {
					t.Errorf("diagnostic points into %s, which Files lacks", d.Subject.Filename)
				}
			}
		}
		if !diags.HasErrors() {
			checkLoaded(t, s)
		}

		out, fdiags := Format(src, path)
		if fdiags.HasErrors() {
			return
		}
		again, fdiags := Format(out, path)
		if fdiags.HasErrors() {
			t.Fatalf("formatted output does not parse: %v\n%s", diagsOf(fdiags), out)
		}
		if !bytes.Equal(out, again) {
			t.Errorf("Format is not idempotent:\n%q\n%q", out, again)
		}
		if _, pdiags := hclsyntax.ParseConfig(out, path, hcl.InitialPos); pdiags.HasErrors() {
			t.Errorf("formatted output does not parse: %v", pdiags)
		}
	})
}

// checkLoaded checks what a valid spec promises its users.
func checkLoaded(t *testing.T, s *Spec) {
	t.Helper()
	paths := []Attr[string]{}
	if s.CUDA != nil {
		paths = append(paths, s.CUDA.Path)
	}
	for _, fw := range s.Frameworks {
		paths = append(paths, fw.Python, fw.Venv)
	}
	for _, p := range paths {
		if p.Set && checkPath(p.Value) != "" {
			t.Errorf("accepted path %q", p.Value)
		}
	}
	for _, g := range s.Groups {
		if checkAccountName("group", g.Name) != "" {
			t.Errorf("accepted group %q", g.Name)
		}
		for _, m := range g.Members.Value {
			if checkAccountName("user", m) != "" {
				t.Errorf("accepted member %q", m)
			}
		}
	}
	if e := s.Environment; e != nil {
		for _, d := range e.CUDAVisibleDevices.Value {
			if deviceID(d, true) == "" {
				t.Errorf("accepted device %q", d)
			}
		}
		for k, v := range e.Variables.Value {
			if checkEnvName(k) != "" || checkEnvValue(k, v) != "" {
				t.Errorf("accepted variable %q=%q", k, v)
			}
		}
	}
}
