package apply_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner"
)

// A CDI step of a plan that changes the driver is written by apply from
// the files the driver step left, and rollback restores the spec the
// host had, byte for byte.
func TestApplyGeneratesCDISpec(t *testing.T) {
	fx := newFixture(t)
	write := func(p, content string) {
		t.Helper()
		full := filepath.Join(fx.Root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The new driver's files, as its packages left them.
	write("/proc/driver/nvidia/gpus/0000:18:00.0/information", "GPU UUID: \t GPU-5d5a1ee2-2f2a-4b33-9ac3-5b3e8f1b2c4d\nDevice Minor: \t 0\n")
	write("/dev/nvidia0", "")
	write("/dev/nvidiactl", "")
	write("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.570.124.06", "")
	if err := os.Symlink("libnvidia-ml.so.570.124.06", filepath.Join(fx.Root, "usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1")); err != nil {
		t.Fatal(err)
	}
	write("/var/lib/dpkg/info/libnvidia-ml1.list", "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1\n/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.570.124.06\n")
	status, err := os.OpenFile(filepath.Join(fx.Root, "var/lib/dpkg/status"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	status.WriteString("\nPackage: libnvidia-ml1\nStatus: install ok installed\nArchitecture: amd64\nVersion: 570.124.06-1\n")
	status.Close()
	// The spec of the driver before.
	old := "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n  - name: all\n    containerEdits:\n      deviceNodes:\n        - path: /dev/nvidia0\n"
	write("/etc/cdi/nvidia.yaml", old)
	before := fx.snapshot()

	p := &planner.Plan{FormatVersion: planner.FormatVersion, Steps: []planner.Step{{
		Address: "container_toolkit.cdi", Action: planner.Update, Reason: "the driver changes",
		Operations: []planner.Operation{{Kind: planner.OpFile, File: &planner.FileOp{Path: "/etc/cdi/nvidia.yaml", Mode: 0o644, Generate: planner.GenerateCDI}}},
	}}}
	fx.applies(p)
	got := fx.read("/etc/cdi/nvidia.yaml")
	for _, want := range []string{"hostPath: /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.570.124.06", "name: GPU-5d5a1ee2-2f2a-4b33-9ac3-5b3e8f1b2c4d", "- path: /dev/nvidiactl"} {
		if !strings.Contains(got, want) {
			t.Errorf("the written spec lacks %q:\n%s", want, got)
		}
	}
	fx.rollsBack(before, "after writing the CDI spec")
	if fx.read("/etc/cdi/nvidia.yaml") != old {
		t.Error("rollback did not restore the previous spec")
	}
}
