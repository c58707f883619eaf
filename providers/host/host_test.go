package host_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

// layout builds a small root whose symlinks point outside it when followed
// naively: an absolute link must stay inside the root.
func layout(t testing.TB) (string, *host.Host) {
	t.Helper()
	root := t.TempDir()
	outside := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "usr/local/cuda-12.4/bin"), 0o755))
	must(os.WriteFile(filepath.Join(root, "usr/local/cuda-12.4/bin/nvcc"), []byte("inside"), 0o755))
	must(os.Symlink("/usr/local/cuda-12.4", filepath.Join(root, "usr/local/cuda")))
	must(os.Symlink("/etc/alternatives/x", filepath.Join(root, "usr/local/alt")))
	must(os.MkdirAll(filepath.Join(root, "etc/alternatives"), 0o755))
	must(os.Symlink("../../usr/local/cuda/bin/nvcc", filepath.Join(root, "etc/alternatives/x")))
	must(os.Symlink("loop2", filepath.Join(root, "loop1")))
	must(os.Symlink("loop1", filepath.Join(root, "loop2")))
	must(os.WriteFile(filepath.Join(outside, "secret"), []byte("outside"), 0o644))
	must(os.Symlink(filepath.Join(outside, "secret"), filepath.Join(root, "escape")))
	must(os.Symlink("../../../../../../"+strings.TrimPrefix(outside, "/")+"/secret", filepath.Join(root, "dotdot")))
	h, err := host.New(root)
	must(err)
	return root, h
}

func TestResolveStaysInsideRoot(t *testing.T) {
	root, h := layout(t)
	cases := []struct {
		path string
		want string // content, or "" for not-exist
	}{
		{"/usr/local/cuda/bin/nvcc", "inside"},
		{"/usr/local/alt", "inside"},
		{"/escape", ""},
		{"/dotdot", ""},
		{"/usr/../usr/local/cuda/bin/nvcc", "inside"},
	}
	for _, c := range cases {
		got, err := h.ReadFile(c.path)
		if c.want == "" {
			if !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("ReadFile(%s) = %q, %v; want not-exist (the link leads outside the root)", c.path, got, err)
			}
			continue
		}
		if err != nil || string(got) != c.want {
			t.Errorf("ReadFile(%s) = %q, %v; want %q", c.path, got, err, c.want)
		}
	}
	p, err := h.EvalSymlinks("/usr/local/cuda")
	if err != nil || p != "/usr/local/cuda-12.4" {
		t.Errorf("EvalSymlinks = %q, %v", p, err)
	}
	target, err := h.Readlink("/usr/local/cuda")
	if err != nil || target != "/usr/local/cuda-12.4" {
		t.Errorf("Readlink = %q, %v", target, err)
	}
	fi, err := h.Lstat("/usr/local/cuda")
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("Lstat did not report a symlink: %v, %v", fi, err)
	}
	if _, err := h.ReadFile("/loop1"); !errors.Is(err, syscall.ELOOP) {
		t.Errorf("loop: err = %v, want ELOOP", err)
	}
	if _, err := h.ReadFile("relative"); err == nil {
		t.Error("a relative path was accepted")
	}
	if h.Root() != root || h.Live() {
		t.Errorf("Root() = %q, Live() = %v", h.Root(), h.Live())
	}
}

func TestGlob(t *testing.T) {
	_, h := layout(t)
	got, err := h.Glob("/usr/local/cuda*/bin/nvcc")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/usr/local/cuda-12.4/bin/nvcc", "/usr/local/cuda/bin/nvcc"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Glob = %q, want %q", got, want)
	}
	if got, _ := h.Glob("/nothing/*"); got != nil {
		t.Errorf("Glob of a missing dir = %q", got)
	}
	if _, err := h.Glob("/usr/[a"); err == nil {
		t.Error("bad pattern accepted")
	}
}

type recorder struct{ argv [][]string }

func (r *recorder) Run(_ context.Context, c host.Command) error {
	r.argv = append(r.argv, c.Argv)
	return nil
}

func TestRunChrootsIntoRoot(t *testing.T) {
	root := t.TempDir()
	rec := &recorder{}
	h := hosttest.New(t, root, host.WithRunner(rec))
	if err := h.Run(context.Background(), host.Command{Argv: []string{"dpkg", "--audit"}}); err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"chroot", root, "dpkg", "--audit"}}
	if !reflect.DeepEqual(rec.argv, want) {
		t.Errorf("argv = %q, want %q", rec.argv, want)
	}
}

func TestNewRejectsMissingRoot(t *testing.T) {
	if _, err := host.New(filepath.Join(t.TempDir(), "nope")); err == nil {
		t.Error("missing root accepted")
	}
}

func TestExecRunner(t *testing.T) {
	var out strings.Builder
	err := host.ExecRunner{}.Run(context.Background(), host.Command{Argv: []string{"echo", "a b"}, Stdout: &out})
	if err != nil || out.String() != "a b\n" {
		t.Errorf("echo: %q, %v", out.String(), err)
	}
	if err := (host.ExecRunner{}).Run(context.Background(), host.Command{Argv: []string{"false"}}); err == nil {
		t.Error("false succeeded")
	}
}

// observationRoot is layout's root with more to look at: a directory
// too large to list in one read, files on both sides of the sizes reads
// are made in, a FIFO, a dangling link, a link to a directory through
// "..", and mode bits FileInfo must convert.
func observationRoot(t *testing.T) (string, *host.Host) {
	t.Helper()
	root, h := layout(t)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	lib := filepath.Join(root, "usr/lib/x86_64-linux-gnu")
	must(os.MkdirAll(lib, 0o755))
	for i := range 400 {
		must(os.WriteFile(filepath.Join(lib, fmt.Sprintf("libfoo%03d.so.1", i)), nil, 0o644))
	}
	must(os.WriteFile(filepath.Join(lib, "libnvidia-ml.so.550.54.15"), []byte("nvml"), 0o644))
	must(os.Symlink("libnvidia-ml.so.550.54.15", filepath.Join(lib, "libnvidia-ml.so.1")))
	must(os.WriteFile(filepath.Join(root, "empty"), nil, 0o644))
	for _, n := range []int{511, 512, 513, 5000} {
		must(os.WriteFile(filepath.Join(root, fmt.Sprintf("size%d", n)), bytes.Repeat([]byte("x"), n), 0o644))
	}
	must(os.WriteFile(filepath.Join(root, "setuid"), nil, 0o755))
	must(os.Chmod(filepath.Join(root, "setuid"), 0o4755|fs.ModeSetuid))
	must(os.Mkdir(filepath.Join(root, "sticky"), 0o755))
	must(os.Chmod(filepath.Join(root, "sticky"), 0o777|fs.ModeSticky))
	must(os.MkdirAll(filepath.Join(root, "dev"), 0o755))
	must(syscall.Mkfifo(filepath.Join(root, "dev/fifo"), 0o600))
	must(os.Symlink("/nowhere", filepath.Join(root, "dangling")))
	must(os.Symlink("../../usr/local", filepath.Join(root, "etc/alternatives/local")))
	return root, h
}

// observedPaths are looked up with every method: through symlinks,
// absolute and relative, out of the root, in loops, past files and
// missing directories.
var observedPaths = []string{
	"/", "/usr", "/usr/local", "/usr/local/cuda", "/usr/local/cuda/", "/usr/local/cuda/bin",
	"/usr/local/cuda/bin/nvcc", "/usr/local/cuda-12.4/bin/nvcc", "/usr/local/alt",
	"/usr/../usr/local/cuda/bin/nvcc", "/etc/alternatives/local/cuda/bin/nvcc",
	"/escape", "/dotdot", "/loop1", "/loop1/x", "/dangling", "/dangling/x", "/nowhere", "/nowhere/x",
	"/usr/local/cuda/bin/nvcc/x", "/usr/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
	"/usr/lib/x86_64-linux-gnu/libfoo123.so.1", "/usr/lib/x86_64-linux-gnu/libfoo.so.9",
	"/empty", "/size511", "/size512", "/size513", "/size5000", "/setuid", "/sticky", "/dev", "/dev/fifo",
}

var observedPatterns = []string{
	"/", "/usr/local/cuda/bin/nvcc", "/usr/local/cuda*/bin/nvcc", "/usr/local/cuda*/bin/*",
	"/*/local/cuda/bin/nvcc", "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.*",
	"/usr/lib/*/libfoo01?.so.1", "/usr/lib/x86_64-linux-gnu/libfoo[0-2]99.so.*", "/etc/alternatives/*",
	"/etc/alternatives/local/cuda*", "/dev/*", "/nothing/*", "/loop1/*", "/escape/*", "/size*",
}

// sameAs checks that o answers every method as the handle from New, h,
// does: the same bytes, the same FileInfo, the same listings, and errors
// of the same kind.
func sameAs(t *testing.T, h, o *host.Host) {
	t.Helper()
	kinds := func(err error) string {
		return fmt.Sprintf("nil=%v notexist=%v loop=%v notdir=%v", err == nil, errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ELOOP), errors.Is(err, syscall.ENOTDIR))
	}
	for _, p := range observedPaths {
		if p != "/dev/fifo" { // opening it would wait for a writer
			a, errA := h.ReadFile(p)
			b, errB := o.ReadFile(p)
			if !bytes.Equal(a, b) || kinds(errA) != kinds(errB) {
				t.Errorf("ReadFile(%s): %q, %v through New; %q, %v through the observation handle", p, a, errA, b, errB)
			}
		}
		for _, stat := range []struct {
			name string
			h, o func(string) (fs.FileInfo, error)
		}{{"Stat", h.Stat, o.Stat}, {"Lstat", h.Lstat, o.Lstat}} {
			a, errA := stat.h(p)
			b, errB := stat.o(p)
			if kinds(errA) != kinds(errB) {
				t.Errorf("%s(%s): %v through New; %v through the observation handle", stat.name, p, errA, errB)
				continue
			}
			if errA != nil {
				continue
			}
			// Name is the last element of the path asked for, as os.Stat
			// gives it on the live root: a handle from New names the
			// file it resolved to, or the root directory on this machine.
			nameDiffers := stat.name == "Lstat" && p != "/" && a.Name() != b.Name()
			if nameDiffers || a.Mode() != b.Mode() || a.Size() != b.Size() || !a.ModTime().Equal(b.ModTime()) || a.IsDir() != b.IsDir() {
				t.Errorf("%s(%s): %s %v %d %v through New; %s %v %d %v through the observation handle", stat.name, p, a.Name(), a.Mode(), a.Size(), a.ModTime(), b.Name(), b.Mode(), b.Size(), b.ModTime())
			}
			// Listing a directory moves its access time, which a handle
			// that remembers may have seen before.
			sa, sb := *a.Sys().(*syscall.Stat_t), *b.Sys().(*syscall.Stat_t)
			sa.Atim, sb.Atim = syscall.Timespec{}, syscall.Timespec{}
			if sa != sb {
				t.Errorf("%s(%s).Sys(): %+v through New; %+v through the observation handle", stat.name, p, sa, sb)
			}
		}
		if a, errA := h.Readlink(p); true {
			b, errB := o.Readlink(p)
			if a != b || kinds(errA) != kinds(errB) {
				t.Errorf("Readlink(%s): %q, %v through New; %q, %v through the observation handle", p, a, errA, b, errB)
			}
		}
		if a, errA := h.EvalSymlinks(p); true {
			b, errB := o.EvalSymlinks(p)
			if a != b || kinds(errA) != kinds(errB) {
				t.Errorf("EvalSymlinks(%s): %q, %v through New; %q, %v through the observation handle", p, a, errA, b, errB)
			}
		}
		a, errA := h.ReadDir(p)
		b, errB := o.ReadDir(p)
		if kinds(errA) != kinds(errB) || len(a) != len(b) {
			t.Errorf("ReadDir(%s): %d entries, %v through New; %d, %v through the observation handle", p, len(a), errA, len(b), errB)
			continue
		}
		for i := range a {
			if a[i].Name() != b[i].Name() || a[i].Type() != b[i].Type() || a[i].IsDir() != b[i].IsDir() {
				t.Errorf("ReadDir(%s)[%d]: %v through New; %v through the observation handle", p, i, a[i], b[i])
			}
			ia, errA := a[i].Info()
			ib, errB := b[i].Info()
			if kinds(errA) != kinds(errB) || errA == nil && ia.Mode() != ib.Mode() {
				t.Errorf("ReadDir(%s)[%d].Info(): %v through New; %v through the observation handle", p, i, ia, ib)
			}
		}
	}
	for _, pat := range observedPatterns {
		a, errA := h.Glob(pat)
		b, errB := o.Glob(pat)
		if !reflect.DeepEqual(a, b) || kinds(errA) != kinds(errB) {
			t.Errorf("Glob(%s): %q, %v through New; %q, %v through the observation handle", pat, a, errA, b, errB)
		}
	}
}

// TestForObservation: an observation handle answers as a handle from New
// does, the kernel resolving paths or not, a second time from what it
// remembers, with few directories held open, and after Close; it never
// leaves the root, a loop fails with ELOOP, and it gives back every
// descriptor it took.
func TestForObservation(t *testing.T) {
	for _, mode := range []string{"kernel", "walker", "few descriptors"} {
		t.Run(mode, func(t *testing.T) {
			switch mode {
			case "walker":
				host.UseWalker(t)
			case "few descriptors":
				host.HoldAtMost(t, 2)
			}
			root, h := observationRoot(t)
			before := openFDs(t)
			o := h.ForObservation()
			switch {
			case mode == "walker" && o.ResolvesInKernel():
				t.Fatal("the handle resolves paths in the kernel after UseWalker")
			case mode != "walker" && !o.ResolvesInKernel():
				o.Close()
				t.Skip("this kernel cannot resolve paths inside a root (no openat2, or a seccomp filter refuses it)")
			}
			if o.Root() != h.Root() || o.NVML() != h.NVML() {
				t.Error("the observation handle is not on the same root and NVML")
			}
			sameAs(t, h, o)
			sameAs(t, h, o) // from what it remembers
			for _, p := range []string{"/escape", "/dotdot"} {
				if got, err := o.ReadFile(p); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("ReadFile(%s) = %q, %v; want not-exist: the link leads out of the root", p, got, err)
				}
			}
			for _, p := range []string{"/loop1", "/loop1/x"} {
				if _, err := o.ReadFile(p); !errors.Is(err, syscall.ELOOP) {
					t.Errorf("ReadFile(%s): %v, want ELOOP", p, err)
				}
				if _, err := o.Stat(p); !errors.Is(err, syscall.ELOOP) {
					t.Errorf("Stat(%s): %v, want ELOOP", p, err)
				}
			}
			if mode == "few descriptors" {
				if n := openFDs(t); n > before+2 {
					t.Errorf("%d descriptors open during the pass, %d before it: more than the 2 allowed", n, before)
				}
			}

			// Repoint a link: after Close the handle sees what New does.
			if err := os.MkdirAll(filepath.Join(root, "usr/local/cuda-12.6/bin"), 0o755); err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(root, "usr/local/cuda-12.6/bin/nvcc"), []byte("12.6"), 0o755)
			os.Remove(filepath.Join(root, "usr/local/cuda"))
			os.Symlink("/usr/local/cuda-12.6", filepath.Join(root, "usr/local/cuda"))
			if err := o.Close(); err != nil {
				t.Fatal(err)
			}
			if n := openFDs(t); n != before {
				t.Errorf("%d descriptors open after Close, %d before the pass", n, before)
			}
			if o.ResolvesInKernel() {
				t.Error("the handle still resolves through descriptors after Close")
			}
			if got, err := o.ReadFile("/usr/local/cuda/bin/nvcc"); string(got) != "12.6" {
				t.Errorf("after Close the handle read %q, %v through the repointed link", got, err)
			}
			sameAs(t, h, o)
			o.Close()
		})
	}
}

// TestForObservationConcurrent: goroutines sharing one handle read what
// each alone would.
func TestForObservationConcurrent(t *testing.T) {
	_, h := observationRoot(t)
	o := h.ForObservation()
	defer o.Close()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for _, p := range observedPaths {
				if p == "/dev/fifo" {
					continue // opening it would wait for a writer
				}
				a, errA := h.ReadFile(p)
				b, errB := o.ReadFile(p)
				if !bytes.Equal(a, b) || (errA == nil) != (errB == nil) {
					t.Errorf("ReadFile(%s): %v through New; %v through the shared handle", p, errA, errB)
				}
				_, errA = h.Lstat(p)
				_, errB = o.Lstat(p)
				if (errA == nil) != (errB == nil) {
					t.Errorf("Lstat(%s): %v through New; %v through the shared handle", p, errA, errB)
				}
				x, _ := h.EvalSymlinks(p)
				y, _ := o.EvalSymlinks(p)
				if x != y {
					t.Errorf("EvalSymlinks(%s): %q through New; %q through the shared handle", p, x, y)
				}
			}
			for _, pat := range observedPatterns {
				a, _ := h.Glob(pat)
				b, _ := o.Glob(pat)
				if !reflect.DeepEqual(a, b) {
					t.Errorf("Glob(%s): %q through New; %q through the shared handle", pat, a, b)
				}
			}
		})
	}
	wg.Wait()
}

// TestForObservationLive: on this machine's own root the handle answers
// as New's does.
func TestForObservationLive(t *testing.T) {
	h := hosttest.New(t, "/")
	o := h.ForObservation()
	defer o.Close()
	if !o.ResolvesInKernel() {
		t.Error("the live root's handle does not resolve through descriptors")
	}
	for _, p := range []string{"/", "/usr", "/usr/bin", "/bin", "/lib", "/etc/passwd", "/etc/os-release", "/nowhere", "/nowhere/x", "/etc/passwd/x", "/usr/lib/os-release"} {
		a, errA := h.Lstat(p)
		b, errB := o.Lstat(p)
		if (errA == nil) != (errB == nil) || errA == nil && (a.Mode() != b.Mode() || a.Size() != b.Size()) {
			t.Errorf("Lstat(%s): %v, %v through New; %v, %v through the observation handle", p, a, errA, b, errB)
		}
		x, errA := h.EvalSymlinks(p)
		y, errB := o.EvalSymlinks(p)
		if x != y || (errA == nil) != (errB == nil) {
			t.Errorf("EvalSymlinks(%s): %q, %v through New; %q, %v through the observation handle", p, x, errA, y, errB)
		}
		d, errA := h.ReadFile(p)
		e, errB := o.ReadFile(p)
		if !bytes.Equal(d, e) || (errA == nil) != (errB == nil) {
			t.Errorf("ReadFile(%s): %v through New; %v through the observation handle", p, errA, errB)
		}
	}
	for _, pat := range []string{"/usr/*", "/usr/lib/*/libc.so.*", "/etc/*.conf", "/nothing/*"} {
		a, errA := h.Glob(pat)
		b, errB := o.Glob(pat)
		if !reflect.DeepEqual(a, b) || (errA == nil) != (errB == nil) {
			t.Errorf("Glob(%s): %q through New; %q through the observation handle", pat, a, b)
		}
	}
}

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd to count descriptors in")
	}
	return len(entries)
}

// BenchmarkForObservation is one pass of every lookup sameAs makes, the
// kernel resolving paths or not.
func BenchmarkForObservation(b *testing.B) {
	for _, mode := range []string{"kernel", "walker"} {
		b.Run(mode, func(b *testing.B) {
			if mode == "walker" {
				host.UseWalker(b)
			}
			root, h := layout(b)
			if err := os.MkdirAll(filepath.Join(root, "usr/lib/x86_64-linux-gnu"), 0o755); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				o := h.ForObservation()
				for _, p := range observedPaths {
					if p == "/dev/fifo" {
						continue // opening it would wait for a writer
					}
					o.ReadFile(p)
					o.Lstat(p)
					o.Stat(p)
					o.EvalSymlinks(p)
				}
				for _, pat := range observedPatterns {
					o.Glob(pat)
				}
				o.Close()
			}
		})
	}
}
