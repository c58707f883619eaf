package loader_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
	"github.com/gpuenv/gpuenv/providers/host/ldcache"
	"github.com/gpuenv/gpuenv/providers/observer/loader"
)

// cc builds a real ELF object at p inside root (hosttest.BuildELF).
func cc(t *testing.T, root, p, soname string, needs []string, flags ...string) {
	t.Helper()
	hosttest.BuildELF(t, filepath.Join(root, p), soname, needs, flags...)
}

func link(t *testing.T, root, p, target string) {
	t.Helper()
	if err := os.Symlink(target, filepath.Join(root, p)); err != nil {
		t.Fatal(err)
	}
}

func lib(t *testing.T, c facts.LoaderResolution, soname string) facts.ResolvedLibrary {
	t.Helper()
	i := slices.IndexFunc(c.Libraries, func(l facts.ResolvedLibrary) bool { return l.Soname == soname })
	if i < 0 {
		t.Fatalf("%s: %s not resolved; needed %v", c.Subject, soname, c.Needed)
	}
	return c.Libraries[i]
}

// program lays out a program needing libfoo.so.1 and libbar.so.2, with
// its own copy of libfoo (1.5.0) beside it through RUNPATH or RPATH, an
// older libfoo (1.2.0) on LD_LIBRARY_PATH, and libbar in the default
// directory, which needs libbaz.so.3 in turn.
func program(t *testing.T, dtags string) (*host.Host, facts.Observation) {
	h := hosttest.Host(t, `
-- etc/profile.d/old.sh --
export LD_LIBRARY_PATH=/opt/old/lib
-- etc/ld.so.conf --
`)
	root := h.Root()
	cc(t, root, "usr/local/lib/app/libfoo.so.1.5.0", "libfoo.so.1", nil)
	link(t, root, "usr/local/lib/app/libfoo.so.1", "libfoo.so.1.5.0")
	cc(t, root, "opt/old/lib/libfoo.so.1.2.0", "libfoo.so.1", nil)
	link(t, root, "opt/old/lib/libfoo.so.1", "libfoo.so.1.2.0")
	cc(t, root, "usr/lib/x86_64-linux-gnu/libbaz.so.3", "libbaz.so.3", nil)
	cc(t, root, "usr/lib/x86_64-linux-gnu/libbar.so.2", "libbar.so.2", []string{"libbaz.so.3"})
	cc(t, root, "usr/local/bin/app", "", []string{"libfoo.so.1", "libbar.so.2"}, dtags, "-Wl,-rpath,$ORIGIN/../lib/app")
	obs := facts.Observation{OS: facts.OS{Family: "deb", Arch: "x86_64"},
		Environment: facts.Environment{Variables: []facts.Assignment{{Name: "LD_LIBRARY_PATH", Value: "/opt/old/lib", File: "/etc/profile.d/old.sh", Line: 1}}}}
	return h, obs
}

func TestRunPathComesAfterLibraryPath(t *testing.T) {
	h, obs := program(t, "-Wl,--enable-new-dtags")
	l, warns := loader.Observe(h, &obs, loader.Options{Programs: []string{"/usr/local/bin/app"}})
	if len(warns) > 0 {
		t.Fatalf("warnings: %v", warns)
	}
	c := l.Consumers[len(l.Consumers)-1]
	if c.Kind != "program" || !slices.Equal(c.RunPath, []string{"/usr/local/lib/app"}) || c.RPath != nil {
		t.Fatalf("consumer %+v", c)
	}
	foo := lib(t, c, "libfoo.so.1")
	if foo.Path != "/opt/old/lib/libfoo.so.1" || foo.Via != loader.ViaLibraryPath || foo.From != "/etc/profile.d/old.sh:1" || foo.Version != "1.2.0" {
		t.Errorf("libfoo.so.1 = %+v, want the LD_LIBRARY_PATH copy 1.2.0", foo)
	}
	if len(foo.Shadows) != 1 || foo.Shadows[0].Path != "/usr/local/lib/app/libfoo.so.1" || foo.Shadows[0].Via != loader.ViaRunPath || foo.Shadows[0].Version != "1.5.0" {
		t.Errorf("libfoo.so.1 shadows %+v, want the RUNPATH copy 1.5.0", foo.Shadows)
	}
	if bar := lib(t, c, "libbar.so.2"); bar.Path != "/lib/x86_64-linux-gnu/libbar.so.2" && bar.Path != "/usr/lib/x86_64-linux-gnu/libbar.so.2" || bar.Via != loader.ViaDefault {
		t.Errorf("libbar.so.2 = %+v, want the default directory", bar)
	}
	if baz := lib(t, c, "libbaz.so.3"); baz.Needer != "libbar.so.2" || baz.Path == "" {
		t.Errorf("libbaz.so.3 = %+v, want it found for libbar.so.2", baz)
	}
}

func TestRPathComesFirst(t *testing.T) {
	h, obs := program(t, "-Wl,--disable-new-dtags")
	l, _ := loader.Observe(h, &obs, loader.Options{Programs: []string{"/usr/local/bin/app"}})
	c := l.Consumers[len(l.Consumers)-1]
	if !slices.Equal(c.RPath, []string{"/usr/local/lib/app"}) {
		t.Fatalf("rpath %v", c.RPath)
	}
	if foo := lib(t, c, "libfoo.so.1"); foo.Path != "/usr/local/lib/app/libfoo.so.1" || foo.Via != loader.ViaRPath || len(foo.Shadows) != 1 || foo.Shadows[0].Via != loader.ViaLibraryPath {
		t.Errorf("libfoo.so.1 = %+v, want the RPATH copy shadowing LD_LIBRARY_PATH's", foo)
	}
}

func TestSessionComesFirst(t *testing.T) {
	h, obs := program(t, "-Wl,--enable-new-dtags")
	l, _ := loader.Observe(h, &obs, loader.Options{Programs: []string{"/usr/local/bin/app"},
		Session: []facts.Assignment{{Name: "LD_LIBRARY_PATH", Value: "/usr/local/lib/app"}}})
	foo := lib(t, l.Consumers[len(l.Consumers)-1], "libfoo.so.1")
	if foo.Path != "/usr/local/lib/app/libfoo.so.1" || foo.From != "this session's environment" {
		t.Errorf("libfoo.so.1 = %+v, want the session's directory", foo)
	}
}

// TestCache resolves through a real ld.so.cache: its entries win, and a
// configured directory it does not list is reported, not searched.
func TestCache(t *testing.T) {
	h := hosttest.Host(t, `
-- etc/ld.so.conf --
/opt/q
/opt/new
-- opt/q/libqux.so.1 --
-- opt/new/libnew.so.1 --
`)
	cache := ldcache.Write([]ldcache.Entry{{Soname: "libqux.so.1", Path: "/opt/q/libqux.so.1", Flags: ldcache.ArchX8664}})
	if err := os.WriteFile(filepath.Join(h.Root(), "etc/ld.so.cache"), cache, 0o644); err != nil {
		t.Fatal(err)
	}
	cc(t, h.Root(), "usr/bin/q", "", []string{"libqux.so.1", "libnew.so.1"})
	obs := facts.Observation{OS: facts.OS{Family: "deb", Arch: "x86_64"},
		Environment: facts.Environment{LoaderPaths: []facts.LoaderPath{{Dir: "/opt/q", File: "/etc/ld.so.conf"}, {Dir: "/opt/new", File: "/etc/ld.so.conf"}}}}
	l, _ := loader.Observe(h, &obs, loader.Options{Programs: []string{"/usr/bin/q"}})
	if !l.Cache.Present || l.Cache.Entries != 1 || l.Cache.Simulated {
		t.Errorf("cache %+v", l.Cache)
	}
	c := l.Consumers[len(l.Consumers)-1]
	if q := lib(t, c, "libqux.so.1"); q.Path != "/opt/q/libqux.so.1" || q.Via != loader.ViaCache {
		t.Errorf("libqux.so.1 = %+v", q)
	}
	n := lib(t, c, "libnew.so.1")
	if n.Path != "" || len(n.Shadows) != 1 || n.Shadows[0].Via != loader.ViaUncached {
		t.Errorf("libnew.so.1 = %+v, want it unfound, in an uncached directory", n)
	}
	if len(l.Cache.Uncached) != 1 || l.Cache.Uncached[0].Dir != "/opt/new" {
		t.Errorf("uncached %+v", l.Cache.Uncached)
	}
}

// TestWheelFramework resolves torch 2.5.1+cu124 from its known build:
// its own libraries come from the wheels through DT_RPATH, before
// LD_LIBRARY_PATH, while what the cusparse wheel loads in turn meets
// LD_LIBRARY_PATH first, as ld.so does.
func TestWheelFramework(t *testing.T) {
	site := "/opt/venv/lib/python3.10/site-packages"
	h := hosttest.Host(t, `
-- opt/venv/lib/python3.10/site-packages/torch/version.py --
-- opt/venv/lib/python3.10/site-packages/nvidia/cuda_runtime/lib/libcudart.so.12 --
-- opt/venv/lib/python3.10/site-packages/nvidia_cuda_runtime_cu12-12.4.127.dist-info/INSTALLER --
-- opt/venv/lib/python3.10/site-packages/nvidia/cusparse/lib/libcusparse.so.12 --
-- opt/venv/lib/python3.10/site-packages/nvidia/nvjitlink/lib/libnvJitLink.so.12 --
-- opt/venv/lib/python3.10/site-packages/nvidia_nvjitlink_cu12-12.4.127.dist-info/INSTALLER --
-- usr/local/cuda-12.1/lib64/libcudart.so.12.1.105 --
-- usr/local/cuda-12.1/lib64/libnvJitLink.so.12.1.105 --
-- .manifest --
symlink /usr/local/cuda-12.1/lib64/libcudart.so.12 libcudart.so.12.1.105
symlink /usr/local/cuda-12.1/lib64/libnvJitLink.so.12 libnvJitLink.so.12.1.105
`)
	obs := facts.Observation{OS: facts.OS{Family: "deb", Arch: "x86_64"},
		Python: []facts.PythonEnv{{Interpreter: "/opt/venv/bin/python", SitePackages: []string{site},
			Frameworks: []facts.Framework{{Name: "pytorch", Version: "2.5.1+cu124", CUDA: "12.4", Location: site + "/torch"}}}}}
	l, _ := loader.Observe(h, &obs, loader.Options{Session: []facts.Assignment{{Name: "LD_LIBRARY_PATH", Value: "/usr/local/cuda-12.1/lib64"}}})
	c := l.Consumers[0]
	if c.Kind != "framework" || !strings.Contains(c.NeededFrom, "framework_libraries") {
		t.Fatalf("consumer %+v", c)
	}
	if rt := lib(t, c, "libcudart.so.12"); rt.Via != loader.ViaRPath || rt.Version != "12.4.127" || rt.VersionFrom != "wheel nvidia-cuda-runtime-cu12" || len(rt.Shadows) != 1 || rt.Shadows[0].Version != "12.1.105" {
		t.Errorf("libcudart.so.12 = %+v, want the wheel's through RPATH", rt)
	}
	if nj := lib(t, c, "libnvJitLink.so.12"); nj.Via != loader.ViaLibraryPath || nj.Needer != "libcusparse.so.12" || nj.Version != "12.1.105" || len(nj.Shadows) != 1 || nj.Shadows[0].Version != "12.4.127" {
		t.Errorf("libnvJitLink.so.12 = %+v, want CUDA 12.1's, shadowing the wheel's", nj)
	}
}

func TestLibraryPath(t *testing.T) {
	for _, tc := range []struct {
		name           string
		files, session []facts.Assignment
		want           []string
	}{
		{"prepend to the environment file's", []facts.Assignment{
			{Name: "LD_LIBRARY_PATH", Value: "/b", File: "/etc/environment", Line: 3},
			{Name: "LD_LIBRARY_PATH", Value: "/a:$LD_LIBRARY_PATH", File: "/etc/profile.d/a.sh", Line: 1},
		}, nil, []string{"/a /etc/profile.d/a.sh:1", "/b /etc/environment:3"}},
		{"the conditional form and other variables", []facts.Assignment{
			{Name: "LD_LIBRARY_PATH", Value: "/c", File: "/etc/profile.d/1.sh", Line: 1},
			{Name: "LD_LIBRARY_PATH", Value: "/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}:$CUDA_HOME/lib", File: "/etc/profile.d/2.sh", Line: 2},
		}, nil, []string{"/usr/local/cuda/lib64 /etc/profile.d/2.sh:2", "/c /etc/profile.d/1.sh:1"}},
		{"a later assignment replaces", []facts.Assignment{
			{Name: "LD_LIBRARY_PATH", Value: "/old", File: "/etc/environment"},
			{Name: "LD_LIBRARY_PATH", Value: "/new", File: "/etc/profile.d/x.sh", Line: 4},
		}, nil, []string{"/new /etc/profile.d/x.sh:4"}},
		{"services' settings are not a login's", []facts.Assignment{
			{Name: "LD_LIBRARY_PATH", Value: "/svc", File: "/etc/systemd/system.conf", Line: 9},
		}, nil, nil},
		{"the session first, relative entries dropped", []facts.Assignment{
			{Name: "LD_LIBRARY_PATH", Value: "/f", File: "/etc/environment", Line: 1},
		}, []facts.Assignment{{Name: "LD_LIBRARY_PATH", Value: "/s::lib:/f"}}, []string{"/s this session's environment", "/f this session's environment"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, d := range loader.LibraryPath(tc.files, tc.session) {
				got = append(got, d.Dir+" "+d.From)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCUDARuntimeSoname(t *testing.T) {
	for v, want := range map[string]string{"12.4.1": "libcudart.so.12", "11.8": "libcudart.so.11.0", "10.1.243": "libcudart.so.10.1", "9.0.176": "libcudart.so.9.0", "13": ""} {
		if got := loader.CUDARuntimeSoname(v); got != want {
			t.Errorf("CUDARuntimeSoname(%s) = %q, want %q", v, got, want)
		}
	}
}

// TestNotELF warns about a program that is not an ELF object instead of
// inventing its needs.
func TestNotELF(t *testing.T) {
	h := hosttest.Host(t, "-- usr/bin/script --\n#!/bin/sh\n")
	obs := facts.Observation{OS: facts.OS{Family: "deb", Arch: "x86_64"}}
	l, warns := loader.Observe(h, &obs, loader.Options{Programs: []string{"/usr/bin/script"}})
	if len(warns) != 1 || !strings.Contains(warns[0].Message, "not a readable ELF program") {
		t.Errorf("warnings %v", warns)
	}
	if slices.ContainsFunc(l.Consumers, func(c facts.LoaderResolution) bool { return c.Kind == "program" }) {
		t.Error("a consumer for a file that is no program")
	}
}

// CUDA 13 wheels keep every library in one directory, nvidia/cu13/lib:
// torch's CUDA 13 build and JAX's CUDA 13 plugin find theirs there, ahead
// of an older toolkit on LD_LIBRARY_PATH.
func TestCUDA13Wheels(t *testing.T) {
	site := "/opt/venv/lib/python3.12/site-packages"
	h := hosttest.Host(t, `
-- opt/venv/lib/python3.12/site-packages/torch/version.py --
-- opt/venv/lib/python3.12/site-packages/jax/version.py --
-- opt/venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcudart.so.13 --
-- opt/venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcublas.so.13 --
-- opt/venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcusparse.so.12 --
-- opt/venv/lib/python3.12/site-packages/nvidia/cu13/lib/libnvJitLink.so.13 --
-- opt/venv/lib/python3.12/site-packages/nvidia_cuda_runtime-13.0.96.dist-info/INSTALLER --
-- opt/venv/lib/python3.12/site-packages/nvidia_nvjitlink-13.0.88.dist-info/INSTALLER --
-- usr/local/cuda-13.0/lib64/libcudart.so.13 --
`)
	obs := facts.Observation{OS: facts.OS{Family: "deb", Arch: "x86_64"},
		Python: []facts.PythonEnv{{Interpreter: "/opt/venv/bin/python", SitePackages: []string{site},
			Frameworks: []facts.Framework{
				{Name: "pytorch", Version: "2.9.0+cu130", CUDA: "13.0", Location: site + "/torch"},
				{Name: "jax", Version: "0.7.2", CUDA: "13", Location: site + "/jax"},
			}}}}
	l, _ := loader.Observe(h, &obs, loader.Options{Session: []facts.Assignment{{Name: "LD_LIBRARY_PATH", Value: "/usr/local/cuda-13.0/lib64"}}})
	for _, c := range l.Consumers[:2] {
		if !strings.Contains(c.NeededFrom, "framework_libraries row "+c.Framework) {
			t.Errorf("%s: needs from %q", c.Framework, c.NeededFrom)
		}
		rt := lib(t, c, "libcudart.so.13")
		if rt.Path != site+"/nvidia/cu13/lib/libcudart.so.13" || rt.Via != loader.ViaRPath || len(rt.Shadows) != 1 ||
			rt.Version != "13.0.96" || rt.VersionFrom != "wheel nvidia-cuda-runtime" {
			t.Errorf("%s: libcudart.so.13 = %+v, want the wheel's, hiding the toolkit's", c.Framework, rt)
		}
	}
	if nj := lib(t, l.Consumers[0], "libnvJitLink.so.13"); nj.Needer != "libcusparse.so.12" || nj.Path != site+"/nvidia/cu13/lib/libnvJitLink.so.13" || nj.Version != "13.0.88" {
		t.Errorf("torch's libnvJitLink.so.13 = %+v", nj)
	}
	if m := lib(t, l.Consumers[1], "libcudnn.so.9"); m.Path != "" {
		t.Errorf("JAX's libcudnn.so.9 found at %s, which the root lacks", m.Path)
	}
}
