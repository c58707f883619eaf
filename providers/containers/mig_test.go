package containers_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"tags.cncf.io/container-device-interface/pkg/cdi"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/planner/plantest"
	"github.com/gpuenv/gpuenv/providers"
	"github.com/gpuenv/gpuenv/providers/containers"
	"github.com/gpuenv/gpuenv/providers/host"
	cdipkg "github.com/gpuenv/gpuenv/providers/host/cdi"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

// migHost is the container host whose two GPUs are the DGX A100 mock's
// first two, GPU 0 in MIG mode with a 1g.5gb instance at slice 0 and a
// 3g.20gb at slice 4, each with one compute instance of all its slices.
func migHost(t testing.TB) (string, *facts.Observation) {
	t.Helper()
	dir := root(t, true, "mig")
	srv := hosttest.NVMLServer("dgxa100")
	ds := host.NewDeviceSettings(srv)
	uuid := "GPU-00000000-0000-0000-0000-000000000000"
	if _, err := ds.SetMIGMode(uuid, "enabled"); err != nil {
		t.Fatal(err)
	}
	// NVML's profile ids (nvml.h NVML_GPU_INSTANCE_PROFILE_1_SLICE 0,
	// _3_SLICE 2) and placements of the A100 40GB.
	for _, in := range []host.MIGInstance{{ProfileID: 0, Start: 0, Size: 1, Compute: []int{1}}, {ProfileID: 2, Start: 4, Size: 4, Compute: []int{3}}} {
		if err := ds.CreateGPUInstance(uuid, in); err != nil {
			t.Fatal(err)
		}
	}
	obs := providers.Observe(context.Background(), hosttest.New(t, dir, host.WithNVML(host.NewNVML(srv))), providers.ObserveOptions{})
	obs.Init = facts.Init{PID1: "systemd", Live: true, Systemd: true}
	return dir, obs
}

// A GPU in MIG mode is given to containers as its MIG devices, each by
// the names nvidia-ctk gives it ("<gpu>:<mig device>" and its MIG UUID)
// with its GPU's node and its GPU and compute instance's capability
// nodes; the GPU beside it stays whole; "all" is every device's nodes.
func TestCDISpecGainsMIGDevices(t *testing.T) {
	_, obs := migHost(t)
	if len(obs.Containers.MIGMinors) != 2+2*15*9 {
		t.Fatalf("observed %d MIG capabilities, want %d", len(obs.Containers.MIGMinors), 2+2*15*9)
	}
	var gis []facts.GPUInstance
	if len(obs.NVML.Devices) > 0 {
		gis = obs.NVML.Devices[0].GPUInstances
	}
	if len(gis) != 2 {
		t.Fatalf("GPU 0 has instances %+v", gis)
	}
	s, err := cdipkg.GenerateCDI(&obs.Containers, obs.DeviceNodes, obs.NVML.Devices)
	if err != nil {
		t.Fatal(err)
	}
	text, err := cdipkg.MarshalCDI(s)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "nvidia.yaml")
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	read, err := cdi.ReadSpec(file, 0)
	if err != nil {
		t.Fatalf("the CDI project refuses the spec: %v\n%s", err, text)
	}
	nodes := func(name string) []string {
		d := read.GetDevice(name)
		if d == nil {
			t.Errorf("no device %s in\n%s", name, text)
			return nil
		}
		var out []string
		for _, n := range d.ContainerEdits.DeviceNodes {
			out = append(out, n.Path)
		}
		return out
	}
	// The mock numbers GPU instances from 0 in the order they are made
	// and enumerates MIG devices by GPU instance id.
	for i, gi := range gis {
		ci := gi.Compute[0]
		want := []string{"/dev/nvidia0",
			fmt.Sprintf("/dev/nvidia-caps/nvidia-cap%d", 3+9*gi.ID),
			fmt.Sprintf("/dev/nvidia-caps/nvidia-cap%d", 4+9*gi.ID+ci.ID)}
		for _, name := range []string{fmt.Sprintf("0:%d", i), hosttest.MIGUUID(0, gi.ID, ci.ID)} {
			if got := nodes(name); !slices.Equal(got, want) {
				t.Errorf("device %s has nodes %q, want %q", name, got, want)
			}
		}
	}
	if read.GetDevice("0") != nil || read.GetDevice("GPU-00000000-0000-0000-0000-000000000000") != nil {
		t.Errorf("GPU 0, in MIG mode, is also given whole:\n%s", text)
	}
	if got := nodes("1"); !slices.Equal(got, []string{"/dev/nvidia1"}) {
		t.Errorf("GPU 1 has nodes %q", got)
	}
	if got, want := nodes("all"), []string{"/dev/nvidia1", "/dev/nvidia0", "/dev/nvidia-caps/nvidia-cap3", "/dev/nvidia-caps/nvidia-cap4", "/dev/nvidia-caps/nvidia-cap12", "/dev/nvidia-caps/nvidia-cap13"}; !slices.Equal(got, want) {
		t.Errorf("all has nodes %q, want %q", got, want)
	}
	if err := cdipkg.ValidateCDI(s); err != nil {
		t.Error(err)
	}

	// A MIG device whose capability node is missing, or whose capability
	// the driver does not list, leaves no spec that would start
	// containers without it.
	c := obs.Containers
	c.MIGMinors = slices.DeleteFunc(slices.Clone(c.MIGMinors), func(m facts.MIGMinor) bool { return m.Capability == "gpu0/gi1/ci0/access" })
	if _, err := cdipkg.GenerateCDI(&c, obs.DeviceNodes, obs.NVML.Devices); err == nil || !strings.Contains(err.Error(), "lists no gpu0/gi1/ci0/access") {
		t.Errorf("a MIG device without its capability: %v", err)
	}
	dn := slices.DeleteFunc(slices.Clone(obs.DeviceNodes), func(n facts.DeviceNode) bool { return n.Path == "/dev/nvidia-caps/nvidia-cap12" })
	if _, err := cdipkg.GenerateCDI(&obs.Containers, dn, obs.NVML.Devices); err == nil || !strings.Contains(err.Error(), "/dev/nvidia-caps/nvidia-cap12 of gpu0/gi1/access does not exist") {
		t.Errorf("a MIG device without its capability node: %v", err)
	}
	// Without NVML (apply's spec right after a driver change) the GPUs
	// are given whole.
	s, err = cdipkg.GenerateCDI(&obs.Containers, obs.DeviceNodes, nil)
	if err != nil || !slices.ContainsFunc(s.Devices, func(d cdispec.Device) bool { return d.Name == "0" }) {
		t.Errorf("without NVML: %v", err)
	}
}

// The plan's CDI step shows the MIG devices it writes.
func TestPlanCDIWithMIG(t *testing.T) {
	_, obs := migHost(t)
	s := plantest.LoadSpec(t, repo+"container_toolkit {\n  engines = [\"podman\"]\n}\n")
	p := plantest.Plan(t, newPlanner(), s, obs)
	checkGolden(t, "mig", p)
	checkCDIShown(t, p)
	i := slices.IndexFunc(p.Steps, func(st plan.Step) bool { return st.Address == containers.CDIAddress })
	if i < 0 {
		t.Fatalf("no CDI step: %q", addresses(p))
	}
	devices := strings.Split(p.Steps[i].After["devices"], ", ")
	for _, want := range []string{"0:0", "0:1", hosttest.MIGUUID(0, 0, 0), hosttest.MIGUUID(0, 1, 0), "1", "all"} {
		if !slices.Contains(devices, want) {
			t.Errorf("the CDI step shows devices %q, without %s", devices, want)
		}
	}
}

// A mig-minors line that is not "<capability> <minor>" is a warning
// naming the file and the line, and is left out rather than guessed.
func TestObserveMIGMinorsRefusesBadLines(t *testing.T) {
	dir := root(t, false, "mig")
	hosttest.WriteFile(t, dir, containers.MIGMinorsPath, "config 1\ngpu0/gi1/access twelve\ngpu0/gi1/cx0/access 13\ngpu0/gi1/ci0/access 13\n")
	c, warns := containers.Observe(context.Background(), hosttest.New(t, dir), facts.Packages{}, facts.Driver{})
	if want := []facts.MIGMinor{{Capability: "config", Minor: 1}, {Capability: "gpu0/gi1/ci0/access", Minor: 13}}; !slices.Equal(c.MIGMinors, want) {
		t.Errorf("minors %+v, want %+v", c.MIGMinors, want)
	}
	var bad []string
	for _, w := range warns {
		if w.Path == containers.MIGMinorsPath {
			bad = append(bad, w.Message)
		}
	}
	if len(bad) != 2 || !strings.Contains(bad[0], "line 2") || !strings.Contains(bad[1], "line 3") {
		t.Errorf("warnings %q", bad)
	}
}

// After a MIG step (TestManagementSpecFollowsMIGChange: the plan leaves
// the CDI spec to apply, after it), apply makes the spec from NVML's
// instances as the step left them, so that it names the MIG devices the
// plan made. Where NVML does not answer (a root that is not the running
// system), each GPU is whole.
func TestCDISpecAfterMIGChangeNamesTheNewInstances(t *testing.T) {
	dir := root(t, true, "mig")
	srv := hosttest.NVMLServer("dgxa100")
	h := func(opts ...host.Option) *host.Host { return hosttest.New(t, dir, opts...) }

	// What the MIG step does, through the same device settings apply uses.
	ds := host.NewDeviceSettings(srv)
	uuid := "GPU-00000000-0000-0000-0000-000000000000"
	if _, err := ds.SetMIGMode(uuid, "enabled"); err != nil {
		t.Fatal(err)
	}
	if err := ds.CreateGPUInstance(uuid, host.MIGInstance{ProfileID: 2, Start: 4, Size: 4, Compute: []int{3}}); err != nil {
		t.Fatal(err)
	}
	text, err := containers.RegenerateCDI(context.Background(), h(host.WithNVML(host.NewNVML(srv))))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "name: \"0:0\"") && !strings.Contains(text, "name: 0:0") || !strings.Contains(text, hosttest.MIGUUID(0, 0, 0)) {
		t.Errorf("the spec made at apply does not name the new MIG device 0:0 (%s):\n%s", hosttest.MIGUUID(0, 0, 0), text)
	}
	if strings.Contains(text, "name: \"0\"\n") || strings.Contains(text, "name: GPU-00000000-0000-0000-0000-000000000000\n") {
		t.Errorf("GPU 0, in MIG mode, is also given whole:\n%s", text)
	}
	whole, err := containers.RegenerateCDI(context.Background(), h())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(whole, hosttest.MIGUUID(0, 0, 0)) {
		t.Errorf("without NVML the spec names MIG devices:\n%s", whole)
	}
}
