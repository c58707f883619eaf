package ldcache

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
)

// buildLib compiles a shared library with the given soname into dir.
func buildLib(t *testing.T, dir, soname string) string {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not installed")
	}
	src := filepath.Join(dir, "lib.c")
	if err := os.WriteFile(src, []byte("int gpuenv_test(void) { return 1; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, soname)
	if b, err := exec.Command("gcc", "-shared", "-fPIC", "-Wl,-soname,"+soname, "-o", out, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, b)
	}
	return out
}

func ldconfig(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/sbin/ldconfig", "/usr/sbin/ldconfig"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Skip("ldconfig not installed")
	return ""
}

func hostArch(t *testing.T) uint32 {
	switch runtime.GOARCH {
	case "amd64":
		return ArchX8664
	case "arm64":
		return ArchAArch64
	}
	t.Skipf("no cache flag known for %s", runtime.GOARCH)
	return 0
}

// TestParseLdconfigOutput reads a cache that glibc's own ldconfig wrote
// for a directory holding a library built here.
func TestParseLdconfigOutput(t *testing.T) {
	arch := hostArch(t)
	ld := ldconfig(t)
	dir := t.TempDir()
	lib := buildLib(t, dir, "libgpuenvtest.so.3")
	conf := filepath.Join(dir, "ld.so.conf")
	if err := os.WriteFile(conf, []byte(dir+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(dir, "ld.so.cache")
	if b, err := exec.Command(ld, "-X", "-C", cache, "-f", conf).CombinedOutput(); err != nil {
		t.Fatalf("ldconfig: %v\n%s", err, b)
	}
	data, err := os.ReadFile(cache)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := c.Lookup("libgpuenvtest.so.3", arch); !ok || got != lib {
		t.Errorf("Lookup(libgpuenvtest.so.3) = %q, %v; want %q", got, ok, lib)
	}
	if _, ok := c.Lookup("libgpuenvtest.so.3", ArchAArch64+ArchX8664); ok {
		t.Error("an entry of another ABI was returned")
	}
	// ldconfig adds its trusted directories: libc is always there.
	p, ok := c.Lookup("libc.so.6", arch)
	if !ok {
		t.Fatal("libc.so.6 is not in ldconfig's cache")
	}
	if _, err := os.Stat(p); err != nil {
		t.Errorf("libc.so.6 → %s: %v", p, err)
	}
	if !slices.Contains(c.Dirs(), dir) {
		t.Errorf("Dirs() = %v, want it to hold %s", c.Dirs(), dir)
	}
}

// TestParseCompatFormat reads the old table followed by the new one, which
// glibc before 2.32 wrote by default and ldconfig -c compat still writes.
func TestParseCompatFormat(t *testing.T) {
	arch := hostArch(t)
	ld := ldconfig(t)
	dir := t.TempDir()
	lib := buildLib(t, dir, "libgpuenvcompat.so.1")
	conf := filepath.Join(dir, "ld.so.conf")
	if err := os.WriteFile(conf, []byte(dir+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(dir, "ld.so.cache")
	if b, err := exec.Command(ld, "-X", "-c", "compat", "-C", cache, "-f", conf).CombinedOutput(); err != nil {
		t.Skipf("ldconfig -c compat: %v\n%s", err, b)
	}
	data, err := os.ReadFile(cache)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte(magicOld)) {
		t.Skip("this ldconfig wrote no old table")
	}
	c, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := c.Lookup("libgpuenvcompat.so.1", arch); !ok || got != lib {
		t.Errorf("Lookup = %q, %v; want %q", got, ok, lib)
	}
}

// TestWriteReadByLdconfig writes a cache and has ldconfig -p, glibc's own
// reader, list it.
func TestWriteReadByLdconfig(t *testing.T) {
	hostArch(t)
	ld := ldconfig(t)
	entries := []Entry{
		{Soname: "libcudart.so.12", Path: "/usr/local/cuda-12.4/lib64/libcudart.so.12", Flags: ArchX8664},
		{Soname: "libcuda.so.1", Path: "/usr/lib/x86_64-linux-gnu/libcuda.so.1", Flags: ArchX8664},
		{Soname: "libcudart.so.11.0", Path: "/usr/local/cuda-11.8/lib64/libcudart.so.11.0", Flags: ArchX8664},
	}
	data := Write(entries)
	cache := filepath.Join(t.TempDir(), "ld.so.cache")
	if err := os.WriteFile(cache, data, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(ld, "-p", "-C", cache).CombinedOutput()
	if err != nil {
		t.Fatalf("ldconfig -p: %v\n%s", err, out)
	}
	if !bytes.HasPrefix(out, []byte("3 libs found in cache")) {
		t.Errorf("ldconfig -p: %s", out)
	}
	for _, e := range entries {
		if !bytes.Contains(out, []byte(e.Soname+" (libc6,x86-64) => "+e.Path)) {
			t.Errorf("ldconfig -p does not list %s => %s:\n%s", e.Soname, e.Path, out)
		}
	}
	c, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Entries) != 3 {
		t.Fatalf("parsed %d entries", len(c.Entries))
	}
	// ldconfig orders names by libcmp, descending: .so.12 before .so.11.0.
	var names []string
	for _, e := range c.Entries {
		names = append(names, e.Soname)
	}
	want := []string{"libcudart.so.12", "libcudart.so.11.0", "libcuda.so.1"}
	if !slices.Equal(names, want) {
		t.Errorf("order %v, want %v", names, want)
	}
}

// TestThisMachine parses the running system's cache, when it has one.
func TestThisMachine(t *testing.T) {
	arch := hostArch(t)
	data, err := os.ReadFile("/etc/ld.so.cache")
	if err != nil {
		t.Skip("no /etc/ld.so.cache")
	}
	c, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := c.Lookup("libc.so.6", arch)
	if !ok {
		t.Fatal("libc.so.6 missing from the cache")
	}
	if _, err := os.Stat(p); err != nil {
		t.Errorf("%s: %v", p, err)
	}
}

func TestParseRejects(t *testing.T) {
	good := Write([]Entry{{Soname: "libx.so.1", Path: "/lib/libx.so.1", Flags: ArchX8664}})
	for name, data := range map[string][]byte{
		"empty":       nil,
		"other file":  []byte("not a cache at all, just text"),
		"cut header":  good[:30],
		"cut entries": good[:headerNew+10],
		"string past end": func() []byte {
			b := bytes.Clone(good)
			b[headerNew+4] = 0xff
			b[headerNew+5] = 0xff
			return b
		}(),
		"old header only": []byte(magicOld + "\x00"),
	} {
		if _, err := Parse(data); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

func TestLibcmp(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"libfoo.so.10", "libfoo.so.9", 1},
		{"libfoo.so.9", "libfoo.so.10", -1},
		{"libfoo.so.1", "libfoo.so.1", 0},
		{"liba.so", "libb.so", -1},
		{"libfoo.so.1.2", "libfoo.so.1", 1},
	} {
		if got := libcmp(c.a, c.b); got != c.want {
			t.Errorf("libcmp(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add(Write([]Entry{{Soname: "libx.so.1", Path: "/lib/libx.so.1", Flags: ArchX8664}}))
	f.Add([]byte(magicOld + "\x00\x01\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			return
		}
		for _, e := range c.Entries {
			if e.HWCap&hwcapExtension == 0 {
				if _, ok := c.Lookup(e.Soname, e.Arch()); !ok {
					t.Fatalf("entry %q is not found by Lookup", e.Soname)
				}
			}
		}
		_ = c.Dirs()
	})
}
