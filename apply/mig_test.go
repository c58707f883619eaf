package apply_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/apply"
	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/planner/plantest"
	"github.com/gpuenv/gpuenv/providers/devices"
	"github.com/gpuenv/gpuenv/providers/driver"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

// migSpec changes the layout of every GPU of a DGX A100 laid out by
// migStart: GPUs 0-3 enter MIG mode and get a mixed layout (its 2g
// instance divided in two compute instances); 4 and 5 trade
// their 7g instance for it; 6 keeps its two 3g instances; 7 leaves MIG
// mode, its instances destroyed first.
const migSpec = `mig "all" {
  instances         = ["3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"]
  compute_instances = { "2g.10gb" = ["1c", "1c"] }
}

mig "6" {
  instances = ["3g.20gb", "3g.20gb"]
}

mig "7" {
  mode = "disabled"
}
`

// migState is the GPUs a MIG kill test starts from.
func migStart() []hosttest.MIGGPUState {
	st := make([]hosttest.MIGGPUState, 8)
	seven := []hosttest.MIGInstanceState{{ProfileID: nvml.GPU_INSTANCE_PROFILE_7_SLICE, Start: 0, Size: 8, Compute: []int{7}}}
	threes := []hosttest.MIGInstanceState{
		{ProfileID: nvml.GPU_INSTANCE_PROFILE_3_SLICE, Start: 0, Size: 4, Compute: []int{3}},
		{ProfileID: nvml.GPU_INSTANCE_PROFILE_3_SLICE, Start: 4, Size: 4, Compute: []int{3}},
	}
	for i := 4; i < 8; i++ {
		st[i] = hosttest.MIGGPUState{Mode: nvml.DEVICE_MIG_ENABLE, Pending: nvml.DEVICE_MIG_ENABLE, Instances: seven}
		if i >= 6 {
			st[i].Instances = threes
		}
	}
	return st
}

// migFixture is a root standing for a running DGX A100 whose GPUs keep
// their MIG state in dir/gpus.json, so that a process killed mid-apply
// leaves them as a real GPU would be left, for the next process.
type migFixture struct {
	dir  string
	h    *host.Host
	srv  *server.Server
	devs *persistedMIG
}

func openMIGFixture(t *testing.T, dir string, start []hosttest.MIGGPUState) *migFixture {
	t.Helper()
	root := filepath.Join(dir, "root")
	for p, c := range map[string]string{
		"etc/os-release":             "ID=ubuntu\nVERSION_ID=\"22.04\"\n",
		"proc/driver/nvidia/version": "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build  (dvs-builder@U16-I3-B03-4-3)  Tue Feb 13 01:10:03 UTC 2024\n",
	} {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	srv := hosttest.NVMLServer("dgxa100")
	state := filepath.Join(dir, "gpus.json")
	if data, err := os.ReadFile(state); err == nil {
		if err := json.Unmarshal(data, &start); err != nil {
			t.Fatal(err)
		}
	}
	if err := hosttest.LoadMIGState(srv, start); err != nil {
		t.Fatal(err)
	}
	h, err := host.New(root, host.AsRunningSystem())
	if err != nil {
		t.Fatal(err)
	}
	fx := &migFixture{dir: dir, h: h, srv: srv, devs: &persistedMIG{DeviceSettings: host.NewDeviceSettings(srv), srv: srv, path: state}}
	fx.devs.save()
	return fx
}

// persistedMIG writes the GPUs' state after every change.
type persistedMIG struct {
	*host.DeviceSettings
	srv  *server.Server
	path string
}

func (p *persistedMIG) save() {
	data, _ := json.Marshal(hosttest.MIGSnapshot(p.srv))
	os.WriteFile(p.path, data, 0o644)
}

func (p *persistedMIG) SetMIGMode(uuid, mode string) (bool, error) {
	defer p.save()
	return p.DeviceSettings.SetMIGMode(uuid, mode)
}

func (p *persistedMIG) CreateGPUInstance(uuid string, in host.MIGInstance) error {
	defer p.save()
	return p.DeviceSettings.CreateGPUInstance(uuid, in)
}

func (p *persistedMIG) DestroyGPUInstance(uuid string, profile int, start uint32) error {
	defer p.save()
	return p.DeviceSettings.DestroyGPUInstance(uuid, profile, start)
}

var _ apply.MIGDevices = (*persistedMIG)(nil)

func (fx *migFixture) observe(t *testing.T) *facts.Observation {
	t.Helper()
	obs := &facts.Observation{}
	driver.Observe(context.Background(), fx.h, host.NewNVML(fx.srv), obs)
	return obs
}

func (fx *migFixture) plan(t *testing.T) *plan.Plan {
	t.Helper()
	return plantest.Plan(t, planner.New(devices.Kind.Provider()), plantest.LoadSpec(t, migSpec), fx.observe(t))
}

func (fx *migFixture) opts(point func(int)) apply.Options {
	return apply.Options{StateDir: stateDir, Executor: &apply.HostExecutor{Host: fx.h, Devices: fx.devs}, JournalPoint: point}
}

func (fx *migFixture) rollbackOpts() apply.RollbackOptions {
	return apply.RollbackOptions{StateDir: stateDir, To: -1, Executor: &apply.HostExecutor{Host: fx.h, Devices: fx.devs}}
}

// TestMIGApplyConvergesAndRollsBack: the plan's layout, applied through
// NVML, is what observing finds afterwards (planning again finds
// nothing), and rollback gives every GPU its previous mode and layout,
// the destroyed instances made again at their placements.
func TestMIGApplyConvergesAndRollsBack(t *testing.T) {
	fx := openMIGFixture(t, t.TempDir(), migStart())
	before := hosttest.MIGSnapshot(fx.srv)
	p := fx.plan(t)
	var addrs []string
	for _, s := range p.Steps {
		addrs = append(addrs, s.Address)
	}
	// GPU 6 has its layout already: its block plans nothing.
	if !cmp.Equal(addrs, []string{"device.7.mig", "device.all.mig"}) {
		t.Fatalf("steps %v", addrs)
	}
	res, err := apply.Apply(context.Background(), fx.h, p, fx.opts(nil))
	if err != nil || res.Status != apply.StatusApplied {
		t.Fatalf("apply: %v %+v", err, res)
	}
	after := hosttest.MIGSnapshot(fx.srv)
	mixed := []hosttest.MIGInstanceState{
		{ProfileID: nvml.GPU_INSTANCE_PROFILE_2_SLICE, Start: 0, Size: 2, Compute: []int{1, 1}},
		{ProfileID: nvml.GPU_INSTANCE_PROFILE_1_SLICE, Start: 2, Size: 1, Compute: []int{1}},
		{ProfileID: nvml.GPU_INSTANCE_PROFILE_1_SLICE, Start: 3, Size: 1, Compute: []int{1}},
		{ProfileID: nvml.GPU_INSTANCE_PROFILE_3_SLICE, Start: 4, Size: 4, Compute: []int{3}},
	}
	for i := 0; i < 6; i++ {
		if diff := cmp.Diff(hosttest.MIGGPUState{Mode: 1, Pending: 1, Instances: mixed}, after[i]); diff != "" {
			t.Errorf("GPU %d (-want +got):\n%s", i, diff)
		}
	}
	if diff := cmp.Diff(before[6], after[6]); diff != "" {
		t.Errorf("GPU 6 changed:\n%s", diff)
	}
	if after[7].Mode != 0 || len(after[7].Instances) != 0 {
		t.Errorf("GPU 7: %+v", after[7])
	}
	plantest.Converged(t, planner.New(devices.Kind.Provider()), plantest.LoadSpec(t, migSpec), fx.observe(t), "applying the layout")

	if _, err := apply.Rollback(context.Background(), fx.h, fx.rollbackOpts()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, hosttest.MIGSnapshot(fx.srv)); diff != "" {
		t.Errorf("after rollback (-before +after):\n%s", diff)
	}
}

// TestMIGDestroyRefusedWhileHeld: an instance a process runs on is not
// destroyed: apply fails naming the pid, and reverts what it did.
func TestMIGDestroyRefusedWhileHeld(t *testing.T) {
	fx := openMIGFixture(t, t.TempDir(), migStart())
	before := hosttest.MIGSnapshot(fx.srv)
	p := fx.plan(t)
	// The process starts after the plan was made, on GPU 7's first 3g
	// instance (GPU instance 0).
	fx.srv.Devices[7].(*server.Device).GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		return []nvml.ProcessInfo{{Pid: 31337, GpuInstanceId: 0, ComputeInstanceId: 0}}, nvml.SUCCESS
	}
	res, err := apply.Apply(context.Background(), fx.h, p, fx.opts(nil))
	if err != nil {
		t.Fatal(err)
	}
	if res.Status == apply.StatusApplied || res.Failed == nil || !strings.Contains(res.Failed.Error, "31337") {
		t.Fatalf("apply over a held instance: %s %+v", res.Status, res.Failed)
	}
	if diff := cmp.Diff(before, hosttest.MIGSnapshot(fx.srv)); diff != "" {
		t.Errorf("not reverted (-before +after):\n%s", diff)
	}
}

// TestMIGModePendingSkipsInstances: a GPU in use keeps MIG mode pending;
// its instances are skipped (the boot unit makes them after the reboot)
// and the apply says a reboot is needed.
func TestMIGModePendingSkipsInstances(t *testing.T) {
	fx := openMIGFixture(t, t.TempDir(), migStart())
	hosttest.MIGOf(fx.srv.Devices[0].(*server.Device)).Busy = true
	res, err := apply.Apply(context.Background(), fx.h, fx.plan(t), fx.opts(nil))
	if err != nil || res.Status != apply.StatusApplied {
		t.Fatalf("apply: %v %+v", err, res)
	}
	if !res.NeedsReboot || len(res.Skipped) != 4 || !strings.Contains(res.Skipped[0], "waits for a GPU reset") {
		t.Errorf("needs reboot %v, skipped %q", res.NeedsReboot, res.Skipped)
	}
	st := hosttest.MIGSnapshot(fx.srv)[0]
	if st.Mode != 0 || st.Pending != 1 || len(st.Instances) != 0 {
		t.Errorf("GPU 0: %+v", st)
	}
}

// TestMIGUndoCompletesHalfMadeInstance: a GPU instance left without its
// compute instances (a create that stopped half-way) is destroyed by the
// undo of its creation, and a destroyed instance is made again whole.
func TestMIGUndoCompletesHalfMadeInstance(t *testing.T) {
	fx := openMIGFixture(t, t.TempDir(), migStart())
	before := hosttest.MIGSnapshot(fx.srv)
	dev := fx.srv.Devices[4].(*server.Device)
	hosttest.MIGOf(dev).Fail = map[string]nvml.Return{"create_compute_instance": nvml.ERROR_UNKNOWN}
	p := oneStep("device.4.mig", plan.Update,
		plan.Operation{Kind: plan.OpDevice, Device: &plan.DeviceOp{UUID: dev.UUID, Index: 4, Setting: plan.SettingGPUInstance, Value: plan.GPUInstanceAbsent,
			Instance: &plan.MIGInstance{Profile: "7g.40gb", ProfileID: nvml.GPU_INSTANCE_PROFILE_7_SLICE, Start: 0, Size: 8, Compute: []int{7}}}},
		plan.Operation{Kind: plan.OpDevice, Device: &plan.DeviceOp{UUID: dev.UUID, Index: 4, Setting: plan.SettingGPUInstance, Value: plan.GPUInstancePresent,
			Instance: &plan.MIGInstance{Profile: "4g.20gb", ProfileID: nvml.GPU_INSTANCE_PROFILE_4_SLICE, Start: 0, Size: 4, Compute: []int{4}}}})
	res, err := apply.Apply(context.Background(), fx.h, p, fx.opts(nil))
	if err != nil {
		t.Fatal(err)
	}
	if res.Status == apply.StatusApplied {
		t.Fatal("the failed compute instance did not fail the apply")
	}
	if diff := cmp.Diff(before, hosttest.MIGSnapshot(fx.srv)); diff != "" {
		t.Errorf("not reverted (-before +after):\n%s", diff)
	}
}

// migKillHelper is TestKillHelper's MIG modes: it applies the MIG plan
// ("mig-apply") or rolls it back ("mig-rollback") on the GPUs kept in
// dir, and SIGKILLs itself right after journal record at is durable.
func migKillHelper(t *testing.T, dir string, at int, mode string) {
	fx := openMIGFixture(t, dir, nil)
	point := func(n int) {
		if n == at {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	}
	var err error
	if mode == "mig-rollback" {
		o := fx.rollbackOpts()
		o.JournalPoint = point
		_, err = apply.Rollback(context.Background(), fx.h, o)
	} else {
		_, err = apply.Apply(context.Background(), fx.h, fx.plan(t), fx.opts(point))
	}
	if err != nil {
		t.Fatal(err)
	}
}

func migPoints(t *testing.T) (applyEvents, rollbackEvents []apply.Event) {
	fx := openMIGFixture(t, t.TempDir(), migStart())
	var na, nr int
	res, err := apply.Apply(context.Background(), fx.h, fx.plan(t), fx.opts(func(n int) { na = n }))
	if err != nil || res.Status != apply.StatusApplied {
		t.Fatalf("apply: %v %+v", err, res)
	}
	applyEvents = journalEvents(t, &testHost{root: fx.h.Root()}, res, na)
	o := fx.rollbackOpts()
	o.JournalPoint = func(n int) { nr = n }
	res, err = apply.Rollback(context.Background(), fx.h, o)
	if err != nil {
		t.Fatal(err)
	}
	return applyEvents, journalEvents(t, &testHost{root: fx.h.Root()}, res, nr)
}

// TestKilledMIGApplyAtEveryJournalPoint: killed after each record of a
// MIG change's journal (mode changes, instances destroyed and created),
// the host recovers with force-unlock and one rollback, to the GPUs'
// modes and layouts as they were before.
func TestKilledMIGApplyAtEveryJournalPoint(t *testing.T) {
	events, _ := migPoints(t)
	kinds := []apply.Event{apply.EventStart, apply.EventBegin, apply.EventDone, apply.EventEnd}
	atEveryJournalPoint(t, "MIG apply", events, 40, kinds, "force-unlock and a rollback to the GPUs as they were", func(t *testing.T, k int, kill func(*testHost, string)) {
		dir := t.TempDir()
		fx := openMIGFixture(t, dir, migStart())
		before := hosttest.MIGSnapshot(fx.srv)
		kill(&testHost{dir: dir}, "mig-apply")
		fx = openMIGFixture(t, dir, nil)
		if _, _, err := apply.ForceUnlock(fx.h, stateDir); err != nil {
			t.Fatal(err)
		}
		if _, err := apply.Rollback(context.Background(), fx.h, fx.rollbackOpts()); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(before, hosttest.MIGSnapshot(fx.srv)); diff != "" {
			t.Errorf("killed at %d (%s), then rolled back (-before +after):\n%s", k, events[k-1], diff)
		}
	})
}

// TestKilledMIGRollbackAtEveryJournalPoint: a rollback of a MIG change
// killed after any record is finished by the next rollback.
func TestKilledMIGRollbackAtEveryJournalPoint(t *testing.T) {
	_, events := migPoints(t)
	kinds := []apply.Event{apply.EventStart, apply.EventUndo, apply.EventUndone, apply.EventEnd}
	atEveryJournalPoint(t, "MIG rollback", events, 40, kinds, "a second rollback", func(t *testing.T, k int, kill func(*testHost, string)) {
		dir := t.TempDir()
		fx := openMIGFixture(t, dir, migStart())
		before := hosttest.MIGSnapshot(fx.srv)
		if res, err := apply.Apply(context.Background(), fx.h, fx.plan(t), fx.opts(nil)); err != nil || res.Status != apply.StatusApplied {
			t.Fatalf("apply: %v %+v", err, res)
		}
		kill(&testHost{dir: dir}, "mig-rollback")
		fx = openMIGFixture(t, dir, nil)
		if _, _, err := apply.ForceUnlock(fx.h, stateDir); err != nil {
			t.Fatal(err)
		}
		if _, err := apply.Rollback(context.Background(), fx.h, fx.rollbackOpts()); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(before, hosttest.MIGSnapshot(fx.srv)); diff != "" {
			t.Errorf("rollback killed at %d (%s), then finished (-before +after):\n%s", k, events[k-1], diff)
		}
	})
}
