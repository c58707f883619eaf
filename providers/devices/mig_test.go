package devices_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/doctor"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/finding"
	planpkg "github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/planner/plantest"
	"github.com/gpuenv/gpuenv/providers"
	"github.com/gpuenv/gpuenv/providers/devices"
	"github.com/gpuenv/gpuenv/providers/driver"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

// dgxA100 returns a root, go-nvml's DGX A100 mock (eight MIG-capable
// A100 40GB, MIG off) and a function observing them.
func dgxA100(t *testing.T) (*host.Host, *server.Server, func() *facts.Observation) {
	t.Helper()
	h := hosttest.Host(t, "-- etc/os-release --\nID=ubuntu\nVERSION_ID=\"22.04\"\n"+
		"-- proc/driver/nvidia/version --\nNVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build  (dvs-builder@U16-I3-B03-4-3)  Tue Feb 13 01:10:03 UTC 2024\n")
	srv := hosttest.NVMLServer("dgxa100")
	return h, srv, func() *facts.Observation {
		obs := &facts.Observation{}
		driver.Observe(context.Background(), h, host.NewNVML(srv), obs)
		obs.Units = []facts.Unit{devices.ObserveMIGUnit(h)}
		obs.Init = systemd
		return obs
	}
}

// planErrors plans src and returns its error diagnostics as
// "summary|detail|range".
func planErrors(t *testing.T, src string, obs *facts.Observation) []string {
	t.Helper()
	_, diags := planner.New(devices.Kind.Provider()).Plan(context.Background(), plantest.LoadSpec(t, src), obs)
	var out []string
	for _, d := range diags {
		r := ""
		if d.Subject != nil {
			r = d.Subject.String()
			r = r[strings.LastIndex(r, ":")+1:]
		}
		out = append(out, d.Summary+"|"+d.Detail+"|"+r)
	}
	return out
}

func TestMIGPlanRefusals(t *testing.T) {
	_, srv, observe := dgxA100(t)
	obs := observe()
	uuid := obs.NVML.Devices[2].UUID
	for _, c := range []struct {
		name, src string
		want      []string
	}{
		{"unknown profile, where it is written", "mig \"2\" {\n  instances = [\"3g.20gb\", \"1g.10gb\", \"2g.20gb\"]\n}\n", []string{
			"Unknown MIG profile|GPU 2 (Mock NVIDIA A100-SXM4-40GB, " + uuid + ") is an A100 40GB, whose MIG profiles are 1g.5gb, 1g.5gb+me, 1g.10gb, 2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb; \"2g.20gb\" is not one of them.|2,38-47",
		}},
		{"over capacity, naming the GPU and profile", "mig \"2\" {\n  instances = [\"4g.20gb\", \"3g.20gb\", \"1g.5gb\"]\n}\n", []string{
			"Impossible MIG layout|GPU 2 (Mock NVIDIA A100-SXM4-40GB, " + uuid + ") cannot hold this layout: 1g.5gb does not fit: with it the layout takes 8 compute slices and the A100 40GB has 7.|2,15-47",
		}},
		{"a compute instance the GPU instance does not offer", "mig \"2\" {\n  instances = [\"4g.20gb\"]\n  compute_instances = { \"4g.20gb\" = [\"3c\"] }\n}\n", []string{
			"Unknown compute instance|A GPU instance 4g.20gb of GPU 2 (Mock NVIDIA A100-SXM4-40GB, " + uuid + ") offers compute instances of 1, 2, 4 compute slices; 3c is not one of them.|3,23-45",
		}},
		{"no room for a placement", "mig \"2\" {\n  instances = [\"3g.20gb\", \"3g.20gb\", \"1g.5gb\"]\n}\n", []string{
			"Impossible MIG layout|GPU 2 (Mock NVIDIA A100-SXM4-40GB, " + uuid + ") cannot hold this layout: the A100 40GB has no room for 1g.5gb in the layout 3g.20gb, 3g.20gb, 1g.5gb: no placement of its memory slices fits every instance (8 of 8 memory slices free around the instances kept).|2,15-47",
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if diff := cmp.Diff(c.want, planErrors(t, c.src, obs)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}

	// An instance processes run on is not destroyed: plan names them.
	dev := srv.Devices[5].(*server.Device)
	ds := host.NewDeviceSettings(srv)
	ds.SetMIGMode(dev.UUID, "enabled")
	if err := ds.CreateGPUInstance(dev.UUID, host.MIGInstance{ProfileID: nvml.GPU_INSTANCE_PROFILE_7_SLICE, Size: 8, Compute: []int{7}}); err != nil {
		t.Fatal(err)
	}
	dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		return []nvml.ProcessInfo{{Pid: 4242, GpuInstanceId: 0, ComputeInstanceId: 0}, {Pid: 4343, GpuInstanceId: 0, ComputeInstanceId: 0}}, nvml.SUCCESS
	}
	got := planErrors(t, "mig \"5\" {\n  instances = [\"1g.5gb\"]\n}\n", observe())
	if len(got) != 1 || !strings.HasPrefix(got[0], "MIG instance in use|The layout destroys the GPU instance 7g.40gb at memory slice 0 of GPU 5") || !strings.Contains(got[0], "pid 4242, 4343 run on it") {
		t.Errorf("destroying a held instance: %q", got)
	}

	// A GPU without MIG.
	obs = observe()
	obs.NVML.Devices[0].Name, obs.NVML.Devices[0].MIGMode = "NVIDIA GeForce RTX 4090", ""
	got = planErrors(t, "mig \"0\" {\n  mode = \"enabled\"\n}\n", obs)
	if len(got) != 1 || !strings.HasPrefix(got[0], "GPU without MIG|GPU 0 (NVIDIA GeForce RTX 4090") {
		t.Errorf("GPU without MIG: %q", got)
	}
}

// TestMIGBootUnitMakesTheLayoutAgain: the plan's boot unit runs gpuenv
// mig-restore for each GPU, ordered before the container runtimes and
// schedulers; after a reboot has emptied the GPUs, what its command
// lines say makes the layout the spec asks for again, and the plan is
// empty once more.
func TestMIGBootUnitMakesTheLayoutAgain(t *testing.T) {
	h, srv, observe := dgxA100(t)
	src := "mig \"all\" {\n  instances = [\"3g.20gb\", \"2g.10gb\", \"1g.10gb\"]\n  compute_instances = { \"3g.20gb\" = [\"1c\", \"2c\"] }\n}\n\nmig \"3\" {\n  instances = [\"7g.40gb\"]\n}\n"
	s := plantest.LoadSpec(t, src)
	pl := planner.New(devices.Kind.Provider())
	plan := plantest.Plan(t, pl, s, observe())
	ds := host.NewDeviceSettings(srv)
	var unit string
	for _, st := range plan.Steps {
		for _, op := range st.Operations {
			switch {
			case op.Device != nil && op.Device.Setting == planpkg.SettingMIGMode:
				if _, err := ds.SetMIGMode(op.Device.UUID, op.Device.Value); err != nil {
					t.Fatal(err)
				}
			case op.Device != nil && op.Device.Value == planpkg.GPUInstancePresent:
				in := op.Device.Instance
				if err := ds.CreateGPUInstance(op.Device.UUID, host.MIGInstance{ProfileID: in.ProfileID, Start: uint32(in.Start), Size: uint32(in.Size), Compute: in.Compute}); err != nil {
					t.Fatal(err)
				}
			case op.File != nil && op.File.Path == devices.MIGBootUnitPath:
				unit = op.File.Content
				install(t, h, "", false)
				hosttest.WriteFile(t, h.Root(), devices.MIGBootUnitPath, unit)
			case op.Service != nil && op.Service.Unit == devices.MIGBootUnit && op.Service.Enable:
				hosttest.WriteFile(t, h.Root(), "/etc/systemd/system/multi-user.target.wants/"+devices.MIGBootUnit, "")
			}
		}
	}
	if !strings.Contains(unit, "\nBefore=nvidia-container-toolkit.service nvidia-cdi-refresh.service docker.service containerd.service crio.service kubelet.service slurmd.service\n") {
		t.Errorf("the unit is not ordered before the runtimes and schedulers:\n%s", unit)
	}
	plantest.Converged(t, pl, s, observe(), "making the layout")
	want := hosttest.MIGSnapshot(srv)

	// A reboot: every instance gone.
	for _, d := range srv.Devices {
		hosttest.MIGOf(d.(*server.Device)).Reboot()
	}
	if p := plantest.Plan(t, pl, s, observe()); len(p.Steps) == 0 {
		t.Fatal("after the reboot the plan finds nothing to do")
	}
	// What the unit runs, line by line.
	lines := 0
	for _, l := range strings.Split(unit, "\n") {
		args, ok := strings.CutPrefix(l, "ExecStart=/usr/bin/gpuenv mig-restore --gpu ")
		if !ok {
			continue
		}
		lines++
		f := strings.Fields(args)
		var in []host.MIGInstance
		for i := 1; i+1 < len(f); i += 2 {
			if f[i] != "--instance" {
				t.Fatalf("unit line %q", l)
			}
			x, err := devices.ParseMIGInstanceArg(f[i+1])
			if err != nil {
				t.Fatal(err)
			}
			in = append(in, x)
		}
		if err := devices.RestoreMIG(ds, f[0], in); err != nil {
			t.Fatal(err)
		}
	}
	if lines != 8 {
		t.Errorf("%d ExecStart lines, want one per GPU:\n%s", lines, unit)
	}
	if diff := cmp.Diff(want, hosttest.MIGSnapshot(srv)); diff != "" {
		t.Errorf("after the boot unit (-before the reboot +after):\n%s", diff)
	}
	plantest.Converged(t, pl, s, observe(), "the boot unit after a reboot")
}

// TestMIGWithoutPersistenceWarns: entering MIG mode on GPUs whose
// persistence mode is off is planned with doctor's gpu.mig-persistence
// warning, judged on the plan's end state; GPUs that have it plan no
// warning (TestEndStateJudgesMIGPersistence: nor does a spec that turns
// it on).
func TestMIGWithoutPersistenceWarns(t *testing.T) {
	_, _, observe := dgxA100(t)
	obs := observe()
	warned := func(src string) []string {
		pl := planner.New(devices.Kind.Provider())
		pl.EndState = providers.EndState
		var ids []string
		for _, w := range plantest.Plan(t, pl, plantest.LoadSpec(t, src), obs).Warnings {
			if w.ID == "gpu.mig-persistence" {
				ids = append(ids, w.Summary)
			}
		}
		return ids
	}
	const mig = "mig \"all\" {\n  instances = [\"7g.40gb\"]\n}\n"
	obs.NVML.Devices[1].PersistenceMode = "disabled"
	if got := warned(mig); len(got) != 1 || !strings.HasPrefix(got[0], "GPU 1 use MIG without persistence mode") {
		t.Errorf("warnings %q", got)
	}
	obs.NVML.Devices[1].PersistenceMode = "enabled"
	if got := warned(mig); len(got) != 0 {
		t.Errorf("with persistence on: %q", got)
	}
}

// A layout on a GPU whose placements NVIDIA does not publish (H200
// 141GB) says in its plan that gpuenv assumes the H100 80GB's; one on
// an H100 80GB, whose placements are sourced, says nothing of it.
func TestMIGPlanSaysPlacementsAreAssumed(t *testing.T) {
	for _, c := range []struct {
		server, profile string
		assumed         bool
	}{{"dgxh200", "3g.71gb", true}, {"dgxh100", "3g.40gb", false}} {
		h := hosttest.Host(t, "-- etc/os-release --\nID=ubuntu\nVERSION_ID=\"22.04\"\n"+
			"-- proc/driver/nvidia/version --\nNVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build  (dvs-builder@U16-I3-B03-4-3)  Tue Feb 13 01:10:03 UTC 2024\n")
		obs := &facts.Observation{}
		driver.Observe(context.Background(), h, host.NewNVML(hosttest.NVMLServer(c.server)), obs)
		obs.Units = []facts.Unit{devices.ObserveMIGUnit(h)}
		obs.Init = systemd
		p := plantest.Plan(t, planner.New(devices.Kind.Provider()), plantest.LoadSpec(t, "mig \"0\" {\n  instances = [\""+c.profile+"\"]\n}\n"), obs)
		var reason string
		for _, st := range p.Steps {
			if st.Address == devices.MIGAddress("0") {
				reason = st.Reason
			}
		}
		if reason == "" {
			t.Fatalf("%s: no MIG step in %+v", c.server, p.Steps)
		}
		if got := strings.Contains(reason, "NVIDIA publishes no MIG placements for the H200 141GB, so gpuenv places its instances as on the H100 80GB"); got != c.assumed {
			t.Errorf("%s: reason %q", c.server, reason)
		}
	}
}

// The end state of a MIG plan is what apply and the boot unit make: the
// GPU in MIG mode with the spec's instances, and gpuenv-mig.service
// making the same layout, so that doctor's gpu.mig-layout finds them
// alike at plan. A layout changed by hand, with no mig block to put it
// back, is doctor's warning at plan too.
func TestMIGEndStateMatchesItsBootUnit(t *testing.T) {
	_, _, observe := dgxA100(t)
	obs := observe()
	pl := planner.New(devices.Kind.Provider())
	p := plantest.Plan(t, pl, plantest.LoadSpec(t, "mig \"0\" {\n  instances = [\"3g.20gb\", \"2g.10gb\"]\n}\n"), obs)
	end := providers.EndState(obs, p.Steps)
	var gpu0 facts.GPUDevice
	for _, d := range end.NVML.Devices {
		if d.Index == 0 {
			gpu0 = d
		}
	}
	var names []string
	for _, g := range gpu0.GPUInstances {
		names = append(names, g.Profile)
	}
	if gpu0.MIGMode != "enabled" || len(names) != 2 {
		t.Fatalf("predicted GPU 0: MIG %q, instances %q", gpu0.MIGMode, names)
	}
	layout := func(o *facts.Observation) finding.Status {
		for _, c := range doctor.Judge(doctor.Input{Obs: o}, finding.Plan) {
			if c.ID == "gpu.mig-layout" {
				return c.Status
			}
		}
		return ""
	}
	if got := layout(end); got != finding.OK {
		t.Errorf("the plan's end state: gpu.mig-layout %q, want OK", got)
	}
	// By hand, a 1g.5gb more; the spec has no mig block.
	byHand := *end
	byHand.NVML.Devices = slices.Clone(end.NVML.Devices)
	for i := range byHand.NVML.Devices {
		if byHand.NVML.Devices[i].Index == 0 {
			d := &byHand.NVML.Devices[i]
			d.GPUInstances = append(slices.Clone(d.GPUInstances), facts.GPUInstance{ProfileID: 0, Profile: "1g.5gb", Start: 6, Size: 1, Compute: []facts.ComputeInstance{{Slices: 1}}})
		}
	}
	if got := layout(providers.EndState(&byHand, nil)); got != finding.Warning {
		t.Errorf("a layout changed by hand: gpu.mig-layout %q, want a warning", got)
	}
}
