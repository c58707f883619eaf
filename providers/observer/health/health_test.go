package health_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/observer/health"
)

// write puts files into a new root.
func write(t testing.TB, files map[string]string) *host.Host {
	t.Helper()
	root := t.TempDir()
	for p, data := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h, err := host.New(root)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// link lays out a device's link files as the kernel writes them
// (drivers/pci/pci-sysfs.c: "%s\n" of the speed's name, "%u\n" of the
// width).
func link(files map[string]string, addr, cur, max string, curW, maxW string) {
	d := "/sys/bus/pci/devices/" + addr + "/"
	files[d+"current_link_speed"] = cur + "\n"
	files[d+"max_link_speed"] = max + "\n"
	files[d+"current_link_width"] = curW + "\n"
	files[d+"max_link_width"] = maxW + "\n"
}

func TestLinksAndMissing(t *testing.T) {
	files := map[string]string{
		// The driver probed three GPUs; 0000:5d:00.0 is gone from the bus.
		"/proc/driver/nvidia/gpus/0000:18:00.0/information": "",
		"/proc/driver/nvidia/gpus/0000:2a:00.0/information": "",
		"/proc/driver/nvidia/gpus/0000:5d:00.0/information": "",
		"/proc/sys/kernel/random/boot_id":                   "3c9a5a4e-1f1e-4a5e-9d59-7a3d1c2b0f00\n",
	}
	link(files, "0000:18:00.0", "32.0 GT/s PCIe", "32.0 GT/s PCIe", "16", "16")
	// A card not seated fully: x8 of x16.
	link(files, "0000:2a:00.0", "32.0 GT/s PCIe", "32.0 GT/s PCIe", "8", "16")
	h := write(t, files)
	obs := &facts.Observation{PCI: []facts.PCIDevice{{Address: "0000:18:00.0", Model: "H100 SXM5 80GB"}, {Address: "0000:2a:00.0"}}}
	health.Observe(h, obs)
	want := facts.Health{
		GPUs: []facts.GPUHealth{
			{PCIAddress: "0000:18:00.0", Name: "H100 SXM5 80GB", Link: &facts.PCIeLink{CurrentSpeed: "32.0 GT/s PCIe", MaxSpeed: "32.0 GT/s PCIe", CurrentSpeedGTs: 32, MaxSpeedGTs: 32, CurrentWidth: 16, MaxWidth: 16}},
			{PCIAddress: "0000:2a:00.0", Link: &facts.PCIeLink{CurrentSpeed: "32.0 GT/s PCIe", MaxSpeed: "32.0 GT/s PCIe", CurrentSpeedGTs: 32, MaxSpeedGTs: 32, CurrentWidth: 8, MaxWidth: 16}},
		},
		Missing: []string{"0000:5d:00.0"},
		BootID:  "3c9a5a4e-1f1e-4a5e-9d59-7a3d1c2b0f00",
	}
	if diff := cmp.Diff(want, obs.Health); diff != "" {
		t.Errorf("health (-want +got):\n%s", diff)
	}
}

// NVML's GPUs keep their counters and gain their link; a GPU NVML lists
// whose device directory is gone has no link.
func TestNVMLGPUsGetLinks(t *testing.T) {
	files := map[string]string{}
	link(files, "0000:18:00.0", "2.5 GT/s PCIe", "16.0 GT/s PCIe", "16", "16")
	h := write(t, files)
	i0, i1 := 0, 1
	obs := &facts.Observation{Health: facts.Health{GPUs: []facts.GPUHealth{
		{PCIAddress: "0000:2a:00.0", Index: &i1, NVML: &facts.NVMLHealth{Lost: true}},
		{PCIAddress: "0000:18:00.0", Index: &i0, NVML: &facts.NVMLHealth{ThrottleReasons: []string{"gpu_idle"}}},
	}}}
	health.Observe(h, obs)
	g := obs.Health.GPUs
	if len(g) != 2 || g[0].PCIAddress != "0000:18:00.0" || g[0].Link == nil || g[0].Link.CurrentSpeedGTs != 2.5 || g[0].NVML == nil || g[1].Link != nil || !g[1].NVML.Lost {
		t.Errorf("GPUs %+v", g)
	}
}

func TestSpeedGTs(t *testing.T) {
	for in, want := range map[string]float64{"16.0 GT/s PCIe": 16, "8.0 GT/s": 8, "2.5 GT/s PCIe": 2.5, "Unknown": 0, "": 0, "64.0 GT/s PCIe": 64} {
		if got := health.SpeedGTs(in); got != want {
			t.Errorf("SpeedGTs(%q) = %g, want %g", in, got, want)
		}
	}
}

// The whole health pass over a DGX's eight GPUs beside NVML's part
// (BenchmarkNVMLHealthDGXH100 in providers/host): each GPU's four link
// files and the driver's list read from a root.
func BenchmarkObserveDGX(b *testing.B) {
	files := map[string]string{"/proc/sys/kernel/random/boot_id": "3c9a5a4e\n"}
	var pci []facts.PCIDevice
	for _, a := range []string{"0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0", "0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0"} {
		link(files, a, "32.0 GT/s PCIe", "32.0 GT/s PCIe", "16", "16")
		files["/proc/driver/nvidia/gpus/"+a+"/information"] = ""
		pci = append(pci, facts.PCIDevice{Address: a})
	}
	h := write(b, files)
	b.ReportAllocs()
	for b.Loop() {
		obs := &facts.Observation{PCI: pci}
		health.Observe(h, obs)
		if len(obs.Health.GPUs) != 8 || obs.Health.GPUs[7].Link == nil || len(obs.Health.Missing) != 0 {
			b.Fatalf("%+v", obs.Health)
		}
	}
}
