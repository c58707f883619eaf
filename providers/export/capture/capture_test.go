package capture_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/tools/txtar"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers"
	"github.com/gpuenv/gpuenv/providers/containers"
	"github.com/gpuenv/gpuenv/providers/export/capture"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/cdi"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
	"github.com/gpuenv/gpuenv/spec"
)

var update = flag.Bool("update", false, "rewrite the golden specs in testdata")

// fixtures are the machines captured, with the interpreters observed
// besides the system's.
var fixtures = []struct {
	name    string
	pythons []string
	// sources, when set, is the root's /etc/apt/sources.list: the
	// fixture has none, and a Debian host without the non-free component
	// it installed the driver from would make the planner add it.
	sources string
}{
	{name: "ubuntu2204-working", pythons: []string{"/opt/venv/bin/python"}},
	{name: "ubuntu2204-cuda-lists"},
	{name: "rhel9-dnf"},
	{name: "debian12-distro", sources: "deb http://deb.debian.org/debian bookworm main contrib non-free non-free-firmware\n"},
	{name: "tensorflow-no-cudnn", pythons: []string{"/opt/tf/bin/python"}},
	{name: "ubuntu2204-misconfigured", pythons: []string{"/opt/venv/bin/python"}},
	{name: "rhel9"},
	{name: "nouveau"},
}

func observe(t *testing.T, name string, pythons []string, sources string) (*host.Host, *facts.Observation) {
	t.Helper()
	root := hosttest.Build(t, name)
	if sources != "" {
		hosttest.WriteFile(t, root, "etc/apt/sources.list", sources)
	}
	h := hosttest.New(t, root)
	return h, providers.Observe(context.Background(), h, providers.ObserveOptions{Pythons: pythons})
}

// TestRoundTrip is init's contract: the captured spec loads, is formatted
// as gpuenv fmt writes it, and planning it against the same host finds
// nothing to do.
func TestRoundTrip(t *testing.T) {
	for _, fx := range fixtures {
		t.Run(fx.name, func(t *testing.T) {
			_, obs := observe(t, fx.name, fx.pythons, fx.sources)
			src := capture.Spec(obs)

			formatted, diags := spec.Format(src, "gpuenv.hcl")
			if diags.HasErrors() {
				t.Fatalf("format: %s\n%s", diags.Error(), src)
			}
			if d := cmp.Diff(string(formatted), string(src)); d != "" {
				t.Errorf("not fmt-stable (-formatted +captured):\n%s", d)
			}

			file := filepath.Join(t.TempDir(), "gpuenv.hcl")
			if err := os.WriteFile(file, src, 0o644); err != nil {
				t.Fatal(err)
			}
			s, diags := spec.Load(file, spec.LoadOptions{})
			if len(diags) > 0 {
				t.Fatalf("load: %s\n%s", diags.Error(), src)
			}
			pl := planner.New(providers.Planners()...)
			p, diags := pl.Plan(context.Background(), s, obs)
			if diags.HasErrors() || p == nil {
				t.Fatalf("plan: %s\n%s", diags.Error(), src)
			}
			if !p.Empty() {
				var steps []string
				for _, st := range p.Steps {
					steps = append(steps, st.Address+": "+st.Reason)
				}
				t.Errorf("plan of the captured spec has changes:\n  %s\n%s", strings.Join(steps, "\n  "), src)
			}

			golden := filepath.Join("testdata", fx.name+".hcl")
			if *update {
				if err := os.WriteFile(golden, src, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(string(want), string(src)); d != "" {
				t.Errorf("captured spec differs from %s (-want +got):\n%s", golden, d)
			}
		})
	}
}

// TestRoundTripChangedHost: the captured spec describes the host it was
// taken from, so planning it on a host that differs shows the difference.
func TestRoundTripChangedHost(t *testing.T) {
	_, obs := observe(t, "ubuntu2204-working", []string{"/opt/venv/bin/python"}, "")
	src := capture.Spec(obs)
	file := filepath.Join(t.TempDir(), "gpuenv.hcl")
	if err := os.WriteFile(file, src, 0o644); err != nil {
		t.Fatal(err)
	}
	s, diags := spec.Load(file, spec.LoadOptions{})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	// The same machine without ml in video and render.
	root := hosttest.Build(t, "ubuntu2204-working")
	group, err := os.ReadFile(filepath.Join(root, "etc/group"))
	if err != nil {
		t.Fatal(err)
	}
	group = bytes.ReplaceAll(group, []byte("ubuntu,ml\n"), []byte("ubuntu\n"))
	if err := os.WriteFile(filepath.Join(root, "etc/group"), group, 0o644); err != nil {
		t.Fatal(err)
	}
	h := hosttest.New(t, root)
	changed := providers.Observe(context.Background(), h, providers.ObserveOptions{Pythons: []string{"/opt/venv/bin/python"}})
	p, diags := planner.New(providers.Planners()...).Plan(context.Background(), s, changed)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	var addrs []string
	for _, st := range p.Steps {
		addrs = append(addrs, st.Address)
	}
	if d := cmp.Diff([]string{`group.render`, `group.video`}, sortStrings(addrs)); d != "" {
		t.Errorf("steps (-want +got):\n%s", d)
	}
}

func sortStrings(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// TestSpecComments: what cannot be captured as managed is said in
// comments, not dropped silently and not captured wrongly.
func TestSpecComments(t *testing.T) {
	obs := &facts.Observation{
		Driver:   facts.Driver{ModuleVersion: "550.90.07", ModuleFlavor: "open"},
		Packages: facts.Packages{Manager: "dpkg", Total: 700},
		CUDA:     facts.CUDA{Toolkits: []facts.Toolkit{{Path: "/usr/local/cuda-12.4", Version: "12.4.1", Layout: "nvidia"}}, Default: "/usr/local/cuda-12.4"},
		Python: []facts.PythonEnv{{Interpreter: "/usr/bin/python3", Prefix: "/usr", System: true,
			Frameworks: []facts.Framework{{Name: "pytorch", Version: "2.5.1+cu124", Variant: "cu124", CUDA: "12.4", Installer: "pip"}}}},
		Environment: facts.Environment{
			Variables: []facts.Assignment{
				{Name: "CUDA_VISIBLE_DEVICES", Value: "0,1", File: "/etc/profile.d/gpuenv.sh", Line: 2},
				{Name: "CUDA_DEVICE_ORDER", Value: "PCI_BUS_ID", File: "/etc/profile.d/gpuenv.sh", Line: 3},
				{Name: "CUDA_VISIBLE_DEVICES", Value: "3", File: "/etc/environment", Line: 1},
			},
			Managed: []string{"/etc/profile.d/gpuenv.sh"},
		},
	}
	got := string(capture.Spec(obs))
	for _, want := range []string{
		"# The driver 550.90.07 is not installed from a package gpuenv manages",
		"# The CUDA 12.4.1 toolkit in /usr/local/cuda-12.4 is not installed from a\n# package gpuenv manages",
		"# pytorch 2.5.1+cu124 in /usr/bin/python3 was installed by pip outside a\n# virtual environment",
		"environment {\n  cuda_visible_devices = [\"0\", \"1\"]\n  cuda_device_order    = \"PCI_BUS_ID\"\n}",
		"#   CUDA_VISIBLE_DEVICES=3 (/etc/environment:1)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("spec lacks %q:\n%s", want, got)
		}
	}
	for _, unwanted := range []string{"driver {", "cuda {", "framework \""} {
		if strings.Contains(got, unwanted) {
			t.Errorf("spec has %q:\n%s", unwanted, got)
		}
	}
}

// TestDriverVersionIsTheRule: init writes the driver version the host runs
// by the doctor's rule (doctor.DriverVersion): NVML's answer before the
// module file's. init used to prefer the module file, so these two
// disagreed on the rare host where NVML and /proc differ.
func TestDriverVersionIsTheRule(t *testing.T) {
	obs := &facts.Observation{
		NVML:     facts.NVML{Status: "ok", DriverVersion: "550.54.15"},
		Driver:   facts.Driver{ModuleVersion: "550.54.14", ModuleVersionFrom: "/proc/driver/nvidia/version", LibraryVersion: "550.54.15"},
		Packages: facts.Packages{Manager: "dpkg", Total: 700, Packages: []facts.Package{{Name: "nvidia-driver-550", Version: "550.54.15-0ubuntu1", State: "installed"}}},
	}
	got := string(capture.Spec(obs))
	if !strings.Contains(got, `version = "550.54.15"`) {
		t.Errorf("spec does not state the driver NVML runs, 550.54.15:\n%s", got)
	}
}

// roundTrip plans the spec captured from obs against obs and fails on
// any change; it returns the spec.
func roundTrip(t *testing.T, obs *facts.Observation) string {
	t.Helper()
	src := capture.Spec(obs)
	file := filepath.Join(t.TempDir(), "gpuenv.hcl")
	if err := os.WriteFile(file, src, 0o644); err != nil {
		t.Fatal(err)
	}
	s, diags := spec.Load(file, spec.LoadOptions{})
	if diags.HasErrors() {
		t.Fatalf("load: %s\n%s", diags.Error(), src)
	}
	p, diags := planner.New(providers.Planners()...).Plan(context.Background(), s, obs)
	if diags.HasErrors() || p == nil {
		t.Fatalf("plan: %s\n%s", diags.Error(), src)
	}
	for _, st := range p.Steps {
		t.Errorf("plan of the captured spec changes %s: %s\n%s", st.Address, st.Reason, src)
	}
	return string(src)
}

// containersHost is the container host with the toolkit 1.17.8 installed
// and every engine configured for the NVIDIA runtime, the default of
// Docker and containerd (testdata of providers/containers).
func containersHost(t *testing.T) string {
	t.Helper()
	root := hosttest.Build(t, "containers-host")
	ar, err := txtar.ParseFile(filepath.Join("..", "..", "containers", "testdata", "variants", "all-configured.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	if err := hosttest.BuildArchive(ar, root, hosttest.TestdataDir(t)); err != nil {
		t.Fatal(err)
	}
	status, err := os.ReadFile(filepath.Join(root, "var/lib/dpkg/status"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container-tools", "libnvidia-container1"} {
		status = append(status, "Package: "+name+"\nStatus: install ok installed\nArchitecture: amd64\nVersion: 1.17.8-1\n\n"...)
	}
	hosttest.WriteFile(t, root, "/var/lib/dpkg/status", string(status))
	for _, b := range []string{"/usr/bin/nvidia-cdi-hook", "/usr/bin/nvidia-ctk", "/usr/bin/nvidia-container-runtime"} {
		hosttest.WriteFile(t, root, b, "")
	}
	return root
}

// TestCaptureContainerToolkit: the toolkit's version, the engines that
// name the NVIDIA runtime and its being their default are captured;
// the CDI spec is, once it is the one gpuenv writes; and the spec plans
// no change on the host.
func TestCaptureContainerToolkit(t *testing.T) {
	root := containersHost(t)
	obs := providers.Observe(context.Background(), hosttest.New(t, root), providers.ObserveOptions{})
	got := roundTrip(t, obs)
	// CRI-O's entry is not its default: default_runtime, which is every
	// engine's or none's, stays unset, and the comment says why.
	for _, want := range []string{
		"container_toolkit {\n  version        = \"1.17.8\"\n  engines        = [\"docker\", \"containerd\", \"crio\"]\n  dev_char_links = false\n}",
		"# The NVIDIA runtime is the default of docker, containerd only;",
		"# The NVIDIA device nodes lack /dev/char links",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("spec lacks %q:\n%s", want, got)
		}
	}
	// With the links and the rule in place, dev_char_links stays on.
	for _, l := range [][2]string{{"195:0", "/dev/nvidia0"}, {"195:1", "/dev/nvidia1"}, {"195:255", "/dev/nvidiactl"}, {"508:0", "/dev/nvidia-uvm"}, {"508:1", "/dev/nvidia-uvm-tools"}} {
		if err := os.MkdirAll(filepath.Join(root, "dev/char"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(l[1], filepath.Join(root, "dev/char", l[0])); err != nil {
			t.Fatal(err)
		}
	}
	hosttest.WriteFile(t, root, containers.DevCharRulePath, containers.DevCharRule)
	obs = providers.Observe(context.Background(), hosttest.New(t, root), providers.ObserveOptions{})
	if got := roundTrip(t, obs); strings.Contains(got, "dev_char_links") {
		t.Errorf("links and rule in place, yet dev_char_links is set:\n%s", got)
	}
	if strings.Contains(got, "cdi") {
		t.Errorf("without a CDI spec, cdi is left unset:\n%s", got)
	}
	// With CRI-O's default the NVIDIA runtime too, default_runtime is set.
	crio, err := os.ReadFile(filepath.Join(root, "etc/crio/crio.conf.d/99-nvidia.toml"))
	if err != nil {
		t.Fatal(err)
	}
	hosttest.WriteFile(t, root, "/etc/crio/crio.conf.d/99-nvidia.toml", "[crio.runtime]\ndefault_runtime = \"nvidia\"\n\n"+string(crio))
	obs = providers.Observe(context.Background(), hosttest.New(t, root), providers.ObserveOptions{})
	if got := roundTrip(t, obs); !strings.Contains(got, "  default_runtime = true\n") {
		t.Errorf("the default of every engine is not captured:\n%s", got)
	}

	// The CDI spec gpuenv writes is kept with cdi = true; one that
	// differs is left alone, and said.
	cs := obs.Containers
	s, err := cdi.GenerateCDI(&cs, obs.DeviceNodes, obs.NVML.Devices)
	if err != nil {
		t.Fatal(err)
	}
	content, err := cdi.MarshalCDI(s)
	if err != nil {
		t.Fatal(err)
	}
	hosttest.WriteFile(t, root, cdi.CDISpecPath, content)
	obs = providers.Observe(context.Background(), hosttest.New(t, root), providers.ObserveOptions{})
	if got := roundTrip(t, obs); !strings.Contains(got, "  cdi             = true\n") || !strings.Contains(got, "  cdi_management  = false\n") || !strings.Contains(got, "There is no CDI management spec") {
		t.Errorf("gpuenv's CDI spec is not captured, or the missing management spec is planned:\n%s", got)
	}
	// With gpuenv's management spec beside it, cdi_management stays on.
	ms, err := cdi.GenerateManagementCDI(&cs, obs.DeviceNodes)
	if err != nil {
		t.Fatal(err)
	}
	mcontent, err := cdi.MarshalCDI(ms)
	if err != nil {
		t.Fatal(err)
	}
	hosttest.WriteFile(t, root, cdi.ManagementSpecPath, mcontent)
	obs = providers.Observe(context.Background(), hosttest.New(t, root), providers.ObserveOptions{})
	if got := roundTrip(t, obs); !strings.Contains(got, "  cdi             = true\n") || strings.Contains(got, "cdi_management") {
		t.Errorf("gpuenv's management spec is not kept:\n%s", got)
	}
	hosttest.WriteFile(t, root, cdi.ManagementSpecPath, mcontent+"# edited by hand\n")
	obs = providers.Observe(context.Background(), hosttest.New(t, root), providers.ObserveOptions{})
	if got := roundTrip(t, obs); !strings.Contains(got, "  cdi_management  = false\n") || !strings.Contains(got, "is not the CDI management spec") {
		t.Errorf("a management spec of another's is captured as gpuenv's:\n%s", got)
	}
	hosttest.WriteFile(t, root, cdi.CDISpecPath, content+"# edited by hand\n")
	obs = providers.Observe(context.Background(), hosttest.New(t, root), providers.ObserveOptions{})
	if got := roundTrip(t, obs); strings.Contains(got, "  cdi ") || !strings.Contains(got, "/etc/cdi/nvidia.yaml is not the CDI spec gpuenv would write") {
		t.Errorf("a CDI spec of another's is captured as gpuenv's:\n%s", got)
	}
}

// TestCaptureDevicesAndPersistence: persistence is stated by the driver
// planner's own rule (NVML first); a compute mode other than the default
// is a device block only where gpuenv's boot-time unit keeps it, else a
// comment that says why not.
func TestCaptureDevicesAndPersistence(t *testing.T) {
	obs := &facts.Observation{
		NVML: facts.NVML{Status: "ok", DriverVersion: "550.54.15", Devices: []facts.GPUDevice{
			{Index: 0, UUID: "GPU-0", PersistenceMode: "enabled", ComputeMode: "exclusive_process"},
			{Index: 1, UUID: "GPU-1", PersistenceMode: "enabled", ComputeMode: "default"},
		}},
		Packages: facts.Packages{Manager: "dpkg", Total: 700, Packages: []facts.Package{{Name: "nvidia-driver-550", Version: "550.54.15-0ubuntu1", State: "installed"}}},
		Units:    []facts.Unit{{Name: "nvidia-persistenced.service"}},
	}
	got := string(capture.Spec(obs))
	if !strings.Contains(got, "  persistence_mode = true\n") {
		t.Errorf("persistence from NVML is not captured:\n%s", got)
	}
	if strings.Contains(got, "\ndevice \"") || !strings.Contains(got, "# GPU 0 in exclusive_process mode, set by hand") {
		t.Errorf("a compute mode set by hand:\n%s", got)
	}
	obs.Units = append(obs.Units, facts.Unit{Name: "gpuenv-compute-mode.service", Enabled: true, File: &facts.FileDigest{Path: "/etc/systemd/system/gpuenv-compute-mode.service"}})
	got = string(capture.Spec(obs))
	if !strings.Contains(got, "device \"0\" {\n  compute_mode = \"exclusive_process\"\n}") || strings.Contains(got, "device \"1\"") {
		t.Errorf("a compute mode gpuenv keeps:\n%s", got)
	}
	obs.NVML.Devices[1].ComputeMode = "exclusive_process"
	if got = string(capture.Spec(obs)); !strings.Contains(got, "device \"all\" {\n  compute_mode = \"exclusive_process\"\n}") {
		t.Errorf("every GPU in one mode:\n%s", got)
	}
}

// TestCaptureOwnRepository: a repository gpuenv configured from a block
// is captured as that block, under its name, and plans no change; the
// Debian archive and the components gpuenv enabled are not captured.
func TestCaptureOwnRepository(t *testing.T) {
	root := hosttest.Build(t, "debian12-lists")
	key, err := os.ReadFile(filepath.Join(hosttest.TestdataDir(t), "keys", "fixture-cuda.gpg"))
	if err != nil {
		t.Fatal(err)
	}
	hosttest.WriteFile(t, root, "/etc/apt/keyrings/mirror.gpg", string(key))
	s := plantestSpec(t, "repository \"mirror\" {\n  url             = \"https://mirror.example/cuda/debian12/x86_64/\"\n  keyring         = \"/etc/apt/keyrings/mirror.gpg\"\n  key_fingerprint = \"7D5AB3C8EA6E6296C742F6104948E0156F695994\"\n  priority        = 600\n}\n")
	obs := providers.Observe(context.Background(), hosttest.New(t, root), providers.ObserveOptions{})
	p, diags := planner.New(providers.Planners()...).Plan(context.Background(), s, obs)
	if diags.HasErrors() || len(p.Steps) != 1 {
		t.Fatalf("plan: %v %v", diags, p)
	}
	for _, op := range p.Steps[0].Operations {
		hosttest.WriteFile(t, root, op.File.Path, op.File.Content)
	}
	// A host source whose file has the same name comes first, and is
	// named around gpuenv's.
	hosttest.WriteFile(t, root, "/etc/apt/sources.list.d/mirror.list", "deb [signed-by=/etc/apt/keyrings/mirror.gpg] https://mirror.example/other/ /\n")
	hosttest.WriteFile(t, root, "/etc/apt/sources.list.d/gpuenv-distro-components.sources", "Types: deb\nURIs: https://deb.debian.org/debian\nSuites: bookworm\nComponents: contrib\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n")
	obs = providers.Observe(context.Background(), hosttest.New(t, root), providers.ObserveOptions{})
	got := roundTrip(t, obs)
	want := "repository \"mirror\" {\n  url             = \"https://mirror.example/cuda/debian12/x86_64/\"\n  keyring         = \"/etc/apt/keyrings/mirror.gpg\"\n  key_fingerprint = \"7D5AB3C8EA6E6296C742F6104948E0156F695994\"\n  priority        = 600\n}"
	if !strings.Contains(got, want) || !strings.Contains(got, "repository \"mirror-2\" {\n  url             = \"https://mirror.example/other/\"") || strings.Count(got, "\nrepository ") != 2 {
		t.Errorf("want exactly\n%s\nin\n%s", want, got)
	}
}

func plantestSpec(t *testing.T, src string) *spec.Spec {
	t.Helper()
	file := filepath.Join(t.TempDir(), "spec.hcl")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	s, diags := spec.Load(file, spec.LoadOptions{})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	return s
}

// TestRoundTripNVML: with NVML (go-nvml's DGX H100 mock) persistence and
// compute modes come from the devices, and the spec still plans no
// change on the host.
func TestRoundTripNVML(t *testing.T) {
	root := hosttest.Build(t, "ubuntu2204-working")
	h := hosttest.New(t, root)
	obs := providers.Observe(context.Background(), h, providers.ObserveOptions{
		Pythons: []string{"/opt/venv/bin/python"},
		NVML:    host.NewNVML(hosttest.NVMLServer("dgxh100")),
	})
	if len(obs.NVML.Devices) == 0 {
		t.Fatalf("the mock reports no device: %+v", obs.NVML)
	}
	got := roundTrip(t, obs)
	on := obs.NVML.Devices[0].PersistenceMode == "enabled"
	if want := fmt.Sprintf("  persistence_mode  = %v\n", on); !strings.Contains(got, want) {
		t.Errorf("spec lacks %q (NVML: %s):\n%s", want, obs.NVML.Devices[0].PersistenceMode, got)
	}
}

// TestCaptureRepositoryComments: a source a repository block cannot
// state as it is becomes a comment with the reason, or a block whose
// comment says what it leaves out; the distribution's archive is not
// captured.
func TestCaptureRepositoryComments(t *testing.T) {
	obs := &facts.Observation{
		OS: facts.OS{ID: "ubuntu", VersionID: "22.04", Family: "deb"},
		Repositories: []facts.Repository{
			{File: "/etc/apt/sources.list", URIs: []string{"http://de.archive.ubuntu.com/ubuntu/"}, Suites: []string{"jammy"}, Components: []string{"main"}},
			{File: "/etc/apt/sources.list.d/a.list", URIs: []string{"https://a.example/"}, Suites: []string{"/"}, Keys: []string{"0123456789ABCDEF0123456789ABCDEF01234567"}},
			{File: "/etc/apt/sources.list.d/b.list", URIs: []string{"cdrom:/media/"}, Suites: []string{"/"}},
			{File: "/etc/apt/sources.list.d/c.list", URIs: []string{"https://c.example/"}, Suites: []string{"/"}, Keys: []string{"/etc/apt/keyrings/c.gpg"}, Options: []string{"trusted=yes"}},
			{File: "/etc/apt/sources.list.d/d.sources", URIs: []string{"https://d.example/", "https://d2.example/"}, Suites: []string{"/"}},
		},
		RepositoryFiles: facts.RepositoryFiles{Keyrings: []facts.FileDigest{{Path: "/etc/apt/keyrings/c.gpg", Fingerprints: []string{"A", "B"}}}},
	}
	got := string(capture.Spec(obs))
	for _, want := range []string{
		"captured: its Signed-By names a key by fingerprint",
		"captured: a repository block cannot state it as it is (the URL\n# \"cdrom:/media/\" must start with https://",
		"# Its options (trusted=yes) are not captured",
		"# Its keyring /etc/apt/keyrings/c.gpg holds 2 keys (A, B); key_fingerprint\n# names one key, so the block names none.",
		"repository \"c\" {\n  url     = \"https://c.example/\"\n  keyring = \"/etc/apt/keyrings/c.gpg\"\n}",
		"d.sources is not captured: it names 2 URLs",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("spec lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "archive.ubuntu.com") {
		t.Errorf("Ubuntu's archive is captured:\n%s", got)
	}
}

// A team file becomes the team block that writes it again, with the
// setting the profile script ends with; one a spec cannot say, or whose
// group the host lacks (plan would refuse it), becomes a comment. The
// captured spec loads.
func TestCaptureTeams(t *testing.T) {
	team := func(group, value string, line int) facts.Assignment {
		return facts.Assignment{Name: "CUDA_VISIBLE_DEVICES", Value: value, File: "/etc/gpuenv/teams/" + group + ".env", Line: line, Group: group}
	}
	obs := &facts.Observation{
		Groups: []facts.Group{{Name: "vision", GID: 1003}, {Name: "infer", GID: 1004}},
		Environment: facts.Environment{Teams: []facts.Assignment{
			team("ghost", "1", 1),
			team("infer", "GPU-xyz", 1),
			team("vision", "9", 1),
			team("vision", "4,MIG-0c4b2a1e-3f3e-5a6d-8b9c-0d1e2f3a4b5c", 2),
		}},
	}
	got := string(capture.Spec(obs))
	text := strings.ReplaceAll(got, "\n# ", " ")
	for _, want := range []string{
		"team \"vision\" {\n  cuda_visible_devices = [\"4\", \"MIG-0c4b2a1e-3f3e-5a6d-8b9c-0d1e2f3a4b5c\"]\n}",
		"The team file /etc/gpuenv/teams/ghost.env:1 sets CUDA_VISIBLE_DEVICES=1, which no team block says",
		"The team file /etc/gpuenv/teams/infer.env:1 sets CUDA_VISIBLE_DEVICES=GPU-xyz, which no team block says",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("spec lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "team \"ghost\"") || strings.Contains(got, "team \"infer\"") {
		t.Errorf("a team block a plan would refuse:\n%s", got)
	}
	p := filepath.Join(t.TempDir(), "gpuenv.hcl")
	if err := os.WriteFile(p, []byte(got), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, diags := spec.Load(p, spec.LoadOptions{}); len(diags) > 0 {
		t.Errorf("the captured spec does not load: %v\n%s", diags, got)
	}
}
