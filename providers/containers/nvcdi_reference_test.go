package containers_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/NVIDIA/nvidia-container-toolkit/pkg/nvcdi"
	"github.com/NVIDIA/nvidia-container-toolkit/pkg/nvcdi/transform"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpuenv/gpuenv/planner/compat"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/containers"
	"github.com/gpuenv/gpuenv/providers/host/cdi"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
	"github.com/gpuenv/gpuenv/spec/version"
)

// fixtureGPUs are the GPUs of the containers-host fixture as NVML would
// list them on that machine: index order, the UUIDs and bus addresses of
// its /proc/driver/nvidia/gpus files, minor numbers 0 and 1.
var fixtureGPUs = []struct{ uuid, busID string }{
	{"GPU-5d5a1ee2-2f2a-4b33-9ac3-5b3e8f1b2c4d", "0000:18:00.0"},
	{"GPU-0f6c3a1e-8e7b-4d2f-a4c1-2b9d7e6f5a30", "0000:3b:00.0"},
}

// allowedDifference is an item of one spec the other lacks, and why that
// is right. Every allowance that applies must be used, so that one the
// generators have outgrown fails the test instead of hiding a difference
// later.
type allowedDifference struct {
	// onlyIn is the spec that has the item: "nvcdi" or "gpuenv".
	onlyIn string
	// match is the start of the item (see specItems for their form).
	match  string
	reason string
	// since, for an item of later toolkits than the installed, is the
	// first toolkit that has it: the allowance applies only while the
	// installed toolkit is older. hook is the item's hook, if it is one.
	since, hook string
}

// allowedDifferences are the differences between gpuenv's spec of the
// fixture and nvcdi's of v1.20.2, which names what later toolkits have,
// for every installed toolkit; applies picks those of one.
func allowedDifferences() []allowedDifference {
	out := []allowedDifference{
		{"nvcdi", "common hook createContainer /usr/bin/nvidia-cdi-hook nvidia-cdi-hook disable-device-node-modification",
			"the hook came with toolkit 1.18.0 (its CHANGELOG, v1.18.0-rc.1); gpuenv names only hooks the installed toolkit has",
			"1.18.0", "disable-device-node-modification"},
		{"nvcdi", "common hook createContainer /usr/bin/nvidia-cdi-hook nvidia-cdi-hook update-application-profile",
			"the hook came with toolkit 1.20.0 (its CHANGELOG, v1.20.0); gpuenv names only hooks the installed toolkit has",
			"1.20.0", "update-application-profile"},
		{"nvcdi", "common env NVIDIA_CTK_LIBCUDA_DIR=",
			"toolkit 1.18.0 added the variable (its CHANGELOG, v1.18.0-rc.1); gpuenv's spec has it from that toolkit on",
			"1.18.0", ""},
		{"nvcdi", "common mount /var/run/nvidia-container-devices/void <- /dev/null",
			"toolkit 1.20.2 added it for its runtime's device requests by volume mount (its CHANGELOG, v1.20.2); the NVIDIA_VISIBLE_DEVICES=void both specs set keeps older runtimes from injecting devices again",
			"1.20.2", ""},
		{"gpuenv", "common mount /usr/lib/x86_64-linux-gnu/libcuda.so.1 ",
			"gpuenv mounts the driver's SONAME links as dpkg lists them, so that a spec without hooks (no toolkit installed: podman) still gives programs the name they open; nvcdi leaves them to the ldconfig of its update-ldcache hook", "", ""},
		{"gpuenv", "common mount /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1 ",
			"as libcuda.so.1: the SONAME link nvcdi leaves to update-ldcache", "", ""},
		{"nvcdi", "common hook createContainer /usr/bin/nvidia-cdi-hook nvidia-cdi-hook create-symlinks --link libcuda.so.550.54.15::/usr/lib/x86_64-linux-gnu/libcuda.so.1",
			"nvcdi links the SONAME to the library in the container; gpuenv mounts the host's SONAME link (the mount gpuenv alone has), which works without hooks", "", ""},
		{"nvcdi", "common hook createContainer /usr/bin/nvidia-cdi-hook nvidia-cdi-hook create-symlinks --link libnvidia-ml.so.550.54.15::/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
			"as libcuda.so.1's link", "", ""},
	}

	// The CUDA memory limit hook is per device.
	for i, g := range fixtureGPUs {
		for _, name := range []string{fmt.Sprint(i), g.uuid, "all"} {
			out = append(out, allowedDifference{"nvcdi",
				"device " + name + " hook createRuntime /usr/bin/nvidia-cdi-hook nvidia-cdi-hook apply-cuda-memory-limits --driver-root <root> --gpu-id " + g.uuid,
				"the hook came with toolkit 1.20.1 (its CHANGELOG, v1.20.1); gpuenv names only hooks the installed toolkit has",
				"1.20.1", "apply-cuda-memory-limits"})
		}
	}
	return out
}

// applies are the allowances for installed toolkit tk: those of items
// not of a later toolkit.
func applies(all []allowedDifference, tk version.Version) []allowedDifference {
	return slices.DeleteFunc(slices.Clone(all), func(a allowedDifference) bool {
		return a.since != "" && tk.Compare(version.MustParse(a.since)) >= 0
	})
}

// The spec gpuenv generates from the driver's files agrees with the one
// NVIDIA's own generator (nvcdi, as nvidia-ctk cdi generate runs it)
// makes of the same root: the same device names, the same device nodes
// for each device and for all, the same driver files at the same container
// paths with the same options, and the same hooks in the same order, but
// for the differences allowedDifferences lists with their reasons. With
// toolkit 1.17.8 installed gpuenv leaves out what later toolkits added;
// with 1.20.2, nvcdi's own release, it has all of it. The hooks'
// environment (NVIDIA_CTK_DEBUG=false, the default) is not compared; nor
// are the device numbers nvcdi records, which runtimes read from the
// nodes themselves.
func TestCDISpecAgreesWithNVCDI(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("nvcdi takes only character devices as device nodes, and the fixture's are character devices only when mknod can make them, as root")
	}
	for _, installed := range []string{"1.17.8", "1.20.2"} {
		t.Run(installed, func(t *testing.T) { testAgreesWithNVCDI(t, installed) })
	}
}

func testAgreesWithNVCDI(t *testing.T, installed string) {
	dir := root(t, true)
	if installed != "1.17.8" {
		status := filepath.Join(dir, "var/lib/dpkg/status")
		data, err := os.ReadFile(status)
		if err != nil {
			t.Fatal(err)
		}
		data = []byte(strings.ReplaceAll(string(data), "Version: 1.17.8-1\n", "Version: "+installed+"-1\n"))
		if err := os.WriteFile(status, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// nvcdi reads the libraries' SONAMEs to link them: the fixture's
	// empty files become real shared objects with the SONAMEs of the
	// driver's.
	for _, lib := range []string{"libcuda.so", "libnvidia-ml.so", "libnvidia-ptxjitcompiler.so"} {
		hosttest.BuildELF(t, filepath.Join(dir, "usr/lib/x86_64-linux-gnu", lib+".550.54.15"), lib+".1", nil)
	}
	obs := observe(t, dir)
	if obs.Containers.Toolkit.Version != installed {
		t.Fatalf("the fixture's toolkit is %q, not %s", obs.Containers.Toolkit.Version, installed)
	}
	ours, err := cdi.GenerateCDI(&obs.Containers, obs.DeviceNodes, obs.NVML.Devices)
	if err != nil {
		t.Fatal(err)
	}
	ref := nvcdiSpec(t, dir, obs.Containers.DriverVersion)

	if ours.Kind != ref.Kind {
		t.Errorf("kind %q, nvcdi %q", ours.Kind, ref.Kind)
	}
	got, want := specItems(t, dir, ours), specItems(t, dir, ref)
	tk := version.MustParse(installed)
	allowed := applies(allowedDifferences(), tk)
	compareItems(t, "spec", got, want, allowed)

	// What later toolkits added is not in gpuenv's spec, under any name:
	// an older toolkit's programs would not run its hooks.
	for _, a := range allowed {
		if a.since == "" {
			continue
		}
		for _, it := range got {
			if strings.HasPrefix(it, a.match) || a.hook != "" && strings.Contains(it, " "+a.hook) {
				t.Errorf("toolkit %s: gpuenv's spec has %s, of toolkit %s", tk, it, a.since)
			}
		}
	}

	// What both specs have they have in the same order: the variables
	// and each device's hooks. (nvcdi sorts mounts by path; runtimes do
	// too, so that a mount is not hidden under another.)
	inOurs := func(list []string) []string {
		return slices.DeleteFunc(slices.Clone(list), func(it string) bool { return !slices.Contains(got, it) })
	}
	ourOrder, refOrder := orderedItems(dir, ours), orderedItems(dir, ref)
	for key, theirs := range refOrder {
		if o, r := inOurs(ourOrder[key]), inOurs(theirs); !slices.Equal(o, r) {
			t.Errorf("%s in the order\n%q\nnvcdi's\n%q", key, o, r)
		}
	}

	// A hook nvcdi names and the installed toolkit has is not allowed
	// to be missing: the allowances are for hooks of later toolkits.
	for _, a := range allowed {
		if a.hook != "" && slices.Contains(compat.ToolkitHooks(tk), a.hook) {
			t.Errorf("toolkit %s has the hook %s, which gpuenv leaves out", tk, a.hook)
		}
	}

	// For the installed toolkit and for those that added hooks, gpuenv
	// names the hooks nvcdi names that the toolkit has, with nvcdi's
	// arguments, in nvcdi's order: the loader cache last of those that
	// change the libraries.
	since := map[string]version.Version{}
	for _, a := range allowedDifferences() {
		if a.hook != "" {
			since[a.hook] = version.MustParse(a.since)
		}
	}
	refItems := specItems(t, dir, ref)
	for _, tv := range []string{installed, "1.18.0", "1.20.0", "1.20.1"} {
		v := version.MustParse(tv)
		c := obs.Containers
		c.Toolkit = facts.ContainerToolkit{Version: tv, HookPath: containers.CDIHookPath, Hooks: compat.ToolkitHooks(v)}
		s, err := cdi.GenerateCDI(&c, obs.DeviceNodes, obs.NVML.Devices)
		if err != nil {
			t.Fatal(err)
		}
		want := slices.DeleteFunc(hookNames(ref), func(h string) bool {
			first, later := since[h]
			return later && v.Compare(first) < 0
		})
		if got := hookNames(s); !slices.Equal(got, want) {
			t.Errorf("toolkit %s: hooks %q, nvcdi's that it has %q", tv, got, want)
		}
		for _, it := range specItems(t, dir, s) {
			if strings.Contains(it, " hook ") && !slices.Contains(refItems, it) {
				t.Errorf("toolkit %s: only gpuenv's spec has %s", tv, it)
			}
		}
	}
}

// nvcdiSpec is the spec nvidia-ctk cdi generate would write for the
// fixture root: its nvcdi, with the device names of both its default
// strategies (index and UUID) and the merged all device, with NVML
// answering as the fixture machine's would.
func nvcdiSpec(t *testing.T, dir, driverVersion string) *cdispec.Spec {
	t.Helper()
	nvml := hosttest.NVMLServer("dgxh100")
	if nvml.DriverVersion != driverVersion {
		t.Fatalf("the NVML mock's driver is %s, the fixture's %s", nvml.DriverVersion, driverVersion)
	}
	nvml.Devices = nvml.Devices[:len(fixtureGPUs)]
	for i, g := range fixtureGPUs {
		d := nvml.Devices[i].(*server.Device)
		d.UUID, d.PciBusID, d.Minor = g.uuid, g.busID, i
	}
	var namers []nvcdi.DeviceNamer
	for _, strategy := range []string{nvcdi.DeviceNameStrategyIndex, nvcdi.DeviceNameStrategyUUID} {
		n, err := nvcdi.NewDeviceNamer(strategy)
		if err != nil {
			t.Fatal(err)
		}
		namers = append(namers, n)
	}
	lib, err := nvcdi.New(
		nvcdi.WithLogger(testLogger{t}),
		nvcdi.WithDriverRoot(dir),
		nvcdi.WithNvmlLib(nvml),
		nvcdi.WithMode(nvcdi.ModeNvml),
		nvcdi.WithNVIDIACDIHookPath(containers.CDIHookPath),
		nvcdi.WithDeviceNamers(namers...),
		// nvsandboxutils would be loaded from the machine running the
		// test, not the fixture.
		nvcdi.WithFeatureFlags(nvcdi.FeatureDisableNvsandboxUtils),
		nvcdi.WithMergedDeviceOptions(transform.WithName("all"), transform.WithSkipIfExists(true)),
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

// specItems lists what a spec gives containers, one line an item, with
// host paths as the files they name inside the fixture root (nvcdi's
// carry the root, gpuenv's are the host's; a link resolves to its file,
// so that /lib/… and /usr/lib/… of a merged /usr are one file).
func specItems(t *testing.T, dir string, s *cdispec.Spec) []string {
	t.Helper()
	var out []string
	edits := func(owner string, e *cdispec.ContainerEdits) {
		for _, env := range e.Env {
			out = append(out, owner+" env "+env)
		}
		for _, n := range e.DeviceNodes {
			host := n.HostPath
			if host == "" {
				host = n.Path
			}
			out = append(out, owner+" node "+n.Path+" <- "+hostFile(t, dir, host))
		}
		for _, m := range e.Mounts {
			out = append(out, fmt.Sprintf("%s mount %s <- %s %q", owner, m.ContainerPath, hostFile(t, dir, m.HostPath), m.Options))
		}
		for _, h := range e.Hooks {
			for _, it := range hookItems(dir, h) {
				out = append(out, owner+" hook "+it)
			}
		}
	}
	for i := range s.Devices {
		d := &s.Devices[i]
		out = append(out, "device "+d.Name)
		edits("device "+d.Name, &d.ContainerEdits)
	}
	edits("common", &s.ContainerEdits)
	slices.Sort(out)
	return out
}

// orderedItems are a spec's items (specItems' form) in the spec's order:
// the variables and each device's hooks.
func orderedItems(dir string, s *cdispec.Spec) map[string][]string {
	out := map[string][]string{}
	for _, env := range s.ContainerEdits.Env {
		out["variables"] = append(out["variables"], "common env "+env)
	}
	for i := range s.Devices {
		d := &s.Devices[i]
		key := "device " + d.Name + " hooks"
		out[key] = []string{}
		for _, h := range d.ContainerEdits.Hooks {
			for _, it := range hookItems(dir, h) {
				out[key] = append(out[key], "device "+d.Name+" hook "+it)
			}
		}
	}
	return out
}

// hookItems are a hook's items: the hook with its arguments, or for
// create-symlinks one item a link, since the two specs make some links
// by other means (gpuenv mounts the SONAME links).
func hookItems(dir string, h *cdispec.Hook) []string {
	head := h.HookName + " " + h.Path
	args := h.Args
	if len(args) > 2 && args[1] == "create-symlinks" {
		var out []string
		for i := 2; i+1 < len(args); i += 2 {
			out = append(out, head+" "+strings.Join(args[:2], " ")+" "+args[i]+" "+args[i+1])
		}
		return out
	}
	// gpuenv's driver root is the host's root, /, which in the fixture
	// is the fixture's root, nvcdi's.
	args = slices.Clone(args)
	for i := 1; i < len(args); i++ {
		if args[i-1] == "--driver-root" && (args[i] == "/" || args[i] == dir) {
			args[i] = "<root>"
		}
	}
	return []string{head + " " + strings.ReplaceAll(strings.Join(args, " "), dir, "<root>")}
}

// hookNames are the hooks a spec runs for every container, in order.
func hookNames(s *cdispec.Spec) []string {
	var out []string
	for _, h := range s.ContainerEdits.Hooks {
		if len(h.Args) > 1 {
			out = append(out, h.Args[1])
		}
	}
	return out
}

// hostFile is the file a host path names in the fixture root, relative to
// the root; paths outside the root (/dev/null) are kept as they are.
func hostFile(t *testing.T, dir, p string) string {
	t.Helper()
	inRoot := strings.HasPrefix(p, dir+"/")
	if !inRoot {
		if _, err := os.Lstat(filepath.Join(dir, p)); err != nil {
			return p
		}
		p = filepath.Join(dir, p)
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatalf("a spec names %s: %v", p, err)
	}
	rel, err := filepath.Rel(dir, real)
	if err != nil || strings.HasPrefix(rel, "..") {
		t.Fatalf("%s leaves the fixture root", p)
	}
	return "/" + rel
}

// testLogger sends nvcdi's log to the test's, where a failing test shows it.
type testLogger struct{ t *testing.T }

func (l testLogger) Debugf(string, ...any)       {}
func (l testLogger) Tracef(string, ...any)       {}
func (l testLogger) Infof(f string, a ...any)    { l.t.Logf("nvcdi: "+f, a...) }
func (l testLogger) Warningf(f string, a ...any) { l.t.Logf("nvcdi warning: "+f, a...) }
func (l testLogger) Errorf(f string, a ...any)   { l.t.Logf("nvcdi error: "+f, a...) }

// compareItems holds gpuenv's items (specItems' form) to nvcdi's for a
// spec of what kind names: an item only one side has must be an allowed
// difference of that side, and every allowed difference must still
// occur.
func compareItems(t *testing.T, kind string, got, want []string, allowed []allowedDifference) {
	t.Helper()
	used := make([]bool, len(allowed))
	check := func(items, other []string, side string) {
		for _, it := range items {
			if slices.Contains(other, it) {
				continue
			}
			i := slices.IndexFunc(allowed, func(a allowedDifference) bool {
				return a.onlyIn == side && strings.HasPrefix(it, a.match)
			})
			if i < 0 {
				t.Errorf("only %s's %s has %s", side, kind, it)
				continue
			}
			used[i] = true
		}
	}
	check(got, want, "gpuenv")
	check(want, got, "nvcdi")
	for i, a := range allowed {
		if !used[i] {
			t.Errorf("the allowed difference %q (only in %s: %s) no longer occurs: remove it", a.match, a.onlyIn, a.reason)
		}
	}
}
