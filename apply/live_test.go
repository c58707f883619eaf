package apply_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/gpuenv/gpuenv/apply"
	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/providers/host"
)

// recorder is a host.Runner that records commands and runs none.
type recorder struct {
	mu   sync.Mutex
	cmds []string
}

func (r *recorder) Run(_ context.Context, c host.Command) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cmds = append(r.cmds, strings.Join(c.Argv, " "))
	return nil
}

// TestLiveRootCommands checks what runs on the live root ("/"), where
// kernel operations are executed and services started, without running
// anything: the runner only records.
func TestLiveRootCommands(t *testing.T) {
	rec := &recorder{}
	h, err := host.New("/", host.WithRunner(rec))
	if err != nil {
		t.Fatal(err)
	}
	p := &planner.Plan{FormatVersion: planner.FormatVersion, Steps: []planner.Step{
		{Address: "kernel.gpuenv_test", Action: planner.Update, Operations: []planner.Operation{
			{Kind: planner.OpKernel, Kernel: &planner.KernelOp{Action: "load_module", Module: "nvidia_peermem"}},
		}},
		{Address: "service.gpuenv-test", Action: planner.Update, Operations: []planner.Operation{
			{Kind: planner.OpService, Service: &planner.ServiceOp{Unit: "gpuenv-compute-mode.service", Enable: true, Now: true}},
		}},
	}}
	var out eventLog
	res, err := apply.Apply(context.Background(), h, p, apply.Options{StateDir: t.TempDir(), Hook: &out})
	if err == apply.ErrNotRoot {
		t.Skip("needs root")
	}
	if err != nil || res.Status != apply.StatusApplied || len(res.Skipped) != 0 {
		t.Fatalf("%v %+v\n%s", err, res, out.String())
	}
	got := strings.Join(rec.cmds, "\n")
	want := "modprobe nvidia_peermem\nsystemctl is-active gpuenv-compute-mode.service\nsystemctl enable --now gpuenv-compute-mode.service"
	if got != want {
		t.Errorf("commands:\n%s\nwant:\n%s", got, want)
	}
}

func TestDescribe(t *testing.T) {
	for _, tc := range []struct {
		op   planner.Operation
		want string
	}{
		{planner.Operation{Kind: planner.OpPackages, Packages: &planner.PackagesOp{Manager: "apt", Install: []planner.PackagePin{{Name: "cuda-toolkit-12-4", Version: "12.4.1-1"}}}}, "apt: installing cuda-toolkit-12-4 12.4.1-1"},
		{planner.Operation{Kind: planner.OpPackages, Packages: &planner.PackagesOp{Manager: "apt", AllowDowngrade: true, Install: []planner.PackagePin{{Name: "nvidia-driver", Version: "535.261.03-1"}}, Remove: []string{"x"}, Purge: true}}, "apt: installing (downgrading) nvidia-driver 535.261.03-1; purging x"},
		{planner.Operation{Kind: planner.OpFile, File: &planner.FileOp{Path: "/etc/a", Remove: true}}, "removing /etc/a"},
		{planner.Operation{Kind: planner.OpGroup, Group: &planner.GroupOp{Group: "video", Add: []string{"a", "b"}}}, "adding a, b to video"},
		{planner.Operation{Kind: planner.OpService, Service: &planner.ServiceOp{Unit: "u"}}, "disabling u"},
		{planner.Operation{Kind: planner.OpDevice, Device: &planner.DeviceOp{Index: 1, Setting: "compute_mode", Value: "default"}}, "setting compute_mode of GPU 1 to default"},
	} {
		if got := apply.Describe(tc.op); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

func TestValidatePlan(t *testing.T) {
	for _, tc := range []struct {
		op   planner.Operation
		want string
	}{
		{planner.Operation{Kind: planner.OpPackages, Packages: &planner.PackagesOp{Manager: "zypper"}}, "apt, dnf and pip"},
		{planner.Operation{Kind: planner.OpFile, File: &planner.FileOp{Path: "etc/x"}}, "not an absolute"},
		{planner.Operation{Kind: planner.OpKernel, Kernel: &planner.KernelOp{Action: "reboot"}}, "unknown kernel action"},
		{planner.Operation{Kind: planner.OpKernel, Kernel: &planner.KernelOp{Action: "load_module"}}, "names no module"},
		{planner.Operation{Kind: planner.OpGroup, File: &planner.FileOp{Path: "/x"}}, "exactly its own field"},
		{planner.Operation{Kind: "reboot"}, "unknown operation kind"},
		// What an edited saved plan once made apply do.
		{planner.Operation{Kind: planner.OpPackages, Packages: &planner.PackagesOp{Manager: "apt", Install: []planner.PackagePin{{Name: "-oDPkg::Pre-Invoke::=touch /tmp/x", Version: "1.0-1"}}}}, "is not a package name apt accepts"},
		{planner.Operation{Kind: planner.OpFile, File: &planner.FileOp{Path: "/etc/ld.so.conf.d/gpuenv.conf", After: []string{"sh", "-c", "touch /tmp/x"}}}, "is not one gpuenv runs"},
		{planner.Operation{Kind: planner.OpFile, File: &planner.FileOp{Path: "/etc/../../../../tmp/x"}}, "not an absolute, clean path"},
		{planner.Operation{Kind: planner.OpService, Service: &planner.ServiceOp{Unit: "ssh.service"}}, "not one gpuenv manages"},
	} {
		if err := apply.ValidatePlan(oneStep("x", planner.Update, tc.op)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.op, err, tc.want)
		}
	}
	if err := apply.ValidatePlan(&planner.Plan{FormatVersion: "9.0"}); err == nil {
		t.Error("format 9.0 accepted")
	}
}
