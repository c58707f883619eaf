package cudnn

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plantest"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

const header9 = `/*
 * Copyright 2014-2024 NVIDIA Corporation.  All rights reserved.
 */

/**
 * \file: The master cuDNN version file.
 */

#ifndef CUDNN_VERSION_H_
#define CUDNN_VERSION_H_

#define CUDNN_MAJOR 9
#define CUDNN_MINOR 1
#define CUDNN_PATCHLEVEL 0

#define CUDNN_VERSION (CUDNN_MAJOR * 10000 + CUDNN_MINOR * 100 + CUDNN_PATCHLEVEL)

/* cannot use constexpr here since this is a C-only file */
/* Below is the max SM version this cuDNN library is aware of and supports natively */

#define CUDNN_MAX_SM_MAJOR_NUMBER 9
#define CUDNN_MAX_SM_MINOR_NUMBER 0
#define CUDNN_MAX_DEVICE_VERSION (CUDNN_MAX_SM_MAJOR_NUMBER * 100 + CUDNN_MAX_SM_MINOR_NUMBER * 10)

#endif /* CUDNN_VERSION_H */
`

const header8 = `#ifndef CUDNN_VERSION_H_
#define CUDNN_VERSION_H_

#define CUDNN_MAJOR 8
#define CUDNN_MINOR 9
#define CUDNN_PATCHLEVEL 7

#define CUDNN_VERSION (CUDNN_MAJOR * 1000 + CUDNN_MINOR * 100 + CUDNN_PATCHLEVEL)

#endif /* CUDNN_VERSION_H */
`

// TestDebPackages lays out NVIDIA's libcudnn9-cuda-12 and
// libcudnn9-dev-cuda-12 as installed on Ubuntu, with the alternatives
// links their postinst makes.
func TestDebPackages(t *testing.T) {
	h := hosttest.Host(t, `-- usr/include/x86_64-linux-gnu/cudnn_version_v9.h --
`+header9+`-- usr/include/x86_64-linux-gnu/cudnn_v9.h --
#include "cudnn_version.h"
#include "cudnn_graph.h"
-- usr/lib/x86_64-linux-gnu/libcudnn.so.9.1.0 --
-- usr/lib/x86_64-linux-gnu/libcudnn_ops.so.9.1.0 --
-- usr/lib/x86_64-linux-gnu/libcudnn_graph.so.9.1.0 --
-- usr/lib/x86_64-linux-gnu/libc.so.6 --
-- .manifest --
symlink usr/include/cudnn_version.h /etc/alternatives/cudnn_version_h
symlink etc/alternatives/cudnn_version_h /usr/include/x86_64-linux-gnu/cudnn_version_v9.h
symlink usr/include/cudnn.h /etc/alternatives/libcudnn
symlink etc/alternatives/libcudnn /usr/include/x86_64-linux-gnu/cudnn_v9.h
symlink usr/lib/x86_64-linux-gnu/libcudnn.so.9 libcudnn.so.9.1.0
symlink usr/lib/x86_64-linux-gnu/libcudnn.so /etc/alternatives/libcudnn_so
symlink etc/alternatives/libcudnn_so /usr/lib/x86_64-linux-gnu/libcudnn.so.9
`)
	got, warns := Observe(h, plantest.Dpkg(
		facts.Package{Name: "libcudnn9-cuda-12", Version: "9.1.0.70-1"},
		facts.Package{Name: "libcudnn9-dev-cuda-12", Version: "9.1.0.70-1"},
	))
	hosttest.NoWarnings(t, warns)
	want := facts.CuDNN{Installs: []facts.CuDNNInstall{{
		Version: "9.1.0",
		Header:  "/usr/include/x86_64-linux-gnu/cudnn_version_v9.h",
		Libraries: []string{
			"/usr/lib/x86_64-linux-gnu/libcudnn.so.9.1.0",
			"/usr/lib/x86_64-linux-gnu/libcudnn_graph.so.9.1.0",
			"/usr/lib/x86_64-linux-gnu/libcudnn_ops.so.9.1.0",
		},
		CUDAMajor:      "12",
		Package:        "libcudnn9-cuda-12",
		PackageVersion: "9.1.0.70-1",
	}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Observe (-want +got):\n%s", diff)
	}
}

// TestSeveral: cuDNN 8 from a package, a tarball copied into a toolkit,
// an old cudnn.h, and a package whose files are gone.
func TestSeveral(t *testing.T) {
	h := hosttest.Host(t, `-- usr/include/x86_64-linux-gnu/cudnn_version_v8.h --
`+header8+`-- usr/lib/x86_64-linux-gnu/libcudnn.so.8.9.7 --
-- usr/local/cuda-12.4/targets/x86_64-linux/include/cudnn_version.h --
`+header9+`-- usr/local/cuda-12.4/targets/x86_64-linux/include/cudnn.h --
#include "cudnn_version.h"
-- usr/local/cuda-12.4/targets/x86_64-linux/lib/libcudnn.so.9.1.0 --
-- usr/local/cuda-10.2/include/cudnn.h --
#define CUDNN_MAJOR 7
#define CUDNN_MINOR 6
#define CUDNN_PATCHLEVEL 5
-- usr/local/cuda-10.2/lib64/libcudnn.so.7.6.5 --
-- .manifest --
symlink usr/local/cuda-12.4/include targets/x86_64-linux/include
symlink usr/local/cuda-12.4/lib64 targets/x86_64-linux/lib
symlink usr/local/cuda /usr/local/cuda-12.4
symlink usr/lib/x86_64-linux-gnu/libcudnn.so.8 libcudnn.so.8.9.7
symlink usr/local/cuda-12.4/targets/x86_64-linux/lib/libcudnn.so.9 libcudnn.so.9.1.0
symlink usr/local/cuda-10.2/lib64/libcudnn.so.7 libcudnn.so.7.6.5
`)
	got, warns := Observe(h, plantest.Dpkg(
		facts.Package{Name: "libcudnn8", Version: "8.9.7.29-1+cuda12.2"},
		facts.Package{Name: "libcudnn8-dev", Version: "8.9.7.29-1+cuda12.2"},
		facts.Package{Name: "libcudnn9-cuda-13", Version: "9.13.0.50-1"},
	))
	want := facts.CuDNN{Installs: []facts.CuDNNInstall{
		{Version: "8.9.7", Header: "/usr/include/x86_64-linux-gnu/cudnn_version_v8.h", Libraries: []string{"/usr/lib/x86_64-linux-gnu/libcudnn.so.8.9.7"}, CUDAMajor: "12", Package: "libcudnn8", PackageVersion: "8.9.7.29-1+cuda12.2"},
		{Version: "9.13.0", CUDAMajor: "13", Package: "libcudnn9-cuda-13", PackageVersion: "9.13.0.50-1"},
		{Version: "7.6.5", Header: "/usr/local/cuda-10.2/include/cudnn.h", Libraries: []string{"/usr/local/cuda-10.2/lib64/libcudnn.so.7.6.5"}, CUDAMajor: "10"},
		{Version: "9.1.0", Header: "/usr/local/cuda-12.4/targets/x86_64-linux/include/cudnn_version.h", Libraries: []string{"/usr/local/cuda-12.4/targets/x86_64-linux/lib/libcudnn.so.9.1.0"}, CUDAMajor: "12"},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Observe (-want +got):\n%s", diff)
	}
	if len(warns) != 1 || !strings.Contains(warns[0].Message, "libcudnn9-cuda-13 9.13.0.50-1 is installed but neither") {
		t.Errorf("warnings: %v", warns)
	}
}

// TestToolkitLinks: a toolkit is looked through once whatever links
// lead to it, from anywhere, under a name path.Match would read as a
// pattern; a link that leads nowhere finds nothing.
func TestToolkitLinks(t *testing.T) {
	h := hosttest.Host(t, `-- opt/cuda[12]/include/cudnn_version.h --
`+header9+`-- opt/cuda[12]/lib64/libcudnn.so.9.1.0 --
-- .manifest --
symlink opt/cuda[12]/lib64/libcudnn.so.9 libcudnn.so.9.1.0
symlink usr/local/cuda /opt/cuda[12]
symlink usr/local/cuda-12 /usr/local/cuda
symlink usr/local/cuda-11 /nowhere
`)
	got, warns := Observe(h, facts.Packages{})
	want := facts.CuDNN{Installs: []facts.CuDNNInstall{
		{Version: "9.1.0", Header: "/opt/cuda[12]/include/cudnn_version.h", Libraries: []string{"/opt/cuda[12]/lib64/libcudnn.so.9.1.0"}},
	}}
	if diff := cmp.Diff(want, got); diff != "" || len(warns) != 0 {
		t.Errorf("Observe (-want +got):\n%s%v", diff, warns)
	}
}

func TestTruncatedHeader(t *testing.T) {
	h := hosttest.Host(t, `-- usr/include/cudnn_version.h --
#define CUDNN_MAJOR 9
#define CUDNN_MIN
-- usr/lib/x86_64-linux-gnu/libcudnn.so.9.1.0 --
-- .manifest --
symlink usr/lib/x86_64-linux-gnu/libcudnn.so.9 libcudnn.so.9.1.0
`)
	got, warns := Observe(h, facts.Packages{})
	if len(warns) != 1 || warns[0].Path != "/usr/include/cudnn_version.h" || !strings.Contains(warns[0].Message, "truncated") {
		t.Errorf("warnings: %v", warns)
	}
	// The libraries still tell.
	if len(got.Installs) != 1 || got.Installs[0].Version != "9.1.0" || got.Installs[0].Header != "" {
		t.Errorf("installs: %+v", got.Installs)
	}
}

// TestSonameLinks: libraries are found through their soname links, as
// ldconfig and the packages leave them; a link to a file that is not there
// or names another major finds nothing.
func TestSonameLinks(t *testing.T) {
	h := hosttest.Host(t, `-- usr/lib64/libcudnn.so.8 --
not a link: the file itself carries only the major
-- usr/lib64/libcudnn.so.9.0.0 --
-- .manifest --
symlink usr/lib/x86_64-linux-gnu/libcudnn.so.9 libcudnn.so.9.2.1
symlink usr/lib/x86_64-linux-gnu/libcudnn.so.7 libcudnn.so.8.0.0
`)
	got, warns := Observe(h, facts.Packages{})
	if len(got.Installs) != 0 || len(warns) != 0 {
		t.Errorf("got %+v, %v", got.Installs, warns)
	}
}

func TestNothing(t *testing.T) {
	h := hosttest.Host(t, "-- etc/hostname --\nx\n")
	got, warns := Observe(h, facts.Packages{})
	if len(got.Installs) != 0 || got.Installs == nil || len(warns) != 0 {
		t.Errorf("got %#v, %v", got, warns)
	}
}

func TestParseHeader(t *testing.T) {
	cases := []struct {
		in, want string
		err      bool
	}{
		{header9, "9.1.0", false},
		{header8, "8.9.7", false},
		{"#  define CUDNN_MAJOR  7\n#define CUDNN_MINOR 6\n\t#define CUDNN_PATCHLEVEL 5\n", "7.6.5", false},
		{"// #define CUDNN_MAJOR 1\n", "", true},
		{"#define CUDNN_MAJOR 9\n", "", true},
		{"#define CUDNN_MAJOR_X 9\n", "", true},
		{"", "", true},
	}
	for _, c := range cases {
		got, err := ParseHeader([]byte(c.in))
		if got != c.want || (err != nil) != c.err {
			t.Errorf("ParseHeader(%.40q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}
