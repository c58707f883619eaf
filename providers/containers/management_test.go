package containers_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/NVIDIA/nvidia-container-toolkit/pkg/nvcdi"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/compat"
	"github.com/gpuenv/gpuenv/planner/doctor"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/finding"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/planner/plantest"
	"github.com/gpuenv/gpuenv/providers/containers"
	"github.com/gpuenv/gpuenv/providers/devices"
	cdipkg "github.com/gpuenv/gpuenv/providers/host/cdi"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
	"github.com/gpuenv/gpuenv/spec"
	"github.com/gpuenv/gpuenv/spec/version"
)

// managementAllowed are the items of one management spec the other
// lacks, with why: the SONAME links, which gpuenv mounts (as in its
// nvidia.com/gpu spec, see allowedDifferences) and nvcdi links.
var managementAllowed = []allowedDifference{
	{onlyIn: "gpuenv", match: "common mount /usr/lib/x86_64-linux-gnu/libcuda.so.1 "},
	{onlyIn: "gpuenv", match: "common mount /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1 "},
	{onlyIn: "nvcdi", match: "common hook createContainer /usr/bin/nvidia-cdi-hook nvidia-cdi-hook create-symlinks --link libcuda.so.550.54.15::/usr/lib/x86_64-linux-gnu/libcuda.so.1"},
	{onlyIn: "nvcdi", match: "common hook createContainer /usr/bin/nvidia-cdi-hook nvidia-cdi-hook create-symlinks --link libnvidia-ml.so.550.54.15::/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"},
}

// The management spec gpuenv writes agrees with the one nvidia-ctk cdi
// generate --mode=management makes of the same root (nvcdi's management
// mode, the toolkit release the installed one is): the kind, the one
// device "all" with every NVIDIA node but the NVSwitches' and
// GPUDirect Storage's, the MIG capability nodes and IMEX channels among
// them, and the driver's files and hooks, without the hook that keeps a
// container from making device nodes, but for the SONAME links.
func TestManagementSpecAgreesWithNVCDI(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("nvcdi takes only character devices as device nodes, and the fixture's are character devices only when mknod can make them, as root")
	}
	for _, variants := range [][]string{nil, {"mig", "imex-nvswitch"}} {
		t.Run(strings.Join(append([]string{"host"}, variants...), "+"), func(t *testing.T) {
			dir := root(t, true, variants...)
			setToolkit(t, dir, "1.20.2")
			for _, lib := range []string{"libcuda.so", "libnvidia-ml.so", "libnvidia-ptxjitcompiler.so"} {
				hosttest.BuildELF(t, filepath.Join(dir, "usr/lib/x86_64-linux-gnu", lib+".550.54.15"), lib+".1", nil)
			}
			obs := observe(t, dir)
			ours, err := cdipkg.GenerateManagementCDI(&obs.Containers, obs.DeviceNodes)
			if err != nil {
				t.Fatal(err)
			}
			ref := nvcdiManagementSpec(t, dir)
			if ours.Kind != ref.Kind || ours.Kind != "management.nvidia.com/gpu" {
				t.Errorf("kind %q, nvcdi %q", ours.Kind, ref.Kind)
			}
			got, want := specItems(t, dir, ours), specItems(t, dir, ref)
			compareItems(t, "management spec", got, want, managementAllowed)
			if ourOrder, refOrder := orderedItems(dir, ours), orderedItems(dir, ref); !slices.Equal(ourOrder["variables"], refOrder["variables"]) {
				t.Errorf("variables %q, nvcdi's %q", ourOrder["variables"], refOrder["variables"])
			}
			if variants != nil {
				for _, n := range []string{"/dev/nvidia-caps/nvidia-cap1", "/dev/nvidia-caps/nvidia-cap2", "/dev/nvidia-caps-imex-channels/channel0", "/dev/nvidia-modeset"} {
					if !slices.Contains(got, "device all node "+n+" <- "+n) {
						t.Errorf("the management spec lacks %s", n)
					}
				}
				for _, it := range got {
					if strings.Contains(it, "nvswitch") || strings.Contains(it, "nvidia-fs") {
						t.Errorf("the management spec names %s", it)
					}
				}
			}
		})
	}
}

// setToolkit makes the fixture's installed toolkit release v.
func setToolkit(t *testing.T, dir, v string) {
	t.Helper()
	status := filepath.Join(dir, "var/lib/dpkg/status")
	data, err := os.ReadFile(status)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(status, []byte(strings.ReplaceAll(string(data), "Version: 1.17.8-1\n", "Version: "+v+"-1\n")), 0o644); err != nil {
		t.Fatal(err)
	}
}

// nvcdiManagementSpec is the spec nvidia-ctk cdi generate
// --mode=management would write for the fixture root.
func nvcdiManagementSpec(t *testing.T, dir string) *cdispec.Spec {
	t.Helper()
	lib, err := nvcdi.New(
		nvcdi.WithLogger(testLogger{t}),
		nvcdi.WithDriverRoot(dir),
		nvcdi.WithDevRoot(dir),
		// nvcdi asks NVML for the driver's version: the mock's is the
		// fixture's (550.54.15), where the fixture's library is no NVML.
		nvcdi.WithNvmlLib(hosttest.NVMLServer("dgxa100")),
		nvcdi.WithMode(nvcdi.ModeManagement),
		nvcdi.WithNVIDIACDIHookPath(containers.CDIHookPath),
		nvcdi.WithFeatureFlags(nvcdi.FeatureDisableNvsandboxUtils),
	)
	if err != nil {
		t.Fatal(err)
	}
	s, err := lib.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	return s.Raw()
}

// An older toolkit's management spec names only hooks that toolkit has,
// and never the hooks that keep a container to its given nodes.
func TestManagementSpecHooksByToolkit(t *testing.T) {
	dir := root(t, true, "mig")
	obs := observe(t, dir)
	for _, tv := range []string{"1.16.2", "1.17.8", "1.20.2"} {
		c := obs.Containers
		c.Toolkit = facts.ContainerToolkit{Version: tv, HookPath: containers.CDIHookPath, Hooks: compat.ToolkitHooks(version.MustParse(tv))}
		s, err := cdipkg.GenerateManagementCDI(&c, obs.DeviceNodes)
		if err != nil {
			t.Fatal(err)
		}
		got := hookNames(s)
		for _, h := range got {
			if !slices.Contains(c.Toolkit.Hooks, h) {
				t.Errorf("toolkit %s: hook %s it lacks", tv, h)
			}
			if h == "disable-device-node-modification" || h == "update-application-profile" {
				t.Errorf("toolkit %s: the management spec runs %s", tv, h)
			}
		}
		if !slices.Contains(got, "update-ldcache") {
			t.Errorf("toolkit %s: hooks %q without update-ldcache", tv, got)
		}
	}
}

// The management spec is refused, not written without what a
// management container needs: with no driver files, or no node.
func TestManagementSpecRefusals(t *testing.T) {
	dir := root(t, true)
	obs := observe(t, dir)
	c := obs.Containers
	c.DriverFiles = nil
	if _, err := cdipkg.GenerateManagementCDI(&c, obs.DeviceNodes); err == nil || !strings.Contains(err.Error(), "no file of driver") {
		t.Errorf("without driver files: %v", err)
	}
	if _, err := cdipkg.GenerateManagementCDI(&obs.Containers, nil); err == nil || !strings.Contains(err.Error(), "no NVIDIA device node") {
		t.Errorf("without nodes: %v", err)
	}
}

// On a MIG host the plan's management step shows the config and monitor
// capability nodes a MIG manager needs; cdi_management = false plans no
// management spec, and leaves one on disk alone; a management spec of
// the GPU Operator's in /var/run/cdi, which outranks gpuenv's, is said.
func TestPlanManagementSpec(t *testing.T) {
	_, obs := migHost(t)
	p := plantest.Plan(t, newPlanner(), plantest.LoadSpec(t, repo+"container_toolkit {\n  engines = [\"podman\"]\n}\n"), obs)
	i := slices.IndexFunc(p.Steps, func(st plan.Step) bool { return st.Address == containers.CDIManagementAddress })
	if i < 0 {
		t.Fatalf("no management step: %q", addresses(p))
	}
	nodes := strings.Split(p.Steps[i].After["device_nodes"], ", ")
	for _, want := range []string{"/dev/nvidiactl", "/dev/nvidia0", "/dev/nvidia1", "/dev/nvidia-caps/nvidia-cap1", "/dev/nvidia-caps/nvidia-cap2", "/dev/nvidia-caps/nvidia-cap21"} {
		if !slices.Contains(nodes, want) {
			t.Errorf("the management step shows nodes %q, without %s", nodes, want)
		}
	}
	if f := p.Steps[i].Operations[0].File; f.Path != cdipkg.ManagementSpecPath || !strings.Contains(f.Content, "kind: management.nvidia.com/gpu\n") {
		t.Errorf("the management step writes %s:\n%s", f.Path, f.Content)
	}

	off := plantest.Plan(t, newPlanner(), plantest.LoadSpec(t, repo+"container_toolkit {\n  engines        = [\"podman\"]\n  cdi_management = false\n}\n"), obs)
	if slices.ContainsFunc(off.Steps, func(st plan.Step) bool { return st.Address == containers.CDIManagementAddress }) {
		t.Errorf("cdi_management = false plans %q", addresses(off))
	}

	obs.Containers.CDISpecs = append(obs.Containers.CDISpecs, facts.CDISpec{Path: "/var/run/cdi/management.nvidia.com-gpu.yaml", Kind: cdipkg.ManagementKind, Devices: []string{"all"}})
	p = plantest.Plan(t, newPlanner(), plantest.LoadSpec(t, repo+"container_toolkit {\n  engines = [\"podman\"]\n}\n"), obs)
	if !slices.ContainsFunc(p.Warnings, func(w finding.Finding) bool {
		return w.ID == containers.CheckCDIOutranked && strings.Contains(w.Summary, cdipkg.ManagementSpecPath)
	}) {
		t.Errorf("no warning that the operator's management spec outranks gpuenv's: %+v", p.Warnings)
	}
}

// Doctor: gpuenv's management spec on a MIG host is fine; one that names
// a node that is gone, or that misses the MIG config or monitor
// capability node on a host with a GPU in MIG mode, is a problem with
// the fix; with no GPU in MIG mode the capability nodes are not asked
// for.
func TestDoctorManagementSpec(t *testing.T) {
	dir, obs := migHost(t)
	s, err := cdipkg.GenerateManagementCDI(&obs.Containers, obs.DeviceNodes)
	if err != nil {
		t.Fatal(err)
	}
	content, err := cdipkg.MarshalCDI(s)
	if err != nil {
		t.Fatal(err)
	}
	check := func(content string) doctor.Check {
		t.Helper()
		hosttest.WriteFile(t, dir, cdipkg.ManagementSpecPath, content)
		o := observe(t, dir)
		o.NVML = obs.NVML
		return containerChecks(doctor.Run(doctor.Input{Obs: o}))["containers.cdi_management"]
	}
	if c := check(content); c.Status != doctor.OK {
		t.Errorf("gpuenv's spec: %+v", c)
	}

	// A spec written before nvidia-cap22's instance was destroyed.
	stale := strings.Replace(content, "        - path: /dev/nvidia-caps/nvidia-cap21\n", "        - path: /dev/nvidia-caps/nvidia-cap21\n        - path: /dev/nvidia-caps/nvidia-cap30\n", 1)
	if stale == content {
		t.Fatal("the spec names no nvidia-cap21")
	}
	if c := check(stale); c.Status != doctor.Problem || !strings.Contains(c.Summary, "names 1 device node that is gone (/dev/nvidia-caps/nvidia-cap30)") || c.Fix == nil {
		t.Errorf("a spec naming a node that is gone: %+v", c)
	}

	// A spec without the config capability's node (one nvidia-ctk wrote
	// before the node existed).
	noConfig := strings.Replace(content, "        - path: /dev/nvidia-caps/nvidia-cap1\n", "", 1)
	if noConfig == content {
		t.Fatal("the spec names no nvidia-cap1")
	}
	c := check(noConfig)
	if c.Status != doctor.Problem || !strings.Contains(c.Summary, "misses the MIG capability node /dev/nvidia-caps/nvidia-cap1 (mig/config)") || c.Fix == nil {
		t.Errorf("a spec without the config node: %+v", c)
	}

	// Without a GPU in MIG mode, the same spec is fine.
	hosttest.WriteFile(t, dir, cdipkg.ManagementSpecPath, noConfig)
	o := observe(t, dir)
	o.NVML.Devices = nil
	if c := containerChecks(doctor.Run(doctor.Input{Obs: o}))["containers.cdi_management"]; c.Status != doctor.OK {
		t.Errorf("no MIG: %+v", c)
	}
}

// BenchmarkPlanCDIManagement measures the container_toolkit plan on the
// MIG host with the CDI spec alone and with the management spec beside
// it: what writing the second spec adds to a plan.
func BenchmarkPlanCDIManagement(b *testing.B) {
	for _, c := range []struct{ name, src string }{
		{"cdi", repo + "container_toolkit {\n  engines        = [\"podman\"]\n  cdi_management = false\n}\n"},
		{"cdi+management", repo + "container_toolkit {\n  engines = [\"podman\"]\n}\n"},
	} {
		b.Run(c.name, func(b *testing.B) {
			_, obs := migHost(b)
			p := filepath.Join(b.TempDir(), "gpuenv.hcl")
			if err := os.WriteFile(p, []byte(c.src), 0o644); err != nil {
				b.Fatal(err)
			}
			s, diags := spec.Load(p, spec.LoadOptions{})
			if diags.HasErrors() {
				b.Fatal(diags)
			}
			pl := newPlanner()
			b.ReportAllocs()
			for b.Loop() {
				if _, diags := pl.Plan(context.Background(), s, obs); diags.HasErrors() {
					b.Fatal(diags)
				}
			}
		})
	}
}

// A plan that changes the MIG layout writes the management spec at
// apply, after the MIG step, from the capability nodes /dev then has; the
// CDI spec beside it is made at apply after the MIG step too, from the
// instances NVML then lists (TestCDISpecAfterMIGChangeNamesTheNewInstances).
func TestManagementSpecFollowsMIGChange(t *testing.T) {
	_, obs := migHost(t)
	src := repo + "mig \"0\" {\n  instances = [\"7g.40gb\"]\n}\n\ncontainer_toolkit {\n  engines = [\"podman\"]\n}\n"
	pl := planner.New(containers.Kind.Provider(), devices.Kind.Provider())
	pl.Candidates = candidates
	p := plantest.Plan(t, pl, plantest.LoadSpec(t, src), obs)
	j := slices.IndexFunc(p.Steps, func(st plan.Step) bool { return st.Address == devices.MIGAddress("0") })
	for _, c := range []struct{ address, generate string }{
		{containers.CDIManagementAddress, plan.GenerateManagementCDI},
		{containers.CDIAddress, plan.GenerateCDI},
	} {
		i := slices.IndexFunc(p.Steps, func(st plan.Step) bool { return st.Address == c.address })
		if i < 0 || j < 0 {
			t.Fatalf("steps %q", addresses(p))
		}
		st := p.Steps[i]
		if f := st.Operations[0].File; f.Generate != c.generate || f.Content != "" {
			t.Errorf("%s of a MIG change is not made at apply: %+v %v", c.address, f, st.After)
		}
		if c.generate == plan.GenerateManagementCDI && st.After["device_nodes"] != plan.KnownAfterApply {
			t.Errorf("the management step shows its device nodes before apply: %v", st.After)
		}
		if !slices.Contains(st.DependsOn, devices.MIGAddress("0")) || i < j {
			t.Errorf("%s (at %d, depends on %q) does not follow the MIG step (at %d)", c.address, i, st.DependsOn, j)
		}
	}
	// Without a MIG change, the spec is made at plan.
	p = plantest.Plan(t, pl, plantest.LoadSpec(t, repo+"container_toolkit {\n  engines = [\"podman\"]\n}\n"), obs)
	if i := slices.IndexFunc(p.Steps, func(st plan.Step) bool { return st.Address == containers.CDIManagementAddress }); i < 0 || p.Steps[i].Operations[0].File.Generate != "" {
		t.Errorf("without a MIG change: %q", addresses(p))
	}
}
