package apply_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/gpuenv/gpuenv/apply"
	"github.com/gpuenv/gpuenv/apply/applytest"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/planner/reload"
	"github.com/gpuenv/gpuenv/providers"
	"github.com/gpuenv/gpuenv/providers/driver"
	"github.com/gpuenv/gpuenv/providers/host"
)

// newVersion is the driver the reload host is upgraded to.
var newVersion, _, _ = strings.Cut(applytest.DriverNew, "-")

// reloadHost is the reload host (applytest.BuildReloadHost) as the
// running system, and the upgrade that reloads its modules.
func reloadHost(t *testing.T) (*testHost, *plan.Plan) {
	t.Helper()
	f := build(t, applytest.BuildReloadHost)
	fx := openReloadHost(t, f.Dir)
	return fx, reloadPlan(t, fx.h, reload.Options{})
}

// openReloadHost opens the reload host laid out in dir as the running
// system, its commands run by the fakes.
func openReloadHost(t *testing.T, dir string) *testHost {
	t.Helper()
	f := applytest.OpenHost(dir)
	fx := newTestHost(t, f.Dir, f.Root, f.Env, applytest.Snapshot)
	var err error
	if fx.h, err = host.New(f.Root, host.WithRunner(fx.runner), host.AsRunningSystem()); err != nil {
		t.Fatal(err)
	}
	return fx
}

// reloadPlan is the driver upgrade the planner makes on h
// (applytest.ReloadPlan).
func reloadPlan(t *testing.T, h *host.Host, o reload.Options) *plan.Plan {
	t.Helper()
	p, err := applytest.ReloadPlan(providers.Observe(context.Background(), h, providers.ObserveOptions{}), o, driver.ReloadOperations)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// nvmlOf is go-nvml's mock of the fixture's kernel (applytest.KernelNVML).
func nvmlOf(root string) *mock.Interface { return applytest.KernelNVML(root) }

func (fx *testHost) reloadOpts(lib nvml.Interface) apply.Options {
	o := fx.opts(&apply.HostExecutor{Host: fx.h, Driver: &host.NVMLDriverVersion{Lib: lib}})
	return o
}

func (fx *testHost) loadedDriver() string {
	fx.t.Helper()
	if !fx.exists("/proc/driver/nvidia/version") {
		return ""
	}
	v, _, err := host.ParseProcVersion([]byte(fx.read("/proc/driver/nvidia/version")))
	if err != nil {
		fx.t.Fatal(err)
	}
	return v
}

func TestReloadPlanFromFacts(t *testing.T) {
	fx, p := reloadHost(t)
	var got []string
	for _, op := range p.Steps[0].Operations[1:] {
		got = append(got, apply.Describe(op))
	}
	want := []string{
		"stopping nvidia-persistenced.service",
		"unloading module nvidia_uvm", "unloading module nvidia_drm", "unloading module nvidia_modeset", "unloading module nvidia",
		"loading module nvidia", "loading module nvidia_modeset", "loading module nvidia_drm", "loading module nvidia_uvm",
		"starting nvidia-persistenced.service",
		"checking that the loaded driver is 535.309.01",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("reload operations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if err := apply.ValidatePlan(p); err != nil {
		t.Fatalf("the reload plan does not validate: %v", err)
	}

	// A program on the GPU, a display server: both named, neither
	// reloaded over.
	if err := applytest.StartProcess(fx.root, 4242, "python3", "/dev/nvidia0", "/dev/nvidia-uvm"); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(fx.root, "sys/class/drm/card1/device"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../../bus/pci/drivers/nvidia", filepath.Join(fx.root, "sys/class/drm/card1/device/driver")); err != nil {
		t.Fatal(err)
	}
	if err := applytest.StartProcess(fx.root, 1500, "Xorg", "/dev/dri/card1", "/dev/nvidiactl"); err != nil {
		t.Fatal(err)
	}
	obs := providers.Observe(context.Background(), fx.h, providers.ObserveOptions{})
	rp := reload.Decide(obs, reload.Options{})
	why := rp.Why()
	for _, w := range []string{"Xorg (pid 1500) holds nvidia_drm (/dev/dri/card1, /dev/nvidiactl)", "python3 (pid 4242) holds nvidia_uvm", "--interrupt-gpu-processes"} {
		if !strings.Contains(why, w) {
			t.Errorf("the blockers do not say %q: %s", w, why)
		}
	}
	rp = reload.Decide(obs, reload.Options{Interrupt: true})
	if len(rp.Interrupt) != 1 || rp.Interrupt[0].PID != 4242 || rp.Possible() {
		t.Errorf("with --interrupt-gpu-processes: interrupt %+v, possible %v (the display still forbids it)", rp.Interrupt, rp.Possible())
	}

	// Secure Boot with DKMS's key not enrolled.
	secureBoot(t, fx.root, 1)
	obs = providers.Observe(context.Background(), fx.h, providers.ObserveOptions{})
	if rp := reload.Decide(obs, reload.Options{BuildsModule: true}); !strings.Contains(rp.Why(), "Key was rejected by service") {
		t.Errorf("Secure Boot: %s", rp.Why())
	}
}

// The upgrade reloads the modules: the new driver answers in the kernel
// and in NVML, persistenced runs again, no reboot is asked for; the
// rollback reloads the old driver, and the host is as it was.
func TestReloadAppliesAndRollsBack(t *testing.T) {
	fx, p := reloadHost(t)
	before := fx.snapshot()
	lib := nvmlOf(fx.root)
	res := fx.apply(p, fx.reloadOpts(lib))
	if res.Status != apply.StatusApplied || res.NeedsReboot {
		t.Fatalf("status %s, needs reboot %v, failed %+v\n%s", res.Status, res.NeedsReboot, res.Failed, fx.out.String())
	}
	if v := fx.loadedDriver(); v != newVersion {
		t.Errorf("loaded driver %q, want %s", v, newVersion)
	}
	if len(lib.SystemGetDriverVersionCalls()) == 0 {
		t.Error("NVML was not asked for the driver version")
	}
	if !fx.exists("/proc/900/comm") {
		t.Error("nvidia-persistenced was not started again")
	}
	if fx.exists(apply.RebootRequired) {
		t.Errorf("%s written after a reload", apply.RebootRequired)
	}
	fx.rollsBack(before, "after rolling back a reload")
	if v := fx.loadedDriver(); v != "535.261.03" {
		t.Errorf("after the rollback the loaded driver is %q", v)
	}
}

// A process that started after the plan holds nvidia_uvm: its unload
// fails as the kernel's does, and the revert leaves the host as it was,
// the old module still loaded (exit 1).
func TestReloadRefusedByAHolder(t *testing.T) {
	fx, p := reloadHost(t)
	if err := applytest.StartProcess(fx.root, 4242, "python3", "/dev/nvidia0", "/dev/nvidia-uvm"); err != nil {
		t.Fatal(err)
	}
	before := fx.snapshot()
	res := fx.apply(p, fx.reloadOpts(nvmlOf(fx.root)))
	if res.Status != apply.StatusReverted || res.ExitCode() != 1 {
		t.Fatalf("status %s exit %d\n%s", res.Status, res.ExitCode(), fx.out.String())
	}
	if !strings.Contains(res.Failed.Error+strings.Join(res.Failed.LogTail, "\n"), "Module nvidia_uvm is in use") {
		t.Errorf("the failure does not say the module is in use: %+v", res.Failed)
	}
	fx.same(before, "after a reload refused by a holder")
}

// Secure Boot refuses the new, unsigned module: the revert restores the
// old packages and loads the old module from their files (exit 1); when
// even that load fails, the revert is incomplete (exit 3) and a rollback
// finishes it.
func TestReloadRefusedBySecureBoot(t *testing.T) {
	for _, tc := range []struct {
		name string
		// oldUnsigned: the old module was loaded before Secure Boot
		// was turned on and is unsigned too, so the kernel refuses
		// it as well once it is unloaded.
		oldUnsigned bool
		exit        int
	}{
		{name: "old module loads again", exit: 1},
		{name: "old module refused too", oldUnsigned: true, exit: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx, p := reloadHost(t)
			archive := filepath.Join(fx.dir, "archive")
			unsigned := []applytest.Deb{applytest.ModuleDeb(applytest.DriverNew, false)}
			if tc.oldUnsigned {
				old := applytest.ModuleDeb(applytest.DriverOld, false)
				unsigned = append(unsigned, old)
				for f, data := range old.Files {
					if err := os.WriteFile(filepath.Join(fx.root, "usr", f), []byte(data), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := applytest.WriteArchive(archive, unsigned...); err != nil {
				t.Fatal(err)
			}
			secureBoot(t, fx.root, 1)
			before := fx.snapshot()
			res := fx.apply(p, fx.reloadOpts(nvmlOf(fx.root)))
			if res.ExitCode() != tc.exit {
				t.Fatalf("exit %d, want %d: status %s, revert %+v\n%s", res.ExitCode(), tc.exit, res.Status, res.RevertFailed, fx.out.String())
			}
			if !strings.Contains(strings.Join(res.Failed.LogTail, "\n"), "Key was rejected by service") {
				t.Errorf("the failure does not show the kernel's refusal: %+v", res.Failed)
			}
			if tc.exit == 1 {
				if v := fx.loadedDriver(); v != "535.261.03" {
					t.Errorf("after the revert the loaded driver is %q", v)
				}
				fx.same(before, "after a reload refused by Secure Boot")
				return
			}
			if v := fx.loadedDriver(); v != "" {
				t.Errorf("loaded driver %q after the failed revert", v)
			}
			if !strings.Contains(res.RevertFailed.What, "loading module nvidia again") {
				t.Errorf("the revert failed at %q, not the old module's load", res.RevertFailed.What)
			}
			// Secure Boot off for the rollback that finishes it.
			secureBoot(t, fx.root, 0)
			if res := fx.rollback(-1); res.Status != apply.StatusDone {
				t.Fatalf("rollback: %s %+v\n%s", res.Status, res.RevertFailed, fx.out.String())
			}
			secureBoot(t, fx.root, 1)
			fx.same(before, "after a rollback finished the revert")
		})
	}
}

// secureBoot sets the fixture's SecureBoot EFI variable.
func secureBoot(t *testing.T, root string, on byte) {
	t.Helper()
	p := filepath.Join(root, applytest.SecureBootVar)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte{6, 0, 0, 0, on}, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Where the modules cannot be reloaded the step keeps its reboot, and
// apply says so to reboot coordinators as Debian's packages do.
func TestRebootRequiredWritten(t *testing.T) {
	fx, p := reloadHost(t)
	p.Steps[0].Operations = p.Steps[0].Operations[:1]
	p.Steps[0].Flags = plan.Flags{NeedsReboot: true}
	p.NeedsReboot = true
	if err := os.MkdirAll(filepath.Join(fx.root, "run"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fx.root, "run", "reboot-required.pkgs"), []byte("linux-image-6.1.0-29-amd64\nnvidia-smi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/run", filepath.Join(fx.root, "var", "run")); err != nil {
		t.Fatal(err)
	}
	res := fx.apply(p, fx.reloadOpts(nvmlOf(fx.root)))
	if res.Status != apply.StatusApplied || !res.NeedsReboot {
		t.Fatalf("status %s needs reboot %v", res.Status, res.NeedsReboot)
	}
	if got := fx.read("/run/reboot-required"); got != "*** System restart required ***\n" {
		t.Errorf("reboot-required: %q", got)
	}
	want := "linux-image-6.1.0-29-amd64\nnvidia-smi\nlibnvidia-ml1\nnvidia-kernel-dkms\n"
	if got := fx.read("/run/reboot-required.pkgs"); got != want {
		t.Errorf("reboot-required.pkgs:\n%s\nwant:\n%s", got, want)
	}
}

// With --interrupt-gpu-processes the plan names the program holding the
// GPU, and apply stops it before unloading the modules.
func TestReloadInterruptsGPUProcesses(t *testing.T) {
	f := build(t, applytest.BuildReloadHost)
	fx := openReloadHost(t, f.Dir)
	if err := applytest.StartProcess(fx.root, 4242, "python3", "/dev/nvidia0", "/dev/nvidia-uvm"); err != nil {
		t.Fatal(err)
	}
	p := reloadPlan(t, fx.h, reload.Options{Interrupt: true})
	if got := apply.Describe(p.Steps[0].Operations[2]); got != "stopping process python3 (pid 4242)" {
		t.Fatalf("operation 3 is %q", got)
	}
	res := fx.apply(p, fx.reloadOpts(nvmlOf(fx.root)))
	if res.Status != apply.StatusApplied {
		t.Fatalf("status %s, failed %+v\n%s", res.Status, res.Failed, fx.out.String())
	}
	if fx.exists("/proc/4242") || fx.loadedDriver() != newVersion {
		t.Errorf("process 4242 still there (%v) or driver %q", fx.exists("/proc/4242"), fx.loadedDriver())
	}
}

// On a root that is not the running system a reload's operations are
// skipped, each saying so, and the apply asks for a reboot.
func TestReloadSkippedOffTheRunningSystem(t *testing.T) {
	f := build(t, applytest.BuildReloadHost)
	fx := openReloadHost(t, f.Dir)
	p := reloadPlan(t, fx.h, reload.Options{})
	image := newTestHost(t, f.Dir, f.Root, f.Env, applytest.Snapshot)
	res := image.apply(p, image.opts(nil))
	if res.Status != apply.StatusApplied || !res.NeedsReboot || len(res.Skipped) != len(p.Steps[0].Operations)-1 {
		t.Fatalf("status %s, needs reboot %v, skipped %q", res.Status, res.NeedsReboot, res.Skipped)
	}
	if !strings.Contains(res.Skipped[0], "stopping nvidia-persistenced.service skipped: the root "+f.Root+" is not the running system") {
		t.Errorf("skipped: %q", res.Skipped[0])
	}
	if v := image.loadedDriver(); v != "535.261.03" {
		t.Errorf("the fixture's kernel was changed: %q", v)
	}
}
