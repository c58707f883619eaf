package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

// TestDoctorPID: doctor --pid judges a running job's environment, read
// from its /proc/PID/environ inside the root, with the invoking user's
// shell files; a process that does not exist is an error naming it.
func TestDoctorPID(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("the fixture's device nodes need root")
	}
	root := t.TempDir()
	if err := hosttest.BuildNamed(repoTestdata(), "ubuntu2204-working", root); err != nil {
		t.Fatal(err)
	}
	write := func(p, content string) {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("proc/4242/environ", "HOME=/home/job\x00LD_LIBRARY_PATH=/opt/cuda-12.1/lib64/stubs\x00CUDA_VISIBLE_DEVICES=0\x00")
	write("opt/cuda-12.1/lib64/stubs/libcuda.so", "")
	write("root/.bashrc", "export CUDA_DEVICE_ORDER=PCI_BUS_ID\n")

	code, stdout, stderr := gpuenv(t, nil, "--root", root, "doctor", "--json", "--pid", "4242")
	if code != exitChanges {
		t.Fatalf("exit %d, want %d (a problem)\n%s", code, exitChanges, stderr)
	}
	var doc struct {
		Checks []struct {
			ID       string   `json:"id"`
			Status   string   `json:"status"`
			Evidence []string `json:"evidence"`
		} `json:"checks"`
		Session struct {
			ShellFiles []struct {
				Name, File string
			} `json:"shell_files"`
			Process struct {
				PID       int `json:"pid"`
				Variables []struct {
					Name string `json:"name"`
				} `json:"variables"`
			} `json:"process"`
		} `json:"session"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Session.Process.PID != 4242 || len(doc.Session.Process.Variables) != 2 {
		t.Errorf("process: %+v", doc.Session.Process)
	}
	if len(doc.Session.ShellFiles) != 1 || doc.Session.ShellFiles[0].File != "/root/.bashrc" {
		t.Errorf("shell files: %+v", doc.Session.ShellFiles)
	}
	i := slices.IndexFunc(doc.Checks, func(c struct {
		ID       string   `json:"id"`
		Status   string   `json:"status"`
		Evidence []string `json:"evidence"`
	}) bool {
		return c.ID == "env.stub-libcuda"
	})
	if i < 0 || doc.Checks[i].Status != "problem" || !strings.Contains(strings.Join(doc.Checks[i].Evidence, "\n"), "/proc/4242/environ") {
		t.Errorf("env.stub-libcuda: %+v", doc.Checks)
	}

	code, _, stderr = gpuenv(t, nil, "--root", root, "doctor", "--pid", "4243")
	if code != 1 || !strings.Contains(stderr, "--pid 4243") {
		t.Errorf("a missing process: exit %d, %s", code, stderr)
	}
	code, _, stderr = gpuenv(t, nil, "--root", root, "doctor", "--pid", "-3")
	if code != 1 || !strings.Contains(stderr, "--pid -3") {
		t.Errorf("a negative pid: exit %d, %s", code, stderr)
	}
}
