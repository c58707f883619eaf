package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner/facts"
)

// contextSections is an observation with every kind of context fact and
// loader outcome the human view has a line for.
func contextSections() *facts.Observation {
	site := "/opt/venv/lib/python3.11/site-packages"
	return &facts.Observation{
		Context: facts.RuntimeContext{
			Kind:          "container",
			Container:     &facts.Container{Engine: "podman", Rootless: true, OverlayRoot: true, DeviceNodes: true, CUDAVersion: "12.8.1", RequireCUDA: "cuda>=12.8"},
			UserNamespace: &facts.UserNamespace{UIDMap: "0 1000 1", OverflowUID: 65534, UnmappedNodes: []string{"/dev/nvidia0", "/dev/nvidiactl"}},
			Job:           &facts.BatchJob{Scheduler: "slurm", ID: "4242", NodeGPUs: []string{"0", "1", "2", "3"}},
			WSL:           &facts.WSL{DXG: true, Libraries: []string{"/usr/lib/wsl/lib/libcuda.so.1"}},
			Suspend:       &facts.Suspend{CanSuspend: true, PreserveVideoMemory: "0", Resumes: 3},
			Evidence:      []facts.ContextEvidence{{File: "/run/.containerenv", Fact: "rootless=1"}, {File: "/proc/self/uid_map", Fact: "0 1000 1"}},
		},
		Loader: facts.Loader{
			Cache:       facts.LoaderCache{Path: "/etc/ld.so.cache", Present: true, Entries: 312, Uncached: []facts.SearchDir{{Dir: "/usr/local/cuda-12.4/lib64", From: "/etc/ld.so.conf.d/cuda.conf:1"}}},
			LibraryPath: []facts.SearchDir{{Dir: "/usr/local/cuda-12.1/lib64", From: "/etc/profile.d/cuda.sh:2"}},
			Consumers: []facts.LoaderResolution{
				{Kind: "framework", Python: "/opt/venv/bin/python", Framework: "pytorch", Subject: site + "/torch", Libraries: []facts.ResolvedLibrary{
					{Soname: "libcudart.so.12", Path: site + "/nvidia/cuda_runtime/lib/libcudart.so.12", Version: "12.4.127", Via: "RPATH"},
					{Soname: "libnvJitLink.so.12", Path: "/usr/local/cuda-12.1/lib64/libnvJitLink.so.12", Version: "12.1.105", Via: "LD_LIBRARY_PATH",
						Shadows: []facts.LibraryCandidate{{Path: site + "/nvidia/nvjitlink/lib/libnvJitLink.so.12", Version: "12.4.127", Via: "RUNPATH"}, {Path: "/usr/lib/x86_64-linux-gnu/libnvJitLink.so.12", Via: "ld.so.cache"}}},
				}},
				{Kind: "program", Subject: "/usr/local/bin/infer", Libraries: []facts.ResolvedLibrary{
					{Soname: "libcudnn.so.9", Elsewhere: []string{site + "/nvidia/cudnn/lib/libcudnn.so.9"}},
					{Soname: "libcuda.so.1", Path: "/usr/lib/x86_64-linux-gnu/libcuda.so.1", Via: "ld.so.cache"},
				}},
			},
		},
	}
}

// TestObserveContextAndLoaderView compares the human view's context and
// loader sections with testdata/observe_context.golden (-update rewrites
// it).
func TestObserveContextAndLoaderView(t *testing.T) {
	var out bytes.Buffer
	v := newObserveView(&globalOptions{Root: "/", Stdout: &out, Stderr: &out})
	if err := v.Observation(contextSections()); err != nil {
		t.Fatal(err)
	}
	var got []string
	keep := false
	for _, line := range strings.SplitAfter(out.String(), "\n") {
		switch strings.TrimSpace(line) {
		case "Where programs run", "Dynamic loader":
			keep = true
		case "":
			keep = false
		}
		if keep {
			got = append(got, line)
		}
	}
	golden := filepath.Join("testdata", "observe_context.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(strings.Join(got, "")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, "") != string(want) {
		t.Errorf("sections differ from %s:\n%s", golden, strings.Join(got, ""))
	}
}
