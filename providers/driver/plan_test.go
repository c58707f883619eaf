package driver_test

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
	"github.com/gpuenv/gpuenv/providers"
	"github.com/gpuenv/gpuenv/providers/driver"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
	"github.com/gpuenv/gpuenv/providers/host/pkgkit"
)

// countingCandidates answers candidate questions from a map and counts them.
type countingCandidates struct {
	versions map[string][]string
	asked    *int
}

func (tb countingCandidates) Versions(_ context.Context, _ planpkg.Manager, name string) ([]string, error) {
	*tb.asked++
	return tb.versions[name], nil
}

// planObserve lays out a fixture root and observes it. The package
// database is the test's own list, so that each case says exactly which
// driver packages are installed.
func planObserve(t *testing.T, fixture string, pkgs ...facts.Package) (*host.Host, *facts.Observation) {
	t.Helper()
	h := hosttest.Fixture(t, fixture)
	obs := providers.Observe(context.Background(), h, providers.ObserveOptions{})
	obs.Packages.Manager = "dpkg"
	obs.Packages.Packages = pkgs
	// These plans are of the driver alone: fabric_test.go plans Fabric
	// Manager with it, on the fixture's NVSwitches.
	obs.Fabric = facts.Fabric{}
	return h, obs
}

func planInstalled(name, ver string, hold bool) facts.Package {
	want := "install"
	if hold {
		want = "hold"
	}
	return facts.Package{Name: name, Version: ver, State: "installed", Want: want, Hold: hold}
}

// planApply changes the observation as apt would carry out the steps.
func planApply(obs *facts.Observation, steps []planpkg.Step) {
	for _, s := range steps {
		for _, op := range s.Operations {
			p := op.Packages
			if p == nil {
				continue
			}
			obs.Packages.Packages = slices.DeleteFunc(obs.Packages.Packages, func(q facts.Package) bool {
				return slices.Contains(p.Remove, q.Name) || slices.ContainsFunc(p.Install, func(i planpkg.PackagePin) bool { return i.Name == q.Name })
			})
			for _, i := range p.Install {
				obs.Packages.Packages = append(obs.Packages.Packages, planInstalled(i.Name, i.Version, false))
			}
			for i, q := range obs.Packages.Packages {
				if slices.Contains(p.Hold, q.Name) {
					obs.Packages.Packages[i].Hold, obs.Packages.Packages[i].Want = true, "hold"
				}
				if slices.Contains(p.Unhold, q.Name) {
					obs.Packages.Packages[i].Hold, obs.Packages.Packages[i].Want = false, "install"
				}
			}
		}
	}
}

var planDebianVersions = map[string][]string{
	"nvidia-driver":           {"535.309.01-0+deb12u1", "535.261.03-1"},
	"nvidia-kernel-dkms":      {"535.309.01-0+deb12u1", "535.261.03-1"},
	"nvidia-open-kernel-dkms": {"535.261.03-1"},
	"nvidia-smi":              {"535.309.01-0+deb12u1", "535.261.03-1"},
	"libnvidia-ml1":           {"535.309.01-0+deb12u1", "535.261.03-1"},
	"libcuda1":                {"535.309.01-0+deb12u1", "535.261.03-1"},
}

type planStep struct {
	address string
	action  planpkg.Action
	pins    string // name=version … of the step's package operations
	reason  string // a part of the reason
}

func planPins(s planpkg.Step) string {
	var out []string
	for _, op := range s.Operations {
		if p := op.Packages; p != nil {
			for _, i := range p.Install {
				out = append(out, i.Name+"="+i.Version)
			}
			for _, r := range p.Remove {
				out = append(out, "-"+r)
			}
			for _, r := range p.Hold {
				out = append(out, "hold:"+r)
			}
		}
	}
	return strings.Join(out, " ")
}

func TestPlan(t *testing.T) {
	tests := []struct {
		name    string
		fixture string
		pkgs    []facts.Package
		src     string
		want    []planStep
	}{
		{
			name:    "Debian's driver on a fresh Debian host",
			fixture: "debian12-distro",
			src:     "driver {\n  version = \"535.*\"\n  kernel_modules = \"proprietary\"\n  hold = true\n}\n",
			want: []planStep{
				{"driver", planpkg.Create, "nvidia-driver=535.309.01-0+deb12u1 nvidia-kernel-dkms=535.309.01-0+deb12u1", "No distro driver package is installed; installs nvidia-driver, nvidia-kernel-dkms 535.309.01-0+deb12u1 (proprietary kernel modules)"},
				{"driver.hold", planpkg.Create, "hold:nvidia-driver hold:nvidia-kernel-dkms", "hold = true keeps nvidia-driver, nvidia-kernel-dkms at the planned version"},
			},
		},
		{
			name:    "an installed driver that satisfies the spec is left alone",
			fixture: "debian12-distro",
			pkgs:    []facts.Package{planInstalled("nvidia-driver", "535.261.03-1", false), planInstalled("nvidia-kernel-dkms", "535.261.03-1", false)},
			src:     "driver {\n  version = \"535.*\"\n  kernel_modules = \"proprietary\"\n}\n",
		},
		{
			name:    "switching Debian to the open modules",
			fixture: "debian12-distro",
			pkgs:    []facts.Package{planInstalled("nvidia-driver", "535.261.03-1", false), planInstalled("nvidia-kernel-dkms", "535.261.03-1", false)},
			src:     "driver {\n  version = \"535.*\"\n  kernel_modules = \"open\"\n}\n",
			want: []planStep{
				{"driver.purge", planpkg.Delete, "-nvidia-kernel-dkms", "Removes nvidia-kernel-dkms: another driver branch, flavour or source"},
				{"driver", planpkg.Replace, "nvidia-driver=535.261.03-1 nvidia-open-kernel-dkms=535.261.03-1 firmware-nvidia-gsp=535.261.03-1", "The package nvidia-driver is installed without nvidia-open-kernel-dkms, firmware-nvidia-gsp; the loaded module is the proprietary flavour and the spec asks for open modules"},
			},
		},
		{
			name:    "a driver in place under other names than the spec's",
			fixture: "ubuntu2204-working",
			pkgs:    []facts.Package{planInstalled("cuda-drivers-550", "550.54.15-1", false), planInstalled("nvidia-driver-550-open", "550.54.15-0ubuntu1", false)},
			src:     "driver {\n  version = \">= 545.23.08\"\n  source = \"nvidia\"\n}\n",
		},
		{
			name:    "the userspace alone",
			fixture: "debian12-distro",
			src:     "driver {\n  version = \"535.*\"\n  kernel_modules = \"none\"\n}\n",
			want: []planStep{
				{"driver", planpkg.Create, "nvidia-smi=535.309.01-0+deb12u1 libnvidia-ml1=535.309.01-0+deb12u1 libcuda1=535.309.01-0+deb12u1", "the driver's userspace only"},
			},
		},
		{
			name:    "removing the driver",
			fixture: "debian12-distro",
			pkgs:    []facts.Package{planInstalled("nvidia-driver", "535.261.03-1", false), planInstalled("nvidia-kernel-dkms", "535.261.03-1", false), planInstalled("bash", "5.2.15-2+b8", false)},
			src:     "driver {\n  absent = true\n}\n",
			want: []planStep{
				{"driver", planpkg.Delete, "-nvidia-driver -nvidia-kernel-dkms", "absent = true removes the NVIDIA driver"},
			},
		},
		{
			name:    "removing Ubuntu's driver with its signed modules",
			fixture: "ubuntu2204-h100-fresh",
			pkgs: []facts.Package{planInstalled("nvidia-driver-550-open", "550.120-0ubuntu0.22.04.1", false),
				planInstalled("linux-modules-nvidia-550-open-5.15.0-105-generic", "5.15.0-105.115", false),
				planInstalled("linux-objects-nvidia-550-open-5.15.0-105-generic", "5.15.0-105.115", false),
				planInstalled("linux-signatures-nvidia-5.15.0-105-generic", "5.15.0-105.115", false),
				planInstalled("linux-modules-nvidia-550-open-generic", "5.15.0-105.115", false),
				planInstalled("linux-modules-5.15.0-105-generic", "5.15.0-105.115", false)},
			src: "driver {\n  absent = true\n}\n",
			want: []planStep{
				{"driver", planpkg.Delete, "-nvidia-driver-550-open -linux-modules-nvidia-550-open-5.15.0-105-generic -linux-objects-nvidia-550-open-5.15.0-105-generic -linux-signatures-nvidia-5.15.0-105-generic -linux-modules-nvidia-550-open-generic", "absent = true removes the NVIDIA driver"},
			},
		},
		{
			name:    "NVIDIA's open driver on a fresh Ubuntu H100",
			fixture: "ubuntu2204-h100-fresh",
			src:     "driver {\n  version = \">= 550.54.15, < 551\"\n  source = \"nvidia\"\n  kernel_modules = \"open\"\n}\n",
			want: []planStep{
				{"driver", planpkg.Create, "nvidia-driver-550-open=550.127.05-0ubuntu1", "No nvidia driver package is installed"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, obs := planObserve(t, tt.fixture, tt.pkgs...)
			if strings.Contains(tt.src, `source = "nvidia"`) {
				// The candidates list NVIDIA's packages: the host has its
				// repository.
				obs.Repositories = append(obs.Repositories, facts.Repository{File: "/etc/apt/sources.list.d/cuda-ubuntu2204-x86_64.list", URIs: []string{"https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/"}})
			}
			versions := map[string][]string{"nvidia-driver-550-open": {"550.127.05-0ubuntu1", "550.54.15-0ubuntu1"}}
			for k, v := range planDebianVersions {
				versions[k] = v
			}
			asked := 0
			pl := planner.New(driver.Kind.Provider())
			pl.Candidates = countingCandidates{versions: versions, asked: &asked}
			s := plantest.LoadSpec(t, tt.src)
			plan := plantest.Plan(t, pl, s, obs)
			var got []planStep
			for _, st := range plan.Steps {
				got = append(got, planStep{st.Address, st.Action, planPins(st), st.Reason})
			}
			if len(got) != len(tt.want) {
				t.Fatalf("steps %+v, want %+v", got, tt.want)
			}
			for i, w := range tt.want {
				g := got[i]
				if g.address != w.address || g.action != w.action || g.pins != w.pins || !strings.Contains(g.reason, w.reason) {
					t.Errorf("step %d:\n got %+v\nwant %+v", i, g, w)
				}
			}
			if len(tt.want) == 0 && asked != 0 {
				t.Errorf("a converged driver asked the package manager %d times", asked)
			}
			// Idempotence: once the packages are as planned, nothing is left.
			planApply(obs, plan.Steps)
			if tt.name == "switching Debian to the open modules" {
				obs.Driver.ModuleFlavor = "open"
			}
			again := plantest.Plan(t, pl, s, obs)
			if len(again.Steps) != 0 {
				t.Errorf("after applying, the plan still has %+v", again.Steps)
			}
		})
	}
}

func TestPersistence(t *testing.T) {
	h, obs := planObserve(t, "ubuntu2204-working", planInstalled("nvidia-driver-550", "550.54.15-0ubuntu1", false))
	s := plantest.LoadSpec(t, "driver {\n  version = \"550.*\"\n  persistence_mode = true\n}\n")
	pl := planner.New(driver.Kind.Provider())
	asked := 0
	pl.Candidates = countingCandidates{asked: &asked}
	plan := plantest.Plan(t, pl, s, obs)
	st := plan.Step("driver.persistence")
	if st == nil || len(plan.Steps) != 1 {
		t.Fatalf("steps %+v, want only driver.persistence", plan.Steps)
	}
	// The fixture is not the running system: the unit is enabled for its
	// next boot, and not started now.
	if sv := st.Operations[0].Service; sv == nil || sv.Unit != driver.PersistencedUnit || !sv.Enable || sv.Now {
		t.Errorf("operation %+v", st.Operations[0])
	}
	if !strings.HasSuffix(st.Reason, " The root is not the running system, so the change takes effect at the next boot with systemd.") {
		t.Errorf("reason %q", st.Reason)
	}
	// Only where systemd is process 1 of the running system can systemctl
	// start the service now; in a container whose process 1 is bash,
	// enable --now fails.
	for _, in := range []facts.Init{{PID1: "systemd", Live: true, Systemd: true}, {PID1: "bash", Live: true}} {
		o := *obs
		o.Init = in
		p, _ := pl.Plan(context.Background(), s, &o)
		st := p.Step("driver.persistence")
		if st == nil || st.Operations[0].Service.Now != in.Systemd {
			t.Errorf("init %+v: %+v", in, st)
		}
		if in.Systemd == strings.Contains(st.Reason, "next boot") {
			t.Errorf("init %+v: reason %q", in, st.Reason)
		}
	}
	// systemctl enable makes the link; then nothing is left to do.
	link := filepath.Join(h.Root(), "etc/systemd/system/multi-user.target.wants")
	if err := os.MkdirAll(link, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/usr/lib/systemd/system/nvidia-persistenced.service", filepath.Join(link, driver.PersistencedUnit)); err != nil {
		t.Fatal(err)
	}
	obs.Units = []facts.Unit{driver.ObserveUnit(h)}
	again, _ := pl.Plan(context.Background(), s, obs)
	if len(again.Steps) != 0 {
		t.Errorf("after enabling, steps %+v", again.Steps)
	}
	// NVML's own report wins where it has one.
	obs.NVML.Devices = []facts.GPUDevice{{Index: 0, UUID: "GPU-1", PersistenceMode: "disabled"}}
	again, _ = pl.Plan(context.Background(), s, obs)
	if again.Step("driver.persistence") == nil {
		t.Error("NVML reports persistence off, and no step enables it")
	}
}

func TestPlanBranchChange(t *testing.T) {
	_, obs := planObserve(t, "ubuntu2204-working")
	// The fixture's own driver packages give way to an older branch's.
	obs.Packages.Packages = []facts.Package{planInstalled("nvidia-driver-535", "535.183.01-0ubuntu0.22.04.1", true)}
	s := plantest.LoadSpec(t, "driver {\n  version = \"550.*\"\n  kernel_modules = \"proprietary\"\n  hold = true\n}\n")
	asked := 0
	pl := planner.New(driver.Kind.Provider())
	pl.Candidates = countingCandidates{versions: map[string][]string{"nvidia-driver-550": {"550.144.03-0ubuntu0.22.04.1", "550.54.15-0ubuntu1"}}, asked: &asked}
	plan := plantest.Plan(t, pl, s, obs)
	var got []string
	for _, st := range plan.Steps {
		got = append(got, st.Address+" "+st.Action.String()+" "+planPins(st))
	}
	want := []string{
		"driver.purge delete -nvidia-driver-535",
		"driver replace nvidia-driver-550=550.144.03-0ubuntu0.22.04.1",
		"driver.hold update hold:nvidia-driver-550",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("steps %q, want %q", got, want)
	}
	purge := plan.Steps[0].Operations[0].Packages
	if !purge.Purge || !slices.Equal(purge.Unhold, []string{"nvidia-driver-535"}) {
		t.Errorf("the held old driver must be released and purged: %+v", purge)
	}
	d := plan.Step("driver")
	if !d.Flags.NeedsReboot || !d.Flags.NeedsModuleReload || !d.Flags.BuildsKernelModule || d.Before["loaded_module"] != obs.Driver.ModuleVersion {
		t.Errorf("driver flags %+v before %v", d.Flags, d.Before)
	}
	planApply(obs, plan.Steps)
	plantest.Converged(t, pl, s, obs, "applying")
}

// On the running system with nothing holding the GPU but
// nvidia-persistenced, a driver change reloads the modules after its
// package transaction and needs no reboot; with a display server on
// nvidia_drm it keeps the reboot and says why.
func TestPlanReload(t *testing.T) {
	running := func() *facts.Observation {
		_, obs := planObserve(t, "ubuntu2204-working")
		obs.Packages.Packages = []facts.Package{planInstalled("nvidia-driver-535", "535.183.01-0ubuntu0.22.04.1", false)}
		obs.Root = "/"
		obs.Init = facts.Init{Live: true, PID1: "systemd", Systemd: true}
		obs.Context.Kind = "host"
		obs.NVML.Devices = nil
		for i := range obs.Kernel.Loaded {
			obs.Kernel.Loaded[i].RefCount = len(obs.Kernel.Loaded[i].UsedBy)
		}
		obs.Kernel.Holders = []facts.Holder{{PID: 900, Command: "nvidia-persiste", Devices: []string{"/dev/nvidiactl"}, Module: "nvidia", Unit: "nvidia-persistenced.service"}}
		return obs
	}
	s := plantest.LoadSpec(t, "driver {\n  version = \"550.*\"\n  kernel_modules = \"proprietary\"\n}\n")
	pl := planner.New(driver.Kind.Provider())
	asked := 0
	pl.Candidates = countingCandidates{versions: map[string][]string{"nvidia-driver-550": {"550.144.03-0ubuntu0.22.04.1"}}, asked: &asked}

	plan := plantest.Plan(t, pl, s, running())
	d := plan.Step("driver")
	var ops []string
	for _, op := range d.Operations[1:] {
		switch {
		case op.Service != nil:
			ops = append(ops, op.Service.Run+" "+op.Service.Unit)
		case op.Kernel != nil:
			ops = append(ops, strings.TrimSpace(string(op.Kernel.Action)+" "+op.Kernel.Module+op.Kernel.Version))
		}
	}
	if len(ops) < 4 || ops[0] != "stop nvidia-persistenced.service" || ops[len(ops)-2] != "start nvidia-persistenced.service" || ops[len(ops)-1] != "check_version 550.144.03" {
		t.Errorf("reload operations %q", ops)
	}
	if !slices.Contains(ops, "unload_module nvidia") || !slices.Contains(ops, "load_module nvidia") {
		t.Errorf("the nvidia module is not reloaded: %q", ops)
	}
	if d.Flags.NeedsReboot || !d.Flags.NeedsModuleReload || plan.NeedsReboot || !strings.Contains(d.Reason, "no reboot is needed") {
		t.Errorf("flags %+v, plan needs reboot %v, reason %q", d.Flags, plan.NeedsReboot, d.Reason)
	}
	if err := plan.Validate(); err != nil {
		t.Errorf("the plan does not validate: %v", err)
	}

	busy := running()
	busy.Kernel.Holders = append(busy.Kernel.Holders, facts.Holder{PID: 1500, Command: "Xorg", Devices: []string{"/dev/dri/card0"}, Module: "nvidia_drm"})
	plan = plantest.Plan(t, pl, s, busy)
	d = plan.Step("driver")
	if len(d.Operations) != 1 || !d.Flags.NeedsReboot || !plan.NeedsReboot ||
		!strings.Contains(d.Reason, "A reboot is required: the modules cannot be reloaded now, since the display server Xorg (pid 1500) holds nvidia_drm") {
		t.Errorf("with a display: %d operations, flags %+v, reason %q", len(d.Operations), d.Flags, d.Reason)
	}

	// A training job: named as what stops the reload, or, with
	// --interrupt-gpu-processes, stopped by the reload.
	job := running()
	job.NVML.Devices = []facts.GPUDevice{{Index: 0, UUID: "GPU-0", Processes: []facts.GPUProcess{{PID: 4242, Name: "/usr/bin/python3"}}}}
	plan = plantest.Plan(t, pl, s, job)
	if d = plan.Step("driver"); !d.Flags.NeedsReboot || !strings.Contains(d.Reason, "GPU processes run: /usr/bin/python3 (pid 4242) runs on GPU 0 (--interrupt-gpu-processes stops them)") {
		t.Errorf("with a job: flags %+v, reason %q", d.Flags, d.Reason)
	}
	pl.InterruptGPUProcesses = true
	plan = plantest.Plan(t, pl, s, job)
	d = plan.Step("driver")
	stops := slices.IndexFunc(d.Operations, func(op planpkg.Operation) bool {
		return op.Kernel != nil && op.Kernel.Action == planpkg.KernelStopProcess && op.Kernel.PID == 4242 && op.Kernel.Process == "python3"
	})
	if stops < 0 || d.Flags.NeedsReboot || !d.Flags.InterruptsGPUProcesses || !strings.Contains(d.Reason, "stopping the GPU processes /usr/bin/python3 (pid 4242) runs on GPU 0") {
		t.Errorf("interrupting: stop at %d, flags %+v, reason %q", stops, d.Flags, d.Reason)
	}
}

// TestPlanDnfMixedEVR: NVIDIA's rhel9 repository gives the driver's
// packages different epochs and releases (cuda-drivers 550.90.07-1,
// kmod-nvidia-latest-dkms 3:550.90.07-1.el9). The step installs each at
// its own version, and once they are installed the driver has converged.
func TestPlanDnfMixedEVR(t *testing.T) {
	const src = "driver {\n  version = \"550.90.07\"\n  source = \"nvidia\"\n  kernel_modules = \"proprietary\"\n}\n"
	const pins = "cuda-drivers=550.90.07-1 kmod-nvidia-latest-dkms=3:550.90.07-1.el9"
	for _, tc := range []struct {
		name, fixture string
		cands         func(obs *facts.Observation) planner.Candidates
	}{
		// No dnf cache: the package manager's answer.
		{"rhel9, asking dnf", "rhel9", func(*facts.Observation) planner.Candidates {
			asked := 0
			return countingCandidates{versions: map[string][]string{
				"cuda-drivers":            {"550.90.07-1", "550.54.15-1"},
				"kmod-nvidia-latest-dkms": {"3:550.90.07-1.el9", "3:550.54.15-1.el9"},
			}, asked: &asked}
		}},
		// dnf's cache of NVIDIA's repository: what the source offers.
		{"rhel9-dnf, from the cache", "rhel9-dnf", func(obs *facts.Observation) planner.Candidates {
			c := pkgkit.NewFactsCandidates()
			c.UseIndexes(&obs.PackageIndexes)
			return c
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, obs := planObserve(t, tc.fixture)
			obs.Packages.Manager = "rpm"
			pl := planner.New(driver.Kind.Provider())
			pl.Candidates = tc.cands(obs)
			s := plantest.LoadSpec(t, src)
			plan, diags := pl.Plan(context.Background(), s, obs)
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			if len(plan.Steps) == 0 || plan.Steps[0].Address != "driver" {
				t.Fatalf("steps %+v, want the driver's first", plan.Steps)
			}
			st := plan.Steps[0]
			if got := planPins(st); got != pins {
				t.Errorf("installs %s, want %s", got, pins)
			}
			if want := "installs cuda-drivers 550.90.07-1, kmod-nvidia-latest-dkms 3:550.90.07-1.el9 (proprietary kernel modules)"; !strings.Contains(st.Reason, want) {
				t.Errorf("reason %q, want it to say %q", st.Reason, want)
			}
			if st.After["version"] != "550.90.07-1" {
				t.Errorf("version %q, want cuda-drivers' 550.90.07-1", st.After["version"])
			}
			planApply(obs, plan.Steps)
			// Before the reboot the open module is still loaded: the
			// packages are as planned, as they are for apt, whose
			// packages share one version.
			if again := plantest.Plan(t, pl, s, obs); len(again.Steps) != 0 {
				t.Errorf("after applying, before the reboot, the plan still has %+v", again.Steps)
			}
			obs.Driver.ModuleFlavor = "proprietary"
			if again := plantest.Plan(t, pl, s, obs); len(again.Steps) != 0 {
				t.Errorf("after applying, the plan still has %+v", again.Steps)
			}
		})
	}
}
