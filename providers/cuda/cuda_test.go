package cuda

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plantest"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

const v118 = `{
   "cuda" : {
      "name" : "CUDA SDK",
      "version" : "11.8.20220929"
   },
   "cuda_cudart" : {
      "name" : "CUDA Runtime (cudart)",
      "version" : "11.8.89"
   },
   "cuda_nvcc" : {
      "name" : "CUDA NVCC",
      "version" : "11.8.89"
   },
   "nvidia_driver" : {
      "name" : "NVIDIA Linux Driver",
      "version" : "520.61.05"
   }
}
`

func TestNVIDIALayout(t *testing.T) {
	v124, err := os.ReadFile("testdata/version-12.4.1.json")
	if err != nil {
		t.Fatal(err)
	}
	h := hosttest.Host(t, `-- usr/local/cuda-12.4/version.json --
`+string(v124)+`-- usr/local/cuda-12.4/targets/x86_64-linux/include/cuda.h --
#define CUDA_VERSION 12040
-- usr/local/cuda-12.4/bin/nvcc --
ELF
-- usr/local/cuda-11.8/version.json --
`+v118+`-- usr/local/cuda-10.2/version.txt --
CUDA Version 10.2.89
-- usr/local/cuda-12.1/lib64/libcudart.so.12.1.105 --
-- usr/local/cuda-12.1/bin/nvcc --
-- usr/local/cuda-13.0.bak --
not a directory
-- .manifest --
symlink usr/local/cuda /etc/alternatives/cuda
symlink etc/alternatives/cuda /usr/local/cuda-12.4
symlink usr/local/cuda-12 /etc/alternatives/cuda-12
symlink etc/alternatives/cuda-12 /usr/local/cuda-12.4
symlink usr/local/cuda-12.4/include targets/x86_64-linux/include
symlink usr/local/cuda-9.9 /usr/local/nowhere
`)
	got, warns := Observe(h, plantest.Dpkg(
		facts.Package{Name: "cuda-toolkit-12-4", Version: "12.4.1-1"},
		facts.Package{Name: "cuda-toolkit-12-1", Version: "12.1.1-1"},
		// Config files only: the toolkit is gone.
		facts.Package{Name: "cuda-toolkit-11-7", Version: "11.7.1-1", State: "config-files", Want: "deinstall"},
	))
	hosttest.NoWarnings(t, warns)
	want := facts.CUDA{
		Default: "/usr/local/cuda-12.4",
		Toolkits: []facts.Toolkit{
			{Path: "/usr/local/cuda-10.2", Version: "10.2", Runtime: "10.2.89", VersionFrom: "version.txt", Layout: "nvidia"},
			{Path: "/usr/local/cuda-11.8", Version: "11.8", Runtime: "11.8.89", VersionFrom: "version.json", Layout: "nvidia"},
			{Path: "/usr/local/cuda-12.1", Version: "12.1.1", VersionFrom: "package:cuda-toolkit-12-1", Nvcc: "/usr/local/cuda-12.1/bin/nvcc", Layout: "nvidia", Package: "cuda-toolkit-12-1"},
			{Path: "/usr/local/cuda-12.4", Version: "12.4.1", Runtime: "12.4.127", VersionFrom: "version.json", Nvcc: "/usr/local/cuda-12.4/bin/nvcc", Layout: "nvidia", Package: "cuda-toolkit-12-4"},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Observe (-want +got):\n%s", diff)
	}
}

// TestDefaultIsADirectory: a runfile installed straight into
// /usr/local/cuda.
func TestDefaultIsADirectory(t *testing.T) {
	h := hosttest.Host(t, `-- usr/local/cuda/version.txt --
CUDA Version 10.0.130
`)
	got, _ := Observe(h, facts.Packages{})
	want := facts.CUDA{
		Default:  "/usr/local/cuda",
		Toolkits: []facts.Toolkit{{Path: "/usr/local/cuda", Version: "10.0", Runtime: "10.0.130", VersionFrom: "version.txt", Layout: "nvidia"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Observe (-want +got):\n%s", diff)
	}
}

func TestMalformedFallsBack(t *testing.T) {
	h := hosttest.Host(t, `-- usr/local/cuda-12.4/version.json --
{
   "cuda" : {
      "name" : "CUDA SDK",
      "vers
-- usr/local/cuda-12.4/version.txt --
garbage
-- usr/local/cuda-12.2/version.json --
{"cuda_nvcc": {"name": "CUDA NVCC", "version": "12.2.140"}}
`)
	got, warns := Observe(h, plantest.Dpkg(facts.Package{Name: "cuda-toolkit-12-4", Version: "12.4.1-1"}))
	want := []facts.Toolkit{
		{Path: "/usr/local/cuda-12.2", Layout: "nvidia"},
		{Path: "/usr/local/cuda-12.4", Version: "12.4.1", VersionFrom: "package:cuda-toolkit-12-4", Layout: "nvidia", Package: "cuda-toolkit-12-4"},
	}
	if diff := cmp.Diff(want, got.Toolkits); diff != "" {
		t.Errorf("toolkits (-want +got):\n%s", diff)
	}
	hosttest.CheckWarnings(t, warns, map[string]string{
		"/usr/local/cuda-12.2/version.json": "neither cuda nor cuda_cudart",
		"/usr/local/cuda-12.2":              "no version.json, version.txt or package",
		"/usr/local/cuda-12.4/version.json": "parsing version.json",
		"/usr/local/cuda-12.4/version.txt":  "does not read",
	})
}

func TestPackageWithoutDirectory(t *testing.T) {
	h := hosttest.Host(t, "-- etc/hostname --\nx\n")
	got, warns := Observe(h, plantest.Dpkg(
		facts.Package{Name: "cuda-toolkit-12-4", Version: "12.4.1-1"},
		facts.Package{Name: "cuda-toolkit-config-common", Version: "12.4.127-1"},
		facts.Package{Name: "nvidia-cuda-toolkit", Version: "11.8.89~11.8.0-5~deb12u1"},
	))
	if len(got.Toolkits) != 0 || got.Default != "" {
		t.Errorf("got %+v", got)
	}
	if len(warns) != 2 || warns[0].Path != "/usr/local/cuda-12.4" || warns[1].Path != DistroDir {
		t.Errorf("warnings: %v", warns)
	}
}

// TestDistroLayout lays out Debian 12's nvidia-cuda-toolkit and
// nvidia-cuda-dev as dpkg-deb -c lists them (abridged).
func TestDistroLayout(t *testing.T) {
	const files = `-- etc/nvcc.profile --
NVVMIR_LIBRARY_DIR = /usr/lib/nvidia-cuda-toolkit/libdevice
-- usr/bin/nvcc --
#!/bin/sh

exec /usr/lib/nvidia-cuda-toolkit/bin/nvcc "$@"
-- usr/lib/nvidia-cuda-toolkit/bin/nvcc --
ELF
-- usr/lib/nvidia-cuda-toolkit/bin/cicc --
ELF
-- usr/lib/nvidia-cuda-toolkit/libdevice/libdevice.10.bc --
-- usr/include/cuda.h --
#define CUDA_VERSION 11080
-- usr/lib/x86_64-linux-gnu/pkgconfig/cuda.pc --
prefix=/usr
includedir=${prefix}/include
libdir=/usr/lib/x86_64-linux-gnu

Name: cuda
Description: CUDA Driver Library
Version: 11.8.0
Libs: -L${libdir}/stubs -lcuda
Cflags: -I${includedir}
-- .manifest --
dir usr/lib/cuda/bin
dir usr/lib/cuda/lib64
symlink usr/lib/cuda/include/cuda.h ../../../include/cuda.h
symlink usr/lib/cuda/nvvm/libdevice ../../nvidia-cuda-toolkit/libdevice
symlink usr/lib/nvidia-cuda-toolkit/bin/nvcc.profile /etc/nvcc.profile
`
	h := hosttest.Host(t, files)
	got, warns := Observe(h, plantest.Dpkg(
		facts.Package{Name: "nvidia-cuda-toolkit", Version: "11.8.89~11.8.0-5~deb12u1"},
		facts.Package{Name: "nvidia-cuda-dev", Version: "11.8.89~11.8.0-5~deb12u1"},
	))
	hosttest.NoWarnings(t, warns)
	want := facts.CUDA{Toolkits: []facts.Toolkit{{
		Path: DistroDir, Version: "11.8.0", Runtime: "11.8.89", VersionFrom: "package:nvidia-cuda-toolkit",
		Nvcc: "/usr/bin/nvcc", Layout: "distro", Package: "nvidia-cuda-toolkit",
	}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Observe (-want +got):\n%s", diff)
	}

	// The same files with the package database lost: cuda.pc tells.
	got, warns = Observe(h, facts.Packages{})
	if len(warns) != 0 || len(got.Toolkits) != 1 || got.Toolkits[0].Version != "11.8.0" || got.Toolkits[0].VersionFrom != "cuda.pc" {
		t.Errorf("without packages: %+v %v", got, warns)
	}
}

func TestParseVersionJSON(t *testing.T) {
	cases := []struct {
		in, version, runtime string
		err                  bool
	}{
		{v118, "11.8", "11.8.89", false},
		{`{"cuda": {"name": "CUDA SDK", "version": "12.6.20241114"}}`, "12.6", "", false},
		{`{"cuda": {"name": "CUDA SDK", "version": "11.5.2"}, "cuda_cudart": {"version": "11.5.117"}}`, "11.5.2", "11.5.117", false},
		{`{"cuda": {"name": "CUDA SDK", "version": "13.3.1"}}`, "13.3.1", "", false},
		// Jetson: the third part is a build number, not an update.
		{`{"cuda": {"name": "CUDA SDK", "version": "12.2.140"}}`, "12.2", "", false},
		{`{"cuda": {"name": "CUDA SDK", "version": "12.4"}}`, "12.4", "", false},
		{`{"cuda_cudart": {"version": "12.4.127"}}`, "12.4", "12.4.127", false},
		{`{}`, "", "", true},
		{`[]`, "", "", true},
		{`{"cuda": "12.4"}`, "", "", true},
		{``, "", "", true},
	}
	for _, c := range cases {
		v, rt, err := ParseVersionJSON([]byte(c.in))
		if v != c.version || rt != c.runtime || (err != nil) != c.err {
			t.Errorf("ParseVersionJSON(%.40q) = %q, %q, %v; want %q, %q, error %v", c.in, v, rt, err, c.version, c.runtime, c.err)
		}
	}
}

func TestParseVersionTxt(t *testing.T) {
	cases := []struct{ in, version, runtime string }{
		{"CUDA Version 10.2.89\n", "10.2", "10.2.89"},
		{"CUDA Version 9.0.176\r\n", "9.0", "9.0.176"},
		{"CUDA Version 8.0.61", "8.0", "8.0.61"},
		{"CUDA Version 10.2", "10.2", "10.2"},
		{"CUDA Version\n", "", ""},
		{"", "", ""},
	}
	for _, c := range cases {
		v, rt, err := ParseVersionTxt([]byte(c.in))
		if v != c.version || rt != c.runtime || (err != nil) != (c.version == "") {
			t.Errorf("ParseVersionTxt(%q) = %q, %q, %v", c.in, v, rt, err)
		}
	}
}
