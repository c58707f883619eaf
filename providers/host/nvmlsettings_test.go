package host_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"

	"github.com/gpuenv/gpuenv/apply"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

// machine is a DGX A100 from go-nvml's mock whose devices remember their
// persistence and compute modes.
func machine(t *testing.T) (*dgxa100.Server, []string) {
	srv := dgxa100.New()
	var uuids []string
	for _, d := range srv.Devices {
		dev := d.(*dgxa100.Device)
		persist, compute := nvml.FEATURE_DISABLED, nvml.COMPUTEMODE_DEFAULT
		dev.GetPersistenceModeFunc = func() (nvml.EnableState, nvml.Return) { return persist, nvml.SUCCESS }
		dev.SetPersistenceModeFunc = func(s nvml.EnableState) nvml.Return { persist = s; return nvml.SUCCESS }
		dev.GetComputeModeFunc = func() (nvml.ComputeMode, nvml.Return) { return compute, nvml.SUCCESS }
		dev.SetComputeModeFunc = func(m nvml.ComputeMode) nvml.Return { compute = m; return nvml.SUCCESS }
		u, _ := dev.GetUUID()
		uuids = append(uuids, u)
	}
	return srv, uuids
}

func TestSettings(t *testing.T) {
	srv, uuids := machine(t)
	s := host.NewDeviceSettings(srv)
	defer s.Close()
	for _, tc := range []struct{ setting, value string }{
		{"persistence_mode", "enabled"}, {"persistence_mode", "disabled"},
		{"compute_mode", "exclusive_process"}, {"compute_mode", "prohibited"}, {"compute_mode", "default"},
	} {
		if err := s.Set(uuids[3], tc.setting, tc.value); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Get(uuids[3], tc.setting); err != nil || got != tc.value {
			t.Errorf("%s: got %q, %v; want %q", tc.setting, got, err, tc.value)
		}
	}
	if got, _ := s.Get(uuids[0], "persistence_mode"); got != "disabled" {
		t.Errorf("another device changed: %s", got)
	}
	if err := s.Set(uuids[0], "compute_mode", "exclusive"); err == nil {
		t.Error("a bad value was accepted")
	}
	if _, err := s.Get("GPU-nope", "compute_mode"); err == nil || !strings.Contains(err.Error(), "ERROR_INVALID_ARGUMENT") && !strings.Contains(err.Error(), "ERROR_NOT_FOUND") {
		t.Errorf("unknown GPU: %v", err)
	}
}

func TestSettingsInitFailure(t *testing.T) {
	s := host.NewDeviceSettings(hosttest.FailingNVML(nvml.ERROR_DRIVER_NOT_LOADED))
	for i := 0; i < 2; i++ {
		// The mock panics on any call after the failed Init, as the real
		// library kills the process: the second Get must not call it.
		if _, err := s.Get("GPU-0", "persistence_mode"); err == nil || !strings.Contains(err.Error(), "not loaded") {
			t.Fatalf("get %d: %v", i, err)
		}
	}
}

// TestApplyDeviceOnLiveRoot applies and rolls back a device setting on
// the live root ("/") with the state directory in a temporary directory:
// only NVML (mocked) is touched.
func TestApplyDeviceOnLiveRoot(t *testing.T) {
	srv, uuids := machine(t)
	h := hosttest.New(t, "/")
	if !h.Live() {
		t.Fatal("/ is not live")
	}
	s := host.NewDeviceSettings(srv)
	state := t.TempDir()
	x := &apply.HostExecutor{Host: h, Devices: s}
	p := &plan.Plan{FormatVersion: plan.FormatVersion, Steps: []plan.Step{{
		Address: "device.2", Action: plan.Update,
		Operations: []plan.Operation{
			{Kind: plan.OpDevice, Device: &plan.DeviceOp{UUID: uuids[2], Index: 2, Setting: "persistence_mode", Value: "enabled"}},
			{Kind: plan.OpDevice, Device: &plan.DeviceOp{UUID: uuids[2], Index: 2, Setting: "compute_mode", Value: "exclusive_process"}},
		},
	}}}
	var out messages
	res, err := apply.Apply(context.Background(), h, p, apply.Options{StateDir: state, Executor: x, Hook: &out})
	if err != nil {
		if err == apply.ErrNotRoot {
			t.Skip("the live-root test needs root")
		}
		t.Fatal(err)
	}
	if res.Status != apply.StatusApplied {
		t.Fatalf("%s %+v\n%s", res.Status, res.Failed, out.String())
	}
	if got, _ := s.Get(uuids[2], "compute_mode"); got != "exclusive_process" {
		t.Errorf("compute mode %s", got)
	}
	if _, err := apply.Rollback(context.Background(), h, apply.RollbackOptions{StateDir: state, To: -1, Executor: x, Hook: &out}); err != nil {
		t.Fatal(err)
	}
	for setting, want := range map[string]string{"persistence_mode": "disabled", "compute_mode": "default"} {
		if got, _ := s.Get(uuids[2], setting); got != want {
			t.Errorf("after rollback %s = %s, want %s", setting, got, want)
		}
	}
}

// messages is an apply.Hook that keeps what the run said, to show when
// the test fails.
type messages struct{ strings.Builder }

func (m *messages) Wants() apply.Wants { return apply.Wants{} }

func (m *messages) Event(e apply.RunEvent) {
	if e.Line != "" || e.Error != "" {
		fmt.Fprintf(&m.Builder, "%s %s%s\n", e.Type, e.Line, e.Error)
	}
}
