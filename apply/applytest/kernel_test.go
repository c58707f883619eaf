package applytest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/providers/driver"
	"github.com/gpuenv/gpuenv/providers/host"
)

// TestFakeKernel checks the fake kernel against what gpuenv reads of a
// real one: /proc/modules as the driver observation parses it, lsmod's
// table, and the kernel's refusals.
func TestFakeKernel(t *testing.T) {
	f, err := BuildReloadHost(TempDir(t))
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{Env: f.Env}
	run := func(argv ...string) (string, error) {
		var out bytes.Buffer
		err := r.Run(context.Background(), host.Command{Argv: append([]string{"chroot", f.Root}, argv...), Stdout: &out, Stderr: &out})
		return out.String(), err
	}
	data, err := os.ReadFile(filepath.Join(f.Root, "proc/modules"))
	if err != nil {
		t.Fatal(err)
	}
	mods, errs := driver.ParseModules(data, nil)
	if len(errs) > 0 || len(mods) != 4 {
		t.Fatalf("/proc/modules does not parse as the kernel's: %v %+v\n%s", errs, mods, data)
	}
	for _, m := range mods {
		// persistenced holds /dev/nvidia0 and /dev/nvidiactl.
		want := map[string]int{"nvidia": 4, "nvidia_modeset": 1}[m.Name]
		if m.RefCount != want {
			t.Errorf("%s: reference count %d, want %d (used by %v)", m.Name, m.RefCount, want, m.UsedBy)
		}
	}
	if v, _, err := driver.ParseProcVersion(must(os.ReadFile(filepath.Join(f.Root, "proc/driver/nvidia/version")))); err != nil || v != "535.261.03" {
		t.Errorf("/proc/driver/nvidia/version: %q %v", v, err)
	}
	out, err := run("lsmod")
	if err != nil || !strings.HasPrefix(out, "Module ") || !strings.Contains(out, "nvidia_modeset") || !strings.Contains(out, " 1 nvidia_drm\n") {
		t.Errorf("lsmod: %v\n%s", err, out)
	}
	if out, err := run("rmmod", "nvidia"); err == nil || !strings.Contains(out, "rmmod: ERROR: Module nvidia is in use") {
		t.Errorf("rmmod of a module in use: %v\n%s", err, out)
	}
	if out, err := run("modprobe", "-r", "nvidia_uvm"); err != nil {
		t.Errorf("modprobe -r of an unused module: %v\n%s", err, out)
	}
	if out, err := run("modprobe", "-r", "nvidia_uvm"); err == nil || !strings.Contains(out, "Module nvidia_uvm is not in kernel") {
		t.Errorf("modprobe -r of a module not loaded: %v\n%s", err, out)
	}
	if err := os.MkdirAll(filepath.Join(f.Root, filepath.Dir(SecureBootVar)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.Root, SecureBootVar), []byte{6, 0, 0, 0, 1}, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteArchive(filepath.Join(f.Root, "tmp"), ModuleDeb("535.309.01-1", false)); err != nil {
		t.Fatal(err)
	}
	if out, err := run("dpkg", "-i", "/tmp/"+ModuleDeb("535.309.01-1", false).FileName()); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if out, err := run("modprobe", "nvidia_uvm"); err == nil || !strings.Contains(out, "could not insert 'nvidia_uvm': Key was rejected by service") {
		t.Errorf("an unsigned module under Secure Boot: %v\n%s", err, out)
	}
	if out, err := run("systemctl", "stop", "nvidia-persistenced.service"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if out, _ := run("systemctl", "is-active", "nvidia-persistenced.service"); out != "inactive\n" {
		t.Errorf("is-active after stop: %q", out)
	}
}

func must(data []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return data
}
