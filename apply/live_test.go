package apply_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/gpuenv/gpuenv/apply"
	"github.com/gpuenv/gpuenv/planner/plan"
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
	p := &plan.Plan{FormatVersion: plan.FormatVersion, Steps: []plan.Step{
		{Address: "kernel.gpuenv_test", Action: plan.Update, Operations: []plan.Operation{
			{Kind: plan.OpKernel, Kernel: &plan.KernelOp{Action: "load_module", Module: "nvidia_peermem"}},
		}},
		{Address: "service.gpuenv-test", Action: plan.Update, Operations: []plan.Operation{
			{Kind: plan.OpService, Service: &plan.ServiceOp{Unit: "gpuenv-compute-mode.service", Enable: true, Now: true}},
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
		op   plan.Operation
		want string
	}{
		{plan.Operation{Kind: plan.OpPackages, Packages: &plan.PackagesOp{Manager: "apt", Install: []plan.PackagePin{{Name: "cuda-toolkit-12-4", Version: "12.4.1-1"}}}}, "apt: installing cuda-toolkit-12-4 12.4.1-1"},
		{plan.Operation{Kind: plan.OpPackages, Packages: &plan.PackagesOp{Manager: "apt", AllowDowngrade: true, Install: []plan.PackagePin{{Name: "nvidia-driver", Version: "535.261.03-1"}}, Remove: []string{"x"}, Purge: true}}, "apt: installing (downgrading) nvidia-driver 535.261.03-1; purging x"},
		{plan.Operation{Kind: plan.OpFile, File: &plan.FileOp{Path: "/etc/a", Remove: true}}, "removing /etc/a"},
		{plan.Operation{Kind: plan.OpGroup, Group: &plan.GroupOp{Group: "video", Add: []string{"a", "b"}}}, "adding a, b to video"},
		{plan.Operation{Kind: plan.OpService, Service: &plan.ServiceOp{Unit: "u"}}, "disabling u"},
		{plan.Operation{Kind: plan.OpDevice, Device: &plan.DeviceOp{Index: 1, Setting: "compute_mode", Value: "default"}}, "setting compute_mode of GPU 1 to default"},
	} {
		if got := apply.Describe(tc.op); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

func TestValidatePlan(t *testing.T) {
	for _, tc := range []struct {
		op   plan.Operation
		want string
	}{
		{plan.Operation{Kind: plan.OpPackages, Packages: &plan.PackagesOp{Manager: "zypper"}}, "apt, dnf and pip"},
		{plan.Operation{Kind: plan.OpFile, File: &plan.FileOp{Path: "etc/x"}}, "not an absolute"},
		{plan.Operation{Kind: plan.OpKernel, Kernel: &plan.KernelOp{Action: "reboot"}}, "unknown kernel action"},
		{plan.Operation{Kind: plan.OpKernel, Kernel: &plan.KernelOp{Action: "load_module"}}, "names no module"},
		{plan.Operation{Kind: plan.OpGroup, File: &plan.FileOp{Path: "/x"}}, "exactly its own field"},
		{plan.Operation{Kind: "reboot"}, "unknown operation kind"},
		// What an edited saved plan once made apply do.
		{plan.Operation{Kind: plan.OpPackages, Packages: &plan.PackagesOp{Manager: "apt", Install: []plan.PackagePin{{Name: "-oDPkg::Pre-Invoke::=touch /tmp/x", Version: "1.0-1"}}}}, "is not a package name apt accepts"},
		{plan.Operation{Kind: plan.OpFile, File: &plan.FileOp{Path: "/etc/ld.so.conf.d/gpuenv.conf", After: []string{"sh", "-c", "touch /tmp/x"}}}, "is not one gpuenv runs"},
		{plan.Operation{Kind: plan.OpFile, File: &plan.FileOp{Path: "/etc/../../../../tmp/x"}}, "not an absolute, clean path"},
		{plan.Operation{Kind: plan.OpService, Service: &plan.ServiceOp{Unit: "ssh.service"}}, "not one gpuenv manages"},
	} {
		if err := apply.ValidatePlan(oneStep("x", plan.Update, tc.op)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.op, err, tc.want)
		}
	}
	if err := apply.ValidatePlan(&plan.Plan{FormatVersion: "9.0"}); err == nil {
		t.Error("format 9.0 accepted")
	}
}
