package doctor_test

import (
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner/doctor"
)

// check returns the check with id, or fails the test.
func checkOf(t *testing.T, r *doctor.Report, id string) doctor.Check {
	t.Helper()
	for _, k := range r.Checks {
		if k.ID == id {
			return k
		}
	}
	t.Fatalf("no check %s", id)
	return doctor.Check{}
}

// An old GPU the installed torch carries no code for: the evidence says
// where its capability left CUDA and PyTorch's wheels, and the fix names
// what still runs, or says that no wheel does.
func TestOldGPUWithModernTorch(t *testing.T) {
	for _, tc := range []struct {
		pciID, driver string
		evidence      []string
		fix           string
	}{
		{"1024", "470.256.02", []string{
			"CUDA 11.8 is the last CUDA release that builds for compute capability 3.5",
			"the newest PyTorch wheel with code for compute capability 3.5: torch 1.2 (cu100",
		}, "pip install torch==1.2.0+cu100 -f https://download.pytorch.org/whl/torch_stable.html"},
		{"102D", "470.256.02", []string{
			"the newest PyTorch wheel with code for compute capability 3.7: torch 2.7 (cu118",
		}, "torch 2.5 from https://download.pytorch.org/whl/cu118"}, // the same release, from the CUDA 11.8 index
		{"1180", "470.256.02", []string{
			"CUDA 10.2 is the last CUDA release that builds for compute capability 3.0",
			"no PyTorch wheel in gpuenv's tables (1.0 and later) carries code for compute capability 3.0",
		}, "No PyTorch wheel, of any release gpuenv's tables list, carries code for compute capability 3.0"},
	} {
		m := machine{fixture: "tensorflow-no-cudnn", pythons: []string{"/opt/venv/bin/python"}, change: func(t *testing.T, root string) {
			writeFile("sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/uevent", "DRIVER=nvidia\nPCI_CLASS=30200\nPCI_ID=10DE:"+tc.pciID+"\nPCI_SLOT_NAME=0000:01:00.0\n")(t, root)
			writeFile("proc/driver/nvidia/version", "NVRM version: NVIDIA UNIX x86_64 Kernel Module  "+tc.driver+"  Thu Oct 31 18:05:23 UTC 2024\n")(t, root)
			writeFile("sys/module/nvidia/version", tc.driver+"\n")(t, root)
			writeFile("opt/venv/pyvenv.cfg", "home = /usr/bin\nversion = 3.10.12\n")(t, root)
			writeFile("opt/venv/lib/python3.10/site-packages/torch/version.py", "__version__ = '2.5.1+cu121'\ncuda = '12.1'\n")(t, root)
			writeFile("opt/venv/lib/python3.10/site-packages/torch-2.5.1+cu121.dist-info/INSTALLER", "pip\n")(t, root)
			symlink("opt/venv/bin/python", "/usr/bin/python3")(t, root)
		}}
		c := checkOf(t, m.report(t), "framework.arch:/opt/venv/bin/python:pytorch")
		if c.Status != doctor.Problem {
			t.Errorf("10de:%s: %s %s", tc.pciID, c.Status, c.Summary)
		}
		ev := strings.Join(c.Evidence, "\n")
		for _, want := range tc.evidence {
			if !strings.Contains(ev, want) {
				t.Errorf("10de:%s: evidence lacks %q:\n%s", tc.pciID, want, ev)
			}
		}
		if c.Fix == nil || !strings.Contains(c.Fix.Text+"\n"+strings.Join(c.Fix.Commands, "\n"), tc.fix) {
			t.Errorf("10de:%s: fix %+v, want %q", tc.pciID, c.Fix, tc.fix)
		}
	}
}
