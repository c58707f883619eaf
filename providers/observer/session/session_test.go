package session

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
)

func write(t *testing.T, root, p, content string) {
	t.Helper()
	full := filepath.Join(root, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestShellFilesAndStubs: a stubs directory exported in ~/.bashrc is
// found with the file and line that set it; a setting made by a command
// is not evaluated, and a directory without a stub is not reported.
func TestShellFilesAndStubs(t *testing.T) {
	root := t.TempDir()
	write(t, root, "home/ana/.bashrc", "# cuda\nexport PATH=/usr/local/cuda/bin:$PATH\nexport LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/lib64/stubs:$LD_LIBRARY_PATH\neval \"$(conda shell.bash hook)\"\nexport CUDA_VISIBLE_DEVICES=$(free-gpu)\n")
	write(t, root, "home/ana/.profile", "if [ -n \"$BASH_VERSION\" ]; then . \"$HOME/.bashrc\"; fi\n")
	write(t, root, "usr/local/cuda/lib64/stubs/libcuda.so", "")
	write(t, root, "usr/local/cuda/lib64/libcudart.so.12", "")
	h, err := host.New(root)
	if err != nil {
		t.Fatal(err)
	}
	s, warns := Observe(h, Options{Home: "/home/ana"})
	if len(warns) > 0 {
		t.Fatalf("warnings: %v", warns)
	}
	var names []string
	for _, a := range s.ShellFiles {
		names = append(names, a.Name)
	}
	if strings.Join(names, ",") != "PATH,LD_LIBRARY_PATH,CUDA_VISIBLE_DEVICES" {
		t.Fatalf("shell files' settings: %+v", s.ShellFiles)
	}
	if len(s.StubLibraries) != 1 {
		t.Fatalf("stubs: %+v", s.StubLibraries)
	}
	st := s.StubLibraries[0]
	if st.Path != "/usr/local/cuda/lib64/stubs/libcuda.so" || st.Setting.File != "/home/ana/.bashrc" || st.Setting.Line != 3 {
		t.Errorf("stub %+v", st)
	}
}

// TestStubLinkOutsideStubs: a libcuda.so.1 made in a library directory
// that leads into a stubs directory is a stub too.
func TestStubLinkOutsideStubs(t *testing.T) {
	root := t.TempDir()
	write(t, root, "usr/local/cuda/lib64/stubs/libcuda.so", "")
	if err := os.Symlink("stubs/libcuda.so", filepath.Join(root, "usr/local/cuda/lib64/libcuda.so.1")); err != nil {
		t.Fatal(err)
	}
	h, err := host.New(root)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := Observe(h, Options{Session: []facts.Assignment{{Name: "LD_LIBRARY_PATH", Value: "/usr/local/cuda/lib64"}}})
	if len(s.StubLibraries) != 1 || s.StubLibraries[0].Real != "/usr/local/cuda/lib64/stubs/libcuda.so" {
		t.Fatalf("stubs: %+v", s.StubLibraries)
	}
}

// TestReadEnviron: a job's environment is read from /proc/PID/environ,
// only the observed variables kept; a file past the limit is cut at the
// last whole entry and said to be truncated; a missing process is an
// error that names it.
func TestReadEnviron(t *testing.T) {
	root := t.TempDir()
	write(t, root, "proc/4242/environ", "HOME=/home/ana\x00CUDA_VISIBLE_DEVICES=GPU-8932f937\x00LD_LIBRARY_PATH=/opt/cuda/lib64/stubs\x00")
	big := strings.Repeat("X=1234567\x00", EnvironLimit/10) + "LD_LIBRARY_PATH=/late\x00"
	write(t, root, "proc/4243/environ", big)
	h, err := host.New(root)
	if err != nil {
		t.Fatal(err)
	}
	p := ReadEnviron(h, 4242)
	if p.Error != "" || p.Truncated || len(p.Variables) != 2 || p.Variables[0].Name != "CUDA_VISIBLE_DEVICES" || p.Variables[1].Value != "/opt/cuda/lib64/stubs" || p.Variables[1].File != "/proc/4242/environ" {
		t.Fatalf("%+v", p)
	}
	p = ReadEnviron(h, 4243)
	if !p.Truncated || len(p.Variables) != 0 {
		t.Fatalf("a large environment: truncated %v, variables %+v", p.Truncated, p.Variables)
	}
	p = ReadEnviron(h, 9)
	if !strings.Contains(p.Error, "process 9") {
		t.Fatalf("a missing process: %+v", p)
	}
}

// TestStubsInLoaderConfiguration: a stubs directory that ld.so.conf
// names is reported as that file's setting, with the soname link
// ldconfig makes there.
func TestStubsInLoaderConfiguration(t *testing.T) {
	root := t.TempDir()
	write(t, root, "usr/local/cuda-11.8/targets/x86_64-linux/lib/stubs/libcuda.so", "")
	if err := os.Symlink("libcuda.so", filepath.Join(root, "usr/local/cuda-11.8/targets/x86_64-linux/lib/stubs/libcuda.so.1")); err != nil {
		t.Fatal(err)
	}
	h, err := host.New(root)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := Observe(h, Options{LoaderPaths: []facts.LoaderPath{
		{Dir: "/usr/lib/x86_64-linux-gnu", File: "/etc/ld.so.conf.d/x86_64-linux-gnu.conf"},
		{Dir: "/usr/local/cuda-11.8/targets/x86_64-linux/lib/stubs", File: "/etc/ld.so.conf.d/cuda-stubs.conf"},
	}})
	if len(s.StubLibraries) != 2 || s.StubLibraries[1].Path != "/usr/local/cuda-11.8/targets/x86_64-linux/lib/stubs/libcuda.so.1" || s.StubLibraries[1].Setting.File != "/etc/ld.so.conf.d/cuda-stubs.conf" {
		t.Fatalf("stubs: %+v", s.StubLibraries)
	}
}
