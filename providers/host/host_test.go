package host_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/gpuenv/gpuenv/providers/host"
)

// layout builds a small root whose symlinks point outside it when followed
// naively: an absolute link must stay inside the root.
func layout(t *testing.T) (string, *host.Host) {
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
	h, err := host.New(root, host.WithRunner(rec))
	if err != nil {
		t.Fatal(err)
	}
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

// TestForObservation: the observation handle reads the same files through
// the same symlinks, and keeps what it learnt about a symlink for the rest
// of the pass.
func TestForObservation(t *testing.T) {
	root, h := layout(t)
	o := h.ForObservation()
	for _, p := range []string{"/usr/local/cuda/bin/nvcc", "/usr/local/alt", "/escape", "/dotdot"} {
		a, errA := h.ReadFile(p)
		b, errB := o.ReadFile(p)
		if string(a) != string(b) || (errA == nil) != (errB == nil) {
			t.Errorf("%s: %q, %v through the host; %q, %v through the observation handle", p, a, errA, b, errB)
		}
	}
	if _, err := o.ReadFile("/loop1"); !errors.Is(err, syscall.ELOOP) {
		t.Errorf("loop: %v", err)
	}
	// Repoint the link: the host sees the change, the pass does not.
	if err := os.MkdirAll(filepath.Join(root, "usr/local/cuda-12.6/bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(root, "usr/local/cuda-12.6/bin/nvcc"), []byte("12.6"), 0o755)
	os.Remove(filepath.Join(root, "usr/local/cuda"))
	os.Symlink("/usr/local/cuda-12.6", filepath.Join(root, "usr/local/cuda"))
	if got, _ := h.ReadFile("/usr/local/cuda/bin/nvcc"); string(got) != "12.6" {
		t.Errorf("host handle read %q after the link changed", got)
	}
	if got, _ := o.ReadFile("/usr/local/cuda/bin/nvcc"); string(got) != "inside" {
		t.Errorf("observation handle read %q; it resolves as it first did", got)
	}
	if o.Root() != h.Root() || o.NVML() != h.NVML() {
		t.Error("the observation handle is not on the same root and NVML")
	}
}
