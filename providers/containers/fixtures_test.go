package containers_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"
	"tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/compat"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/finding"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/planner/plantest"
	"github.com/gpuenv/gpuenv/providers"
	"github.com/gpuenv/gpuenv/providers/containers"
	cdipkg "github.com/gpuenv/gpuenv/providers/host/cdi"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
	"github.com/gpuenv/gpuenv/spec/version"
)

var update = flag.Bool("update", false, "rewrite the golden plans in testdata/golden")

// toolkitStatus is the dpkg database's record of toolkit 1.17.8 from
// NVIDIA's repository.
const toolkitStatus = `Package: nvidia-container-toolkit
Status: install ok installed
Architecture: amd64
Version: 1.17.8-1

Package: nvidia-container-toolkit-base
Status: install ok installed
Architecture: amd64
Version: 1.17.8-1

Package: libnvidia-container-tools
Status: install ok installed
Architecture: amd64
Version: 1.17.8-1

Package: libnvidia-container1
Status: install ok installed
Architecture: amd64
Version: 1.17.8-1

`

// root lays out the container host with the variants named laid over it,
// and the toolkit when withToolkit.
func root(t testing.TB, withToolkit bool, variants ...string) string {
	t.Helper()
	dir := hosttest.Build(t, "containers-host")
	for _, v := range variants {
		ar, err := txtar.ParseFile(filepath.Join("testdata", "variants", v+".txtar"))
		if err != nil {
			t.Fatal(err)
		}
		if err := hosttest.BuildArchive(ar, dir, hosttest.TestdataDir(t)); err != nil {
			t.Fatal(err)
		}
	}
	if withToolkit {
		installToolkit(t, dir)
	}
	return dir
}

// installToolkit puts toolkit 1.17.8 in place, as its packages would.
func installToolkit(t testing.TB, dir string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, "var/lib/dpkg/status"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(toolkitStatus); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"/usr/bin/nvidia-cdi-hook", "/usr/bin/nvidia-ctk", "/usr/bin/nvidia-container-runtime"} {
		hosttest.WriteFile(t, dir, b, "")
	}
}

func observe(t *testing.T, dir string) *facts.Observation {
	t.Helper()
	obs := providers.Observe(context.Background(), hosttest.New(t, dir), providers.ObserveOptions{})
	// The fixture is not a running system; the tests plan as if systemd
	// ran it, so that restarts show.
	obs.Init = facts.Init{PID1: "systemd", Live: true, Systemd: true}
	return obs
}

const repo = `repository "nvidia-container-toolkit" {
  url     = "https://nvidia.github.io/libnvidia-container/stable/deb/amd64/"
  keyring = "https://nvidia.github.io/libnvidia-container/gpgkey"
}
`

var candidates = plantest.Candidates{
	"nvidia-container-toolkit":      {"1.17.8-1", "1.17.7-1", "1.16.2-1"},
	"nvidia-container-toolkit-base": {"1.17.8-1", "1.17.7-1", "1.16.2-1"},
	"libnvidia-container-tools":     {"1.17.8-1", "1.17.7-1", "1.16.2-1"},
	"libnvidia-container1":          {"1.17.8-1", "1.17.7-1", "1.16.2-1"},
}

func newPlanner() *planner.Planner {
	pl := planner.New(containers.Kind.Provider())
	pl.Candidates = candidates
	return pl
}

// golden is what a golden file holds: the steps and warnings.
type golden struct {
	Steps    []plan.Step      `json:"steps"`
	Warnings finding.Warnings `json:"warnings,omitempty"`
}

func checkGolden(t *testing.T, name string, p *plan.Plan) {
	t.Helper()
	var warns []finding.Finding
	for _, w := range p.Warnings {
		if strings.HasPrefix(w.ID, "cdi-") || strings.HasPrefix(w.ID, "container-") {
			warns = append(warns, w)
		}
	}
	got, err := json.MarshalIndent(golden{Steps: p.Steps, Warnings: warns}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	file := filepath.Join("testdata", "golden", name+".json")
	if *update {
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if string(want) != string(got) {
		t.Errorf("plan differs from %s (go test -update rewrites it):\n%s", file, got)
	}
}

// apply writes what the plan's file operations write, as apply would.
func apply(t *testing.T, dir string, p *plan.Plan) {
	t.Helper()
	for _, s := range p.Steps {
		for _, op := range s.Operations {
			switch {
			case op.File != nil && op.File.Symlink != "":
				link := filepath.Join(dir, op.File.Path)
				if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(op.File.Symlink, link); err != nil {
					t.Fatal(err)
				}
			case op.File != nil:
				hosttest.WriteFile(t, dir, op.File.Path, op.File.Content)
			}
		}
	}
}

func addresses(p *plan.Plan) []string {
	var out []string
	for _, s := range p.Steps {
		out = append(out, s.Address+" "+s.Action.String())
	}
	return out
}

func TestGoldenPlans(t *testing.T) {
	for _, tc := range []struct {
		name     string
		toolkit  bool
		variants []string
		spec     string
		steps    []string
		// driverStep is set when the plan's driver step would change the
		// host before the file is written, which this test does not run.
		driverStep bool
	}{{
		name: "unconfigured",
		spec: repo + "container_toolkit {\n  version = \"1.17.*\"\n  engines = [\"docker\", \"containerd\", \"podman\"]\n}\n",
		steps: []string{
			"container_toolkit create",
			"container_toolkit.cdi create",
			"container_toolkit.cdi_management create",
			"container_toolkit.dev_char create",
			"container_toolkit.engine.containerd create",
			"container_toolkit.engine.docker create",
		},
	}, {
		name:     "docker-configured",
		toolkit:  true,
		variants: []string{"docker-configured"},
		spec:     repo + "container_toolkit {\n  engines = [\"docker\", \"containerd\"]\n  cdi     = true\n}\n",
		steps: []string{
			"container_toolkit.cdi create",
			"container_toolkit.cdi_management create",
			"container_toolkit.dev_char create",
			"container_toolkit.engine.containerd update",
		},
	}, {
		name:     "containerd-v3",
		toolkit:  true,
		variants: []string{"containerd-v3"},
		spec:     repo + "container_toolkit {\n  engines         = [\"containerd\"]\n  default_runtime = true\n}\n",
		steps:    []string{"container_toolkit.dev_char create", "container_toolkit.engine.containerd update"},
	}, {
		name:    "crio",
		toolkit: true,
		spec:    repo + "container_toolkit {\n  engines = [\"crio\"]\n}\n",
		steps:   []string{"container_toolkit.dev_char create", "container_toolkit.engine.crio create"},
	}, {
		name:     "stale-cdi",
		toolkit:  true,
		variants: []string{"stale-cdi"},
		spec:     repo + "container_toolkit {\n  engines = [\"podman\"]\n}\n",
		steps:    []string{"container_toolkit.cdi update", "container_toolkit.cdi_management create", "container_toolkit.dev_char create"},
	}, {
		name:     "cdi-refresh",
		toolkit:  true,
		variants: []string{"cdi-refresh"},
		spec:     repo + "container_toolkit {\n  engines = [\"podman\"]\n}\n",
		steps:    []string{"container_toolkit.cdi create", "container_toolkit.cdi_management create", "container_toolkit.dev_char create"},
	}, {
		name:       "driver-upgrade",
		toolkit:    true,
		variants:   []string{"stale-cdi"},
		spec:       repo + "repository \"cuda\" {\n  url = \"https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/\"\n}\ndriver {\n  version = \"570.*\"\n  source  = \"nvidia\"\n}\ncontainer_toolkit {\n  engines = [\"podman\"]\n}\n",
		steps:      []string{"container_toolkit.cdi update", "container_toolkit.cdi_management create", "container_toolkit.dev_char create"},
		driverStep: true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := root(t, tc.toolkit, tc.variants...)
			s := plantest.LoadSpec(t, tc.spec)
			pl := newPlanner()
			p := plantest.Plan(t, pl, s, observe(t, dir))
			if got := addresses(p); !slices.Equal(got, tc.steps) {
				t.Errorf("steps %q, want %q", got, tc.steps)
			}
			checkGolden(t, tc.name, p)
			shown := checkCDIShown(t, p)
			if tc.driverStep {
				if f := p.Steps[0].Operations[0].File; f.Generate != plan.GenerateCDI || f.Content != "" {
					t.Errorf("the CDI step of a driver change is not made at apply: %+v", f)
				}
				if f := p.Steps[1].Operations[0].File; f.Generate != plan.GenerateManagementCDI || f.Content != "" || p.Steps[1].After["device_nodes"] != plan.KnownAfterApply {
					t.Errorf("the CDI management step of a driver change is not made at apply: %+v %v", f, p.Steps[1].After)
				}
				// The planner drops the dependency on a step its plan does
				// not have; the provider's own step names the driver.
				resp := containers.Provider{}.Plan(context.Background(), &planner.Request{Spec: s, Facts: observe(t, dir), Candidates: candidates})
				if i := slices.IndexFunc(resp.Steps, func(s plan.Step) bool { return s.Address == containers.CDIAddress }); i < 0 || !slices.Contains(resp.Steps[i].DependsOn, "driver") {
					t.Errorf("the CDI step does not wait for the driver: %+v", resp.Steps)
				}
				return
			}
			// Once the packages are in and the files written, the host
			// matches the spec.
			apply(t, dir, p)
			if shown != "" {
				// What the plan showed is what is on disk.
				for _, sp := range observe(t, dir).Containers.CDISpecs {
					if sp.Path == cdipkg.CDISpecPath && sp.SHA256 != shown {
						t.Errorf("the plan showed sha256 %s for %s, the file written has %s", shown, sp.Path, sp.SHA256)
					}
				}
			}
			if !tc.toolkit {
				installToolkit(t, dir)
			}
			plantest.Converged(t, pl, s, observe(t, dir), "applying")
		})
	}
}

// checkCDIShown checks that p's CDI step, if any, shows what it writes:
// the digest of the content it carries and every device in it, or, for a
// spec apply makes, that its digest is known after apply. It returns the
// digest shown for content made at plan.
func checkCDIShown(t *testing.T, p *plan.Plan) string {
	t.Helper()
	for _, st := range p.Steps {
		if st.Address != containers.CDIAddress {
			continue
		}
		f := st.Operations[0].File
		if f.Generate != "" {
			if st.After["sha256"] != plan.KnownAfterApply {
				t.Errorf("the CDI step made at apply shows sha256 %q", st.After["sha256"])
			}
			return ""
		}
		if got, want := st.After["sha256"], planner.Digest(f.Content); got != want {
			t.Errorf("the CDI step shows sha256 %q, its content's is %s", got, want)
		}
		devices := strings.Split(st.After["devices"], ", ")
		if len(devices) < 2 {
			t.Errorf("the CDI step shows devices %q", st.After["devices"])
		}
		for _, d := range devices {
			if !strings.Contains(f.Content, "- name: "+d+"\n") && !strings.Contains(f.Content, "- name: \""+d+"\"\n") {
				t.Errorf("the CDI step shows device %s, which its content lacks", d)
			}
		}
		return st.After["sha256"]
	}
	return ""
}

// The spec gpuenv writes is one the CDI project's own reader accepts, with
// the devices engines ask for by index, UUID and all, and only hooks the
// toolkit has.
func TestCDISpecReadByTheCDIProject(t *testing.T) {
	dir := root(t, true)
	obs := observe(t, dir)
	s, err := cdipkg.GenerateCDI(&obs.Containers, obs.DeviceNodes, obs.NVML.Devices)
	if err != nil {
		t.Fatal(err)
	}
	text, err := cdipkg.MarshalCDI(s)
	if err != nil {
		t.Fatal(err)
	}
	specDir := t.TempDir()
	file := filepath.Join(specDir, "nvidia.yaml")
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	read, err := cdi.ReadSpec(file, 0)
	if err != nil {
		t.Fatalf("the CDI project refuses the spec: %v\n%s", err, text)
	}
	for _, name := range []string{"0", "1", "GPU-5d5a1ee2-2f2a-4b33-9ac3-5b3e8f1b2c4d", "GPU-0f6c3a1e-8e7b-4d2f-a4c1-2b9d7e6f5a30", "all"} {
		if read.GetDevice(name) == nil {
			t.Errorf("no device %s in\n%s", name, text)
		}
	}
	if all := read.GetDevice("all").ContainerEdits.DeviceNodes; len(all) != 2 {
		t.Errorf("all has %d device nodes", len(all))
	}
	for _, want := range []string{
		"hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15",
		"hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.1",
		"hostPath: /usr/lib/firmware/nvidia/550.54.15/gsp_ga10x.bin",
		// The kernel's firmware path, also where /lib is no link.
		"containerPath: /lib/firmware/nvidia/550.54.15/gsp_ga10x.bin",
		"hostPath: /usr/bin/nvidia-smi",
		"- path: /dev/nvidiactl",
		"- nvidia-cdi-hook\n",
		"- update-ldcache\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("spec lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "nvidia-smi.1.gz") {
		t.Errorf("the man page is not a driver file:\n%s", text)
	}

	// Without the driver's files there is no spec to write.
	files := obs.Containers.DriverFiles
	obs.Containers.DriverFiles = nil
	if _, err := cdipkg.GenerateCDI(&obs.Containers, obs.DeviceNodes, obs.NVML.Devices); err == nil || !strings.Contains(err.Error(), "no file of driver \"550.54.15\"") {
		t.Errorf("a spec without driver files: %v", err)
	}
	obs.Containers.DriverFiles = files

	// Toolkit 1.12 has no update-ldcache hook: the spec names none.
	obs.Containers.Toolkit.Version, obs.Containers.Toolkit.Hooks = "1.12.0", nil
	s, err = cdipkg.GenerateCDI(&obs.Containers, obs.DeviceNodes, obs.NVML.Devices)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.ContainerEdits.Hooks) != 0 {
		t.Errorf("hooks for a toolkit without them: %+v", s.ContainerEdits.Hooks)
	}
}

func TestObserveStaleCDI(t *testing.T) {
	obs := observe(t, root(t, true, "stale-cdi", "cdi-refresh"))
	c := obs.Containers
	if len(c.CDISpecs) != 2 {
		t.Fatalf("specs %+v", c.CDISpecs)
	}
	stale := c.CDISpecs[0]
	if stale.Path != "/etc/cdi/nvidia.yaml" || stale.DriverVersion != "535.261.03" || !slices.Contains(stale.Missing, "/usr/lib/x86_64-linux-gnu/libcuda.so.535.261.03") {
		t.Errorf("stale spec %+v", stale)
	}
	if !slices.Equal(stale.Hooks, []string{"update-ldcache"}) {
		t.Errorf("hooks %q", stale.Hooks)
	}
	if c.CDIInUse != "/var/run/cdi/nvidia.yaml" {
		t.Errorf("in use %q, want the dynamic directory's", c.CDIInUse)
	}
	if c.Toolkit.Version != "1.17.8" || c.Toolkit.HookPath != "/usr/bin/nvidia-cdi-hook" {
		t.Errorf("toolkit %+v", c.Toolkit)
	}
	if c.DriverVersion != "550.54.15" || len(c.GPUs) != 2 || c.GPUs[1].Minor != 1 || c.GPUs[1].Index != 1 {
		t.Errorf("driver %s, gpus %+v", c.DriverVersion, c.GPUs)
	}
}

func TestMissingRepository(t *testing.T) {
	s := plantest.LoadSpec(t, "container_toolkit {\n  engines = [\"docker\"]\n}\n")
	pl := planner.New(containers.Kind.Provider())
	pl.Candidates = plantest.Candidates{}
	_, diags := pl.Plan(context.Background(), s, observe(t, root(t, false)))
	if !diags.HasErrors() || !strings.Contains(diags.Error(), `repository "nvidia-container-toolkit"`) || diags[0].Subject == nil || diags[0].Subject.Start.Line != 1 {
		t.Errorf("diagnostics %v", diags)
	}
	// apt reads the key from a file: the block names the file and how
	// NVIDIA's instructions make it.
	if d := diags[0].Detail; !strings.Contains(d, `keyring = "/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg"`) || !strings.Contains(d, "gpg --dearmor") {
		t.Errorf("the block to add:\n%s", d)
	}
}

// A toolkit whose version apply picks (the plan's repository is not yet
// configured) leaves the spec to apply: the hooks it names are those of
// the toolkit the toolkit step installs.
func TestCDIAfterToolkitKnownAtApply(t *testing.T) {
	dir := root(t, false)
	s := plantest.LoadSpec(t, repo+"container_toolkit {\n  version = \"1.17.*\"\n  engines = [\"podman\"]\n}\n")
	pl := planner.New(containers.Kind.Provider())
	pl.Candidates = plantest.Candidates{}
	p := plantest.Plan(t, pl, s, observe(t, dir))
	if got, want := addresses(p), []string{"index.apt update", "container_toolkit create", "container_toolkit.cdi create", "container_toolkit.cdi_management create", "container_toolkit.dev_char create"}; !slices.Equal(got, want) {
		t.Fatalf("steps %q, want %q", got, want)
	}
	for i, gen := range map[int]string{2: plan.GenerateCDI, 3: plan.GenerateManagementCDI} {
		cdiStep := p.Steps[i]
		if f := cdiStep.Operations[0].File; f.Generate != gen || f.Content != "" {
			t.Errorf("%s is written at plan time, before its toolkit is known: %+v", cdiStep.Address, f)
		}
		if !slices.Contains(cdiStep.DependsOn, containers.ToolkitAddress) || cdiStep.After["driver_version"] != "550.54.15" {
			t.Errorf("CDI step %+v", cdiStep)
		}
	}
	if got := p.Steps[3].After["device_nodes"]; got != "/dev/nvidiactl, /dev/nvidia-uvm, /dev/nvidia-uvm-tools, /dev/nvidia0, /dev/nvidia1" {
		t.Errorf("the management step shows nodes %q", got)
	}
}

// The spec names a hook only when the installed toolkit has it (the cited
// table) and the host's files call for it, in nvidia-ctk's order, through
// the executable of the toolkit's release.
func TestCDIHooksByToolkitVersion(t *testing.T) {
	obs := observe(t, root(t, true))
	for _, tc := range []struct {
		toolkit, hookPath string
		want              []string
	}{
		{"1.12.0", "/usr/bin/nvidia-ctk", nil},
		{"1.14.0", "/usr/bin/nvidia-ctk", []string{"nvidia-ctk hook update-ldcache --folder /usr/lib/x86_64-linux-gnu"}},
		{"1.16.2", "/usr/bin/nvidia-cdi-hook", []string{
			"nvidia-cdi-hook create-symlinks --link libcuda.so.1::/usr/lib/x86_64-linux-gnu/libcuda.so",
			"nvidia-cdi-hook update-ldcache --folder /usr/lib/x86_64-linux-gnu",
		}},
		{"1.17.8", "/usr/bin/nvidia-cdi-hook", []string{
			"nvidia-cdi-hook create-symlinks --link libcuda.so.1::/usr/lib/x86_64-linux-gnu/libcuda.so",
			"nvidia-cdi-hook enable-cuda-compat --host-driver-version=550.54.15",
			"nvidia-cdi-hook update-ldcache --folder /usr/lib/x86_64-linux-gnu",
		}},
		{"1.18.0", "/usr/bin/nvidia-cdi-hook", []string{
			"nvidia-cdi-hook create-symlinks --link libcuda.so.1::/usr/lib/x86_64-linux-gnu/libcuda.so",
			"nvidia-cdi-hook enable-cuda-compat --host-driver-version=550.54.15",
			"nvidia-cdi-hook update-ldcache --folder /usr/lib/x86_64-linux-gnu",
			"nvidia-cdi-hook disable-device-node-modification",
		}},
		{"1.20.2", "/usr/bin/nvidia-cdi-hook", []string{
			"nvidia-cdi-hook create-symlinks --link libcuda.so.1::/usr/lib/x86_64-linux-gnu/libcuda.so",
			"nvidia-cdi-hook enable-cuda-compat --host-driver-version=550.54.15",
			"nvidia-cdi-hook update-ldcache --folder /usr/lib/x86_64-linux-gnu",
			"nvidia-cdi-hook disable-device-node-modification",
			"nvidia-cdi-hook update-application-profile",
		}},
	} {
		t.Run(tc.toolkit, func(t *testing.T) {
			c := obs.Containers
			v := version.MustParse(tc.toolkit)
			c.Toolkit = facts.ContainerToolkit{Version: tc.toolkit, HookPath: tc.hookPath, Hooks: compat.ToolkitHooks(v)}
			s, err := cdipkg.GenerateCDI(&c, obs.DeviceNodes, obs.NVML.Devices)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, hk := range s.ContainerEdits.Hooks {
				if hk.HookName != "createContainer" || hk.Path != tc.hookPath {
					t.Errorf("hook %+v", hk)
				}
				got = append(got, strings.Join(hk.Args, " "))
				name := hk.Args[1]
				if name == "hook" {
					name = hk.Args[2]
				}
				if !slices.Contains(compat.ToolkitHooks(v), name) {
					t.Errorf("toolkit %s lacks the hook %q", tc.toolkit, name)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("hooks\n%q\nwant\n%q", got, tc.want)
			}
		})
	}

	// Without libcuda among the driver's files no link is made.
	c := obs.Containers
	c.DriverFiles = slices.DeleteFunc(slices.Clone(c.DriverFiles), func(f string) bool { return strings.Contains(f, "libcuda.so") })
	s, err := cdipkg.GenerateCDI(&c, obs.DeviceNodes, obs.NVML.Devices)
	if err != nil {
		t.Fatal(err)
	}
	for _, hk := range s.ContainerEdits.Hooks {
		if slices.Contains(hk.Args, "create-symlinks") {
			t.Errorf("a link to libcuda without libcuda: %q", hk.Args)
		}
	}
}

// The spec's variables, the runtime's void device request and each GPU's
// CUDA memory limit hook come with the toolkits that added them (the cited
// table): a toolkit without them gets none of them.
func TestCDISpecItemsByToolkitVersion(t *testing.T) {
	obs := observe(t, root(t, true))
	const uuid0 = "GPU-5d5a1ee2-2f2a-4b33-9ac3-5b3e8f1b2c4d"
	memoryHook := "createRuntime /usr/bin/nvidia-cdi-hook nvidia-cdi-hook apply-cuda-memory-limits --driver-root / --gpu-id " + uuid0
	voidMount := `/dev/null -> /var/run/nvidia-container-devices/void ["ro" "nosuid" "nodev" "bind"]`
	for _, tc := range []struct {
		toolkit   string
		env       []string
		device0   []string
		voidMount bool
	}{
		{"", []string{"NVIDIA_VISIBLE_DEVICES=void"}, nil, false},
		{"1.17.8", []string{"NVIDIA_VISIBLE_DEVICES=void"}, nil, false},
		{"1.18.0", []string{"NVIDIA_CTK_LIBCUDA_DIR=/usr/lib/x86_64-linux-gnu", "NVIDIA_VISIBLE_DEVICES=void"}, nil, false},
		{"1.20.1", []string{"NVIDIA_CTK_LIBCUDA_DIR=/usr/lib/x86_64-linux-gnu", "NVIDIA_VISIBLE_DEVICES=void"}, []string{memoryHook}, false},
		{"1.20.2", []string{"NVIDIA_CTK_LIBCUDA_DIR=/usr/lib/x86_64-linux-gnu", "NVIDIA_VISIBLE_DEVICES=void"}, []string{memoryHook}, true},
	} {
		name := tc.toolkit
		if name == "" {
			name = "none"
		}
		t.Run(name, func(t *testing.T) {
			c := obs.Containers
			c.Toolkit = facts.ContainerToolkit{}
			if tc.toolkit != "" {
				c.Toolkit = facts.ContainerToolkit{Version: tc.toolkit, HookPath: containers.CDIHookPath, Hooks: compat.ToolkitHooks(version.MustParse(tc.toolkit))}
			}
			s, err := cdipkg.GenerateCDI(&c, obs.DeviceNodes, obs.NVML.Devices)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(s.ContainerEdits.Env, tc.env) {
				t.Errorf("env %q, want %q", s.ContainerEdits.Env, tc.env)
			}
			var mounts []string
			for _, m := range s.ContainerEdits.Mounts {
				mounts = append(mounts, fmt.Sprintf("%s -> %s %q", m.HostPath, m.ContainerPath, m.Options))
			}
			if slices.Contains(mounts, voidMount) != tc.voidMount {
				t.Errorf("the void device request is mounted: %v, want %v", !tc.voidMount, tc.voidMount)
			}
			hooks := map[string][]string{}
			for _, d := range s.Devices {
				for _, hk := range d.ContainerEdits.Hooks {
					hooks[d.Name] = append(hooks[d.Name], hk.HookName+" "+hk.Path+" "+strings.Join(hk.Args, " "))
				}
			}
			// GPU 0 by index and by UUID, and all, which holds each GPU's.
			for _, name := range []string{"0", uuid0} {
				if !slices.Equal(hooks[name], tc.device0) {
					t.Errorf("device %s hooks %q, want %q", name, hooks[name], tc.device0)
				}
			}
			if got := len(hooks["all"]); got != 2*len(tc.device0) || tc.device0 != nil && hooks["all"][0] != tc.device0[0] {
				t.Errorf("device all hooks %q, want GPU 0's and GPU 1's", hooks["all"])
			}
		})
	}
}

// absent = true takes the runtime out of every engine that names it
// before the toolkit's packages go, restoring runc as the default and
// keeping every other setting.
func TestAbsentRemovesEngineEntries(t *testing.T) {
	dir := root(t, true, "all-configured")
	s := plantest.LoadSpec(t, "container_toolkit {\n  absent = true\n}\n")
	pl := newPlanner()
	p := plantest.Plan(t, pl, s, observe(t, dir))
	want := []string{
		"container_toolkit.engine.containerd delete",
		"container_toolkit.engine.crio delete",
		"container_toolkit.engine.docker delete",
		"container_toolkit delete",
	}
	if got := addresses(p); !slices.Equal(got, want) {
		t.Fatalf("steps %q, want %q", got, want)
	}
	if deps := p.Steps[3].DependsOn; len(deps) != 3 {
		t.Errorf("the packages go before the engines stop naming the runtime: %q", deps)
	}
	checkGolden(t, "absent", p)

	for _, st := range p.Steps {
		for _, op := range st.Operations {
			if f := op.File; f != nil && f.Remove {
				if err := os.Remove(filepath.Join(dir, f.Path)); err != nil {
					t.Fatal(err)
				}
			} else if f != nil {
				hosttest.WriteFile(t, dir, f.Path, f.Content)
			}
		}
	}
	obs := observe(t, dir)
	for _, e := range obs.Containers.Engines {
		if e.NVIDIARuntime || e.DefaultRuntime == "nvidia" {
			t.Errorf("%s still names the runtime: %+v", e.Path, e)
		}
	}
	for file, keep := range map[string]string{"/etc/docker/daemon.json": `"log-driver": "json-file"`, "/etc/containerd/config.toml": "snapshotter = 'overlayfs'"} {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil || !strings.Contains(string(b), keep) {
			t.Errorf("%s lost %s: %v\n%s", file, keep, err, b)
		}
	}
	// What is left is the packages' removal.
	if got := addresses(plantest.Plan(t, pl, s, observe(t, dir))); !slices.Equal(got, []string{"container_toolkit delete"}) {
		t.Errorf("steps after the engines changed: %q", got)
	}
}

// Without a GPU the driver lists, no spec can be made, now or at apply:
// the plan says so instead of a step that would fail.
func TestCDINotPlannedWithoutGPU(t *testing.T) {
	dir := root(t, false)
	if err := os.RemoveAll(filepath.Join(dir, "proc/driver/nvidia/gpus")); err != nil {
		t.Fatal(err)
	}
	s := plantest.LoadSpec(t, repo+"container_toolkit {\n  version = \"1.17.*\"\n  engines = [\"podman\"]\n}\n")
	pl := planner.New(containers.Kind.Provider())
	pl.Candidates = plantest.Candidates{}
	p := plantest.Plan(t, pl, s, observe(t, dir))
	if got, want := addresses(p), []string{"index.apt update", "container_toolkit create", "container_toolkit.dev_char create"}; !slices.Equal(got, want) {
		t.Errorf("steps %q, want %q", got, want)
	}
	if !slices.ContainsFunc(p.Warnings, func(w finding.Finding) bool { return w.ID == containers.CheckCDIUnplanned }) {
		t.Errorf("no warning that the spec cannot be made: %+v", p.Warnings)
	}
}

// A merge into an engine's existing configuration keeps the file's mode,
// owner and group: a containerd config.toml 0600 holding a registry's
// password stays 0600, and a daemon.json 0600 of another user stays that
// user's, for a merge and for taking the runtime out again. A new file is
// 0644 and root's.
func TestMergeKeepsModeAndOwner(t *testing.T) {
	dir := root(t, true)
	owner := func(p string, uid, gid int) {
		t.Helper()
		if os.Geteuid() == 0 {
			if err := os.Chown(filepath.Join(dir, p), uid, gid); err != nil {
				t.Fatal(err)
			}
		}
	}
	hosttest.WriteFile(t, dir, "/etc/containerd/config.toml", "version = 2\n\n[plugins.\"io.containerd.grpc.v1.cri\".registry.configs.\"registry.example\".auth]\n  username = \"ci\"\n  password = \"s3cret\"\n")
	if err := os.Chmod(filepath.Join(dir, "etc/containerd/config.toml"), 0o600); err != nil {
		t.Fatal(err)
	}
	hosttest.WriteFile(t, dir, "/etc/docker/daemon.json", "{\"log-driver\": \"json-file\"}\n")
	if err := os.Chmod(filepath.Join(dir, "etc/docker/daemon.json"), 0o640); err != nil {
		t.Fatal(err)
	}
	owner("/etc/docker/daemon.json", 1000, 1001)
	wantUID, wantGID := 1000, 1001
	if os.Geteuid() != 0 {
		wantUID, wantGID = os.Geteuid(), os.Getegid()
	}
	want := map[string][3]int{
		"/etc/containerd/config.toml": {0o600, os.Geteuid(), os.Getegid()},
		"/etc/docker/daemon.json":     {0o640, wantUID, wantGID},
		containers.CRIODropIn:         {0o644, 0, 0},
	}
	check := func(p *plan.Plan, what string) {
		t.Helper()
		n := 0
		for _, st := range p.Steps {
			for _, op := range st.Operations {
				f := op.File
				if f == nil || f.Remove || !strings.HasPrefix(st.Address, "container_toolkit.engine.") {
					continue
				}
				n++
				w, ok := want[f.Path]
				if !ok {
					t.Errorf("%s: unexpected write of %s", what, f.Path)
					continue
				}
				if got := [3]int{int(f.Mode), f.UID, f.GID}; got != w {
					t.Errorf("%s: %s written with mode %04o owner %d:%d, want mode %04o owner %d:%d", what, f.Path, got[0], got[1], got[2], w[0], w[1], w[2])
				}
			}
		}
		if n == 0 {
			t.Errorf("%s: no engine configuration written", what)
		}
	}

	pl := newPlanner()
	obs := observe(t, dir)
	for _, e := range obs.Containers.Engines {
		if w, ok := want[e.Path]; ok && e.Exists && (int(e.Mode) != w[0] || e.UID != w[1] || e.GID != w[2]) {
			t.Errorf("observed %s with mode %04o owner %d:%d, want %04o %d:%d", e.Path, e.Mode, e.UID, e.GID, w[0], w[1], w[2])
		}
	}
	merge := plantest.Plan(t, pl, plantest.LoadSpec(t, "container_toolkit {\n  engines = [\"docker\", \"containerd\", \"crio\"]\n}\n"), obs)
	check(merge, "merge")
	if err := merge.Validate(); err != nil {
		t.Errorf("the plan keeping the files' owners is not valid: %v", err)
	}

	// The files as the merge left them, mode and owner untouched.
	for _, st := range merge.Steps {
		for _, op := range st.Operations {
			if f := op.File; f != nil && strings.HasPrefix(st.Address, "container_toolkit.engine.") {
				p := filepath.Join(dir, f.Path)
				fi, err := os.Stat(p)
				if err != nil {
					hosttest.WriteFile(t, dir, f.Path, f.Content)
					continue
				}
				if err := os.WriteFile(p, []byte(f.Content), fi.Mode()); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	delete(want, containers.CRIODropIn)
	check(plantest.Plan(t, pl, plantest.LoadSpec(t, "container_toolkit {\n  absent = true\n}\n"), observe(t, dir)), "absent")
}
