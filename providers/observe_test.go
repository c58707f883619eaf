package providers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/planner/doctor"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

var update = flag.Bool("update", false, "rewrite the golden observation documents")

// fixtures are the machines of testdata/roots with a golden observation
// each; "+dgxh100" observes the fixture with go-nvml's DGX H100 mock as its
// NVML.
var fixtures = []string{
	"ubuntu2204-h100-fresh",
	"ubuntu2204-working",
	"ubuntu2204-working+dgxh100",
	"ubuntu2204-mismatch",
	"debian12-distro",
	"rhel9",
	"tensorflow-no-cudnn",
	"nouveau",
	"ubuntu2204-container",
}

// pythons are the interpreters a spec for the fixture would name: the
// virtual environments its frameworks live in.
var pythons = map[string][]string{
	"ubuntu2204-working":  {"/opt/venv/bin/python"},
	"ubuntu2204-mismatch": {"/opt/venv/bin/python"},
	"tensorflow-no-cudnn": {"/opt/tf/bin/python"},
}

func observeFixture(tb testing.TB, name string) (*facts.Observation, string) {
	tb.Helper()
	fixture, mock, _ := strings.Cut(name, "+")
	root := hosttest.Build(tb, fixture)
	h := hosttest.New(tb, root)
	opts := providers.ObserveOptions{Pythons: pythons[fixture]}
	if mock != "" {
		opts.NVML = host.NewNVML(hosttest.NVMLServer(mock))
	}
	return providers.Observe(context.Background(), h, opts), root
}

// golden encodes obs as observe --json does, with the fixture's temporary
// root written as $ROOT.
func golden(tb testing.TB, obs *facts.Observation, root string) []byte {
	tb.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(obs); err != nil {
		tb.Fatal(err)
	}
	return bytes.ReplaceAll(buf.Bytes(), []byte(root), []byte("$ROOT"))
}

func TestGoldenObservations(t *testing.T) {
	for _, name := range fixtures {
		t.Run(name, func(t *testing.T) {
			obs, root := observeFixture(t, name)
			file := filepath.Join("testdata", "golden", name+".json")
			if *update {
				if os.Geteuid() != 0 {
					t.Fatal("regenerate as root: device nodes and owners are only real then")
				}
				if err := os.WriteFile(file, golden(t, obs, root), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (run go test -update as root)", err)
			}
			if os.Geteuid() != 0 {
				// Without root the fixture's device nodes are plain files
				// with the test's owner; compare everything else.
				var w facts.Observation
				if err := json.Unmarshal(want, &w); err != nil {
					t.Fatal(err)
				}
				obs.DeviceNodes = w.DeviceNodes
			}
			if diff := cmp.Diff(string(want), string(golden(t, obs, root))); diff != "" {
				t.Errorf("observation of %s differs from %s (-want +got):\n%s", name, file, diff)
			}
		})
	}
}

// TestObservationJSON: the document round-trips and carries the names
// consumers rely on.
func TestObservationJSON(t *testing.T) {
	obs, _ := observeFixture(t, "ubuntu2204-working+dgxh100")
	data, err := json.Marshal(obs)
	if err != nil {
		t.Fatal(err)
	}
	var back facts.Observation
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(obs, &back); diff != "" {
		t.Errorf("round trip (-before +after):\n%s", diff)
	}
	for _, key := range []string{`"schema_version":1`, `"pci_gpus":[`, `"nvml":{"status":"ok"`, `"cuda_driver_version":"12.4"`, `"module_flavor":"open"`, `"problems":[]`} {
		if !bytes.Contains(data, []byte(key)) {
			t.Errorf("document lacks %s", key)
		}
	}
}

// TestGroupsNameDeviceNodes: device nodes get their group's name from
// /etc/group as the groups observer read it.
func TestGroupsNameDeviceNodes(t *testing.T) {
	obs, _ := observeFixture(t, "debian12-distro")
	if len(obs.Groups) == 0 {
		t.Skip("the fixture's software layer has no /etc/group yet")
	}
	if os.Geteuid() != 0 {
		t.Skip("device node owners are only set when the fixture is built as root")
	}
	for _, n := range obs.DeviceNodes {
		if n.GID == 44 && n.Group != "video" {
			t.Errorf("%s: gid 44 named %q, want video", n.Path, n.Group)
		}
	}
}

// BenchmarkObserve measures a full observation of the working DGX fixture,
// its full-size dpkg database included. Besides wall time it reports the
// process's CPU time per observation (cpu-ns/op), which a machine shared
// with other work does not inflate.
func BenchmarkObserve(b *testing.B) {
	opts := providers.ObserveOptions{Pythons: pythons["ubuntu2204-working"]}
	hosttest.Benchmark(b, hosttest.Fixture(b, "ubuntu2204-working"), func(h *host.Host) {
		providers.Observe(context.Background(), h, opts)
	})
}

// BenchmarkDoctor is doctor's work on the same fixture: the observation
// and the checks that judge it, kernel log included, to set beside
// BenchmarkObserve.
func BenchmarkDoctor(b *testing.B) {
	opts := providers.ObserveOptions{Pythons: pythons["ubuntu2204-working"]}
	hosttest.Benchmark(b, hosttest.Fixture(b, "ubuntu2204-working"), func(h *host.Host) {
		r := doctor.Run(doctor.Input{Obs: providers.Observe(context.Background(), h, opts)})
		if !r.Healthy {
			b.Fatal("the working fixture is not healthy")
		}
	})
}

// BenchmarkObserveLive observes this machine (root "/"), NVML included.
func BenchmarkObserveLive(b *testing.B) {
	hosttest.Benchmark(b, hosttest.New(b, "/"), func(h *host.Host) {
		providers.Observe(context.Background(), h, providers.ObserveOptions{})
	})
}

// recorder records the commands an observation runs.
type recorder struct{ argv [][]string }

func (r *recorder) Run(_ context.Context, c host.Command) error {
	r.argv = append(r.argv, c.Argv)
	return nil
}

// TestDebianFamilyStartsNoProcess: on a Debian-family host everything is
// read from files; only the RPM database needs rpm.
func TestDebianFamilyStartsNoProcess(t *testing.T) {
	for _, fixture := range []string{"ubuntu2204-working", "ubuntu2204-h100-fresh", "debian12-distro", "nouveau"} {
		rec := &recorder{}
		h := hosttest.Fixture(t, fixture, host.WithRunner(rec))
		obs := providers.Observe(context.Background(), h, providers.ObserveOptions{Pythons: pythons[fixture]})
		if obs.OS.Family != "deb" || len(rec.argv) != 0 {
			t.Errorf("%s: family %q, ran %q", fixture, obs.OS.Family, rec.argv)
		}
	}
}

// observeStatuses observes the working DGX with the dpkg status of some of
// its packages changed, as an interrupted dpkg run leaves them.
func observeStatuses(t *testing.T, status map[string]string) *facts.Observation {
	t.Helper()
	root := hosttest.Build(t, "ubuntu2204-working")
	file := filepath.Join(root, "var/lib/dpkg/status")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for name, st := range status {
		old := "Package: " + name + "\nStatus: install ok installed\n"
		if !bytes.Contains(data, []byte(old)) {
			t.Fatalf("the fixture's status database changed; this test needs %s installed", name)
		}
		data = bytes.Replace(data, []byte(old), []byte("Package: "+name+"\nStatus: "+st+"\n"), 1)
	}
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	h, _ := host.New(root)
	return providers.Observe(context.Background(), h, providers.ObserveOptions{})
}

// problemLines are the observation's problems as observe prints them
// under "Other problems": "layer: message".
func problemLines(obs *facts.Observation) []string {
	var out []string
	for _, p := range obs.Problems {
		out = append(out, p.Layer+": "+p.Message())
	}
	return out
}

// TestUnfinishedUpgrade: a package dpkg left half-configured, unpacked or
// with triggers pending is a problem of the packages layer, which dpkg
// --configure -a mends.
func TestUnfinishedUpgrade(t *testing.T) {
	obs := observeStatuses(t, map[string]string{"nvidia-dkms-550-open": "install ok half-configured"})
	want := []string{"packages: an install or upgrade did not finish: nvidia-dkms-550-open (half-configured) — run dpkg --configure -a"}
	if diff := cmp.Diff(want, problemLines(obs)); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	obs = observeStatuses(t, map[string]string{"nvidia-dkms-550-open": "install ok unpacked", "libnvidia-compute-550": "install ok triggers-pending"})
	want = []string{"packages: an install or upgrade did not finish: libnvidia-compute-550 (triggers-pending), nvidia-dkms-550-open (unpacked) — run dpkg --configure -a"}
	if diff := cmp.Diff(want, problemLines(obs)); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

// TestUnfinishedUnpack: a package whose unpack was cut short (dpkg's
// reinstreq flag, state half-installed) is passed over by dpkg
// --configure -a; the problem says what does mend it, apart from the
// packages that command does finish.
func TestUnfinishedUnpack(t *testing.T) {
	obs := observeStatuses(t, map[string]string{
		"nvidia-dkms-550-open":  "install reinstreq half-installed",
		"libnvidia-compute-550": "install ok half-configured",
	})
	want := []string{
		"packages: an install or upgrade stopped while unpacking, and dpkg --configure -a does not mend it: nvidia-dkms-550-open (half-installed, reinstall required)" +
			" — if a gpuenv apply or rollback was cut short (gpuenv history shows it running or failed), run gpuenv rollback;" +
			" otherwise reinstall them (apt-get install --reinstall nvidia-dkms-550-open, or dpkg -i of their .deb files)," +
			" or remove those that should not be installed (dpkg --remove --force-remove-reinstreq nvidia-dkms-550-open)",
		"packages: an install or upgrade did not finish: libnvidia-compute-550 (half-configured) — run dpkg --configure -a",
	}
	if diff := cmp.Diff(want, problemLines(obs)); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}
