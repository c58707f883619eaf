package hosttest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// BuildELF compiles a real ELF object at p, a path on this machine, with
// gcc: a shared library with the given soname, or a program when soname
// is "". Each of needs becomes a DT_NEEDED entry, linked against a stub
// built aside, so that only what the test lays out is found later; flags
// are added to gcc's arguments (-Wl,-rpath,…). It skips the test where
// gcc is missing.
func BuildELF(tb testing.TB, p, soname string, needs []string, flags ...string) {
	tb.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		tb.Skip("gcc not installed")
	}
	scratch := tb.TempDir()
	src := filepath.Join(scratch, "x.c")
	body := "int gpuenv_x(void) { return 0; }\n"
	if soname == "" {
		body = "int main(void) { return 0; }\n"
	}
	if err := os.WriteFile(src, []byte(body), 0o644); err != nil {
		tb.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		tb.Fatal(err)
	}
	args := []string{"-o", p, src, "-L", scratch, "-Wl,--no-as-needed"}
	if soname != "" {
		args = append(args, "-shared", "-fPIC", "-Wl,-soname,"+soname)
	}
	for _, n := range needs {
		if b, err := exec.Command("gcc", "-shared", "-fPIC", "-Wl,-soname,"+n, "-o", filepath.Join(scratch, n), src).CombinedOutput(); err != nil {
			tb.Fatalf("gcc %s: %v\n%s", n, err, b)
		}
		args = append(args, "-l:"+n)
	}
	args = append(args, flags...)
	if b, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		tb.Fatalf("gcc %s: %v\n%s", p, err, b)
	}
}
