package devices_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	planpkg "github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/planner/plantest"
	"github.com/gpuenv/gpuenv/providers/devices"
	"github.com/gpuenv/gpuenv/providers/driver"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

const wantsLink = "etc/systemd/system/multi-user.target.wants/" + devices.BootUnit

// dgxH100 returns a root to plan against, and the facts of go-nvml's DGX
// H100 mock: eight GPUs in the default compute mode.
func dgxH100(t *testing.T) (*host.Host, *facts.Observation) {
	t.Helper()
	// The loaded module, which is when NVML is asked at all.
	h := hosttest.Host(t, "-- etc/os-release --\nID=ubuntu\nVERSION_ID=\"22.04\"\n"+
		"-- proc/driver/nvidia/version --\nNVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build  (dvs-builder@U16-I3-B03-4-3)  Tue Feb 13 01:10:03 UTC 2024\n")
	obs := &facts.Observation{}
	driver.Observe(context.Background(), h, host.NewNVML(hosttest.NVMLServer("dgxh100")), obs)
	if len(obs.NVML.Devices) != 8 || obs.NVML.Devices[0].ComputeMode != "default" {
		t.Fatalf("the DGX H100 mock reports %+v", obs.NVML)
	}
	return h, obs
}

// bootStep plans src and returns the device.boot step, nil when there is
// none, checking that the device steps it depends on are among the steps.
func bootStep(t *testing.T, h *host.Host, obs *facts.Observation, src string) *planpkg.Step {
	t.Helper()
	// The unit is observed afresh: the tests change the root between
	// plans.
	obs.Units = []facts.Unit{devices.ObserveUnit(h)}
	plan := plantest.Plan(t, planner.New(devices.Kind.Provider()), plantest.LoadSpec(t, src), obs)
	var boot *planpkg.Step
	var addrs []string
	for i, s := range plan.Steps {
		addrs = append(addrs, s.Address)
		if s.Address == devices.BootAddress {
			boot = &plan.Steps[i]
			if i != len(plan.Steps)-1 {
				t.Errorf("device.boot is not last: %v", plan.Steps)
			}
		}
	}
	if boot != nil {
		for _, d := range boot.DependsOn {
			if d != "driver" && !slices.Contains(addrs, d) {
				t.Errorf("device.boot depends on %s, which is not planned", d)
			}
		}
	}
	return boot
}

const mixedSpec = `device "all" {
  compute_mode = "exclusive_process"
}

device "7" {
  compute_mode = "prohibited"
}

device "3" {
  compute_mode = "default"
}
`

func wantUnit(lines ...string) string {
	return "# Written by gpuenv from the spec's device blocks. The driver starts every\n" +
		"# GPU in the default compute mode, so the modes are set again at each boot.\n" +
		"[Unit]\nDescription=Set the GPU compute modes (gpuenv)\n" +
		"After=nvidia-persistenced.service systemd-modules-load.service\n\n" +
		"[Service]\nType=oneshot\nRemainAfterExit=yes\n" +
		strings.Join(lines, "") +
		"\n[Install]\nWantedBy=multi-user.target\n"
}

func execStart(gpu, mode string) string {
	return "ExecStart=/usr/bin/nvidia-smi -i GPU-00000000-0000-0000-0000-00000000000" + gpu + " -c " + mode + "\n"
}

var mixedUnit = wantUnit(
	execStart("0", "EXCLUSIVE_PROCESS"), execStart("1", "EXCLUSIVE_PROCESS"), execStart("2", "EXCLUSIVE_PROCESS"),
	execStart("4", "EXCLUSIVE_PROCESS"), execStart("5", "EXCLUSIVE_PROCESS"), execStart("6", "EXCLUSIVE_PROCESS"),
	execStart("7", "PROHIBITED"))

// systemd is the init of a host booted with systemd, as observed on "/".
var systemd = facts.Init{PID1: "systemd", Live: true, Systemd: true}

func TestBootUnitCreated(t *testing.T) {
	h, obs := dgxH100(t)
	obs.Init = systemd
	s := bootStep(t, h, obs, mixedSpec)
	if s == nil {
		t.Fatal("no device.boot step")
	}
	if s.Action != planpkg.Create || s.Before != nil || s.After["unit"] != "enabled" || s.After["gpu7.compute_mode_at_boot"] != "prohibited" || s.After["gpu0.compute_mode_at_boot"] != "exclusive_process" {
		t.Errorf("step %s before %v after %v", s.Action, s.Before, s.After)
	}
	if _, ok := s.After["gpu3.compute_mode_at_boot"]; ok {
		t.Errorf("GPU 3 stays in the default mode, yet the unit sets it: %v", s.After)
	}
	if !slices.Equal(s.DependsOn, []string{"device.7", "device.all"}) {
		t.Errorf("depends on %v", s.DependsOn)
	}
	if len(s.Operations) != 2 || s.Operations[0].Kind != planpkg.OpFile || s.Operations[1].Kind != planpkg.OpService {
		t.Fatalf("operations %+v", s.Operations)
	}
	f := s.Operations[0].File
	if f.Path != devices.BootUnitPath || f.Mode != 0o644 || f.Remove || !slices.Equal(f.After, []string{"systemctl", "daemon-reload"}) {
		t.Errorf("file %+v", f)
	}
	if f.Content != mixedUnit {
		t.Errorf("unit:\n%s\nwant:\n%s", f.Content, mixedUnit)
	}
	if sv := s.Operations[1].Service; *sv != (planpkg.ServiceOp{Unit: devices.BootUnit, Enable: true}) {
		t.Errorf("service %+v", sv)
	}

	// Where systemd does not run the root (a container whose process 1 is
	// bash, an image), systemctl daemon-reload fails or does nothing: the
	// unit is read when the root boots with systemd.
	for _, in := range []facts.Init{{PID1: "bash", Live: true}, {PID1: "systemd"}, {}} {
		obs.Init = in
		s := bootStep(t, h, obs, mixedSpec)
		if s == nil || len(s.Operations) != 2 || s.Operations[0].File == nil || s.Operations[0].File.After != nil {
			t.Errorf("init %+v: %+v", in, s)
		}
	}
	obs.Init = systemd

	// The same spec writes the same bytes whatever order NVML lists the
	// GPUs in.
	slices.Reverse(obs.NVML.Devices)
	if again := bootStep(t, h, obs, mixedSpec); again == nil || again.Operations[0].File.Content != mixedUnit {
		t.Errorf("with the GPUs listed in reverse: %+v", again)
	}
}

// install lays the unit and, when enabled, its enablement link out in the
// root as apply and systemctl enable leave them.
func install(t *testing.T, h *host.Host, content string, enabled bool) {
	t.Helper()
	hosttest.WriteFile(t, h.Root(), devices.BootUnitPath, content)
	link := filepath.Join(h.Root(), wantsLink)
	if !enabled {
		os.Remove(link)
		return
	}
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	os.Remove(link)
	if err := os.Symlink(devices.BootUnitPath, link); err != nil {
		t.Fatal(err)
	}
}

func TestBootUnitConverges(t *testing.T) {
	h, obs := dgxH100(t)
	install(t, h, mixedUnit, true)
	if s := bootStep(t, h, obs, mixedSpec); s != nil {
		t.Errorf("the unit is in place and enabled, yet: %+v", s)
	}

	// In place but not enabled: only enabled.
	install(t, h, mixedUnit, false)
	s := bootStep(t, h, obs, mixedSpec)
	if s == nil || s.Action != planpkg.Update || s.Before["unit"] != "disabled" || len(s.Operations) != 1 || s.Operations[0].Kind != planpkg.OpService || !s.Operations[0].Service.Enable {
		t.Fatalf("disabled unit: %+v", s)
	}

	// Enabled with other modes: only rewritten.
	install(t, h, wantUnit(execStart("0", "PROHIBITED")), true)
	s = bootStep(t, h, obs, mixedSpec)
	if s == nil || s.Action != planpkg.Update || s.Before["unit"] != "enabled" || len(s.Operations) != 1 || s.Operations[0].Kind != planpkg.OpFile || s.Operations[0].File.Content != mixedUnit {
		t.Fatalf("stale unit: %+v", s)
	}
}

func TestBootUnitRemoved(t *testing.T) {
	for _, src := range []string{
		"device \"all\" {\n  absent = true\n}\n",
		"device \"all\" {\n  compute_mode = \"default\"\n}\n\ndevice \"2\" {\n  absent = true\n}\n",
	} {
		h, obs := dgxH100(t)
		if s := bootStep(t, h, obs, src); s != nil {
			t.Errorf("no unit to remove, yet: %+v", s)
		}
		install(t, h, mixedUnit, true)
		s := bootStep(t, h, obs, src)
		if s == nil || s.Action != planpkg.Delete || s.Before["unit"] != "enabled" || s.After["unit"] != "absent" || len(s.Operations) != 2 {
			t.Fatalf("%s: %+v", src, s)
		}
		// Disabled first: systemctl reads the unit file to find its links.
		if sv := s.Operations[0].Service; sv == nil || *sv != (planpkg.ServiceOp{Unit: devices.BootUnit}) {
			t.Errorf("first operation %+v", s.Operations[0])
		}
		if f := s.Operations[1].File; f == nil || f.Path != devices.BootUnitPath || !f.Remove || f.After != nil {
			t.Errorf("second operation %+v", s.Operations[1])
		}
		obs.Init = systemd
		if f := bootStep(t, h, obs, src).Operations[1].File; !slices.Equal(f.After, []string{"systemctl", "daemon-reload"}) {
			t.Errorf("with systemd running the root, removing the unit is followed by %q", f.After)
		}
		obs.Init = facts.Init{}

		// A unit that is no longer enabled is only removed.
		install(t, h, mixedUnit, false)
		if s := bootStep(t, h, obs, src); s == nil || len(s.Operations) != 1 || s.Operations[0].Kind != planpkg.OpFile {
			t.Errorf("disabled unit: %+v", s)
		}
	}
}

func TestBootUnitLeftAlone(t *testing.T) {
	h, obs := dgxH100(t)
	install(t, h, mixedUnit, true)
	// No block manages compute modes: the unit is not the spec's business.
	if s := bootStep(t, h, obs, "group \"video\" {\n  members = [\"alice\"]\n}\n"); s != nil {
		t.Errorf("without device blocks: %+v", s)
	}
	// NVML shows no GPU: the unit cannot name them, and the device blocks
	// warn instead.
	obs.NVML = facts.NVML{Status: "driver_not_loaded"}
	if s := bootStep(t, h, obs, mixedSpec); s != nil {
		t.Errorf("without NVML: %+v", s)
	}
	// Without a Host nothing can be compared.
	_, obs = dgxH100(t)
	plan, _ := planner.New(devices.Kind.Provider()).Plan(context.Background(), plantest.LoadSpec(t, mixedSpec), obs)
	for _, s := range plan.Steps {
		if s.Address == devices.BootAddress {
			t.Errorf("without a Host: %+v", s)
		}
	}
}

// A block for one GPU takes precedence over device "all" for that GPU.
func TestPlanPrecedence(t *testing.T) {
	h, obs := dgxH100(t)
	// The unit is observed afresh: the tests change the root between
	// plans.
	obs.Units = []facts.Unit{devices.ObserveUnit(h)}
	plan := plantest.Plan(t, planner.New(devices.Kind.Provider()), plantest.LoadSpec(t, mixedSpec), obs)
	set := map[int][]string{}
	for _, s := range plan.Steps {
		for _, op := range s.Operations {
			if op.Kind == planpkg.OpDevice {
				set[op.Device.Index] = append(set[op.Device.Index], s.Address+"="+op.Device.Value)
			}
		}
	}
	for i := range 8 {
		want := []string{"device.all=exclusive_process"}
		switch i {
		case 3:
			want = nil
		case 7:
			want = []string{"device.7=prohibited"}
		}
		if !slices.Equal(set[i], want) {
			t.Errorf("GPU %d: %v, want %v", i, set[i], want)
		}
	}
}

// The unit's observation reads back the modes it sets, by GPU UUID, which
// doctor compares with the GPUs' MIG modes.
func TestObservedUnitComputeModes(t *testing.T) {
	h, _ := dgxH100(t)
	install(t, h, mixedUnit+"ExecStart=/usr/bin/nvidia-smi -i not-a-uuid -c PROHIBITED\n", true)
	got := devices.ObserveUnit(h).ComputeModes
	_, three := got["GPU-00000000-0000-0000-0000-000000000003"]
	if len(got) != 7 || three || got["GPU-00000000-0000-0000-0000-000000000000"] != "exclusive_process" || got["GPU-00000000-0000-0000-0000-000000000007"] != "prohibited" {
		t.Errorf("modes %v, from\n%s", got, mixedUnit)
	}
}
