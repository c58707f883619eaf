package host_test

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

func TestNVMLInitFailureClasses(t *testing.T) {
	cases := []struct {
		ret   nvml.Return
		class host.NVMLClass
		words string
	}{
		{nvml.ERROR_LIBRARY_NOT_FOUND, host.NVMLLibraryNotFound, "libnvidia-ml.so.1 not found"},
		{nvml.ERROR_DRIVER_NOT_LOADED, host.NVMLDriverNotLoaded, "kernel driver is not loaded"},
		{nvml.ERROR_LIB_RM_VERSION_MISMATCH, host.NVMLDriverLibraryMismatch, "driver/library version mismatch"},
		{nvml.ERROR_NO_PERMISSION, host.NVMLNoPermission, "no permission"},
		{nvml.ERROR_UNKNOWN, host.NVMLOther, "ERROR_UNKNOWN"},
		{nvml.Return(4242), host.NVMLOther, "code 4242"},
	}
	for _, c := range cases {
		t.Run(string(c.class)+"/"+host.ReturnName(int(c.ret)), func(t *testing.T) {
			// Only InitFunc is set: any later call into the library
			// panics, as the real one kills the process.
			lib := hosttest.FailingNVML(c.ret)
			n := host.NewNVML(lib)
			err := n.Init()
			var ne *host.NVMLError
			if !errors.As(err, &ne) {
				t.Fatalf("Init() = %v, want *NVMLError", err)
			}
			if ne.Class != c.class || ne.Code != int(c.ret) {
				t.Errorf("class %q code %d, want %q %d", ne.Class, ne.Code, c.class, c.ret)
			}
			if !strings.Contains(err.Error(), c.words) {
				t.Errorf("error %q does not say %q", err, c.words)
			}
			if _, err := n.System(); !errors.Is(err, ne) {
				t.Errorf("System after failed Init: %v, want the Init error", err)
			}
			if _, err := n.Devices(); !errors.Is(err, ne) {
				t.Errorf("Devices after failed Init: %v, want the Init error", err)
			}
			if err := n.Shutdown(); err != nil {
				t.Errorf("Shutdown after failed Init: %v", err)
			}
			if got := len(lib.InitCalls()); got != 1 {
				t.Errorf("library Init called %d times, want 1", got)
			}
			// Init may be tried again (the driver may have been loaded
			// since); once it succeeds, the rest works.
			lib.InitFunc = func() nvml.Return { return nvml.SUCCESS }
			lib.SystemGetDriverVersionFunc = func() (string, nvml.Return) { return "550.54.15", nvml.SUCCESS }
			lib.SystemGetCudaDriverVersionFunc = func() (int, nvml.Return) { return 12040, nvml.SUCCESS }
			lib.SystemGetNVMLVersionFunc = func() (string, nvml.Return) { return "12.550.54.15", nvml.SUCCESS }
			if err := n.Init(); err != nil {
				t.Fatalf("Init after the failure was fixed: %v", err)
			}
			if s, err := n.System(); err != nil || s.DriverVersion != "550.54.15" {
				t.Errorf("System after a successful retry = %+v, %v", s, err)
			}
		})
	}
}

func TestNVMLCallsBeforeInitAreRefused(t *testing.T) {
	n := host.NewNVML(&mock.Interface{})
	if _, err := n.System(); !errors.Is(err, host.ErrNVMLNotStarted) {
		t.Errorf("System before Init: %v", err)
	}
	if _, err := n.Devices(); !errors.Is(err, host.ErrNVMLNotStarted) {
		t.Errorf("Devices before Init: %v", err)
	}
	if err := n.Shutdown(); err != nil {
		t.Errorf("Shutdown before Init: %v", err)
	}
}

func TestNVMLDGXH100(t *testing.T) {
	s := hosttest.NVMLServer("dgxh100")
	n := host.NewNVML(s)
	if err := n.Init(); err != nil {
		t.Fatal(err)
	}
	sys, err := n.System()
	if err != nil {
		t.Fatal(err)
	}
	want := host.NVMLSystem{DriverVersion: "550.54.15", CUDADriverVersion: 12040, NVMLVersion: "12.550.54.15"}
	if diff := cmp.Diff(want, sys); diff != "" {
		t.Errorf("System (-want +got):\n%s", diff)
	}
	devs, err := n.Devices()
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) != 8 {
		t.Fatalf("%d devices, want 8", len(devs))
	}
	wantDev := host.NVMLDevice{
		Index:             3,
		Name:              "NVIDIA H100 80GB HBM3",
		UUID:              "GPU-00000000-0000-0000-0000-000000000003",
		PCIBusID:          "0000:5d:00.0",
		MemoryTotal:       80 << 30,
		ComputeCapability: "9.0",
		PersistenceMode:   "enabled",
		ComputeMode:       "default",
		MIGMode:           "disabled",
		MIGPending:        "disabled",
	}
	if diff := cmp.Diff(wantDev, devs[3]); diff != "" {
		t.Errorf("device 3 (-want +got):\n%s", diff)
	}
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if len(s.ShutdownCalls()) != 1 {
		t.Errorf("Shutdown reached the library %d times", len(s.ShutdownCalls()))
	}
	if _, err := n.System(); err == nil {
		t.Error("System after Shutdown succeeded")
	}
}

func TestNVMLOtherServers(t *testing.T) {
	for name, want := range map[string]struct{ driver, dev, cc string }{
		"dgxh200": {"550.54.15", "NVIDIA H200 141GB HBM3e", "9.0"},
		"dgxb200": {"560.28.03", "NVIDIA B200 180GB HBM3e", "10.0"},
	} {
		n := host.NewNVML(hosttest.NVMLServer(name))
		if err := n.Init(); err != nil {
			t.Fatal(err)
		}
		sys, _ := n.System()
		devs, err := n.Devices()
		if err != nil {
			t.Fatal(err)
		}
		if sys.DriverVersion != want.driver || len(devs) != 8 || devs[7].Name != want.dev || devs[7].ComputeCapability != want.cc {
			t.Errorf("%s: driver %q, %d devices, last %q cc %q; want %+v", name, sys.DriverVersion, len(devs), devs[7].Name, devs[7].ComputeCapability, want)
		}
		n.Shutdown()
	}
}

// TestNVMLUnsupportedAndFailingQueries: NOT_SUPPORTED leaves a value empty
// without complaint, any other failure is recorded against the device, and
// MIG devices and processes are counted.
func TestNVMLUnsupportedAndFailingQueries(t *testing.T) {
	migSlots := map[int]bool{0: true, 2: true}
	dev := &mock.Device{
		GetNameFunc:                  func() (string, nvml.Return) { return "NVIDIA GeForce RTX 4090", nvml.SUCCESS },
		GetUUIDFunc:                  func() (string, nvml.Return) { return "GPU-x", nvml.SUCCESS },
		GetPciInfoFunc:               func() (nvml.PciInfo, nvml.Return) { return nvml.PciInfo{Domain: 0, Bus: 0x65}, nvml.SUCCESS },
		GetMemoryInfoFunc:            func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: 24 << 30, Used: 1 << 30}, nvml.SUCCESS },
		GetCudaComputeCapabilityFunc: func() (int, int, nvml.Return) { return 8, 9, nvml.SUCCESS },
		GetPersistenceModeFunc:       func() (nvml.EnableState, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED },
		GetComputeModeFunc:           func() (nvml.ComputeMode, nvml.Return) { return 0, nvml.ERROR_GPU_IS_LOST },
		GetMigModeFunc:               func() (int, int, nvml.Return) { return nvml.DEVICE_MIG_ENABLE, nvml.DEVICE_MIG_ENABLE, nvml.SUCCESS },
		GetMaxMigDeviceCountFunc:     func() (int, nvml.Return) { return 7, nvml.SUCCESS },
		GetMigDeviceHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			if migSlots[i] {
				return &mock.Device{
					GetGpuInstanceIdFunc:     func() (int, nvml.Return) { return i, nvml.SUCCESS },
					GetComputeInstanceIdFunc: func() (int, nvml.Return) { return 0, nvml.SUCCESS },
					GetUUIDFunc:              func() (string, nvml.Return) { return fmt.Sprintf("MIG-%d", i), nvml.SUCCESS },
				}, nvml.SUCCESS
			}
			return nil, nvml.ERROR_NOT_FOUND
		},
		GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
			return []nvml.ProcessInfo{{Pid: 4242, UsedGpuMemory: 512 << 20}, {Pid: 7, UsedGpuMemory: 1}}, nvml.SUCCESS
		},
		// No GPU instance profile: the instances are not listed.
		GetGpuInstanceProfileInfoFunc: func(int) (nvml.GpuInstanceProfileInfo, nvml.Return) {
			return nvml.GpuInstanceProfileInfo{}, nvml.ERROR_NOT_SUPPORTED
		},
	}
	lib := &mock.Interface{
		InitFunc:                   func() nvml.Return { return nvml.SUCCESS },
		DeviceGetCountFunc:         func() (int, nvml.Return) { return 2, nvml.SUCCESS },
		SystemGetDriverVersionFunc: func() (string, nvml.Return) { return "550.54.15", nvml.SUCCESS },
		SystemGetCudaDriverVersionFunc: func() (int, nvml.Return) {
			return 0, nvml.ERROR_NOT_SUPPORTED
		},
		SystemGetNVMLVersionFunc: func() (string, nvml.Return) { return "", nvml.ERROR_UNKNOWN },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			if i == 1 {
				return nil, nvml.ERROR_GPU_IS_LOST
			}
			return dev, nvml.SUCCESS
		},
		SystemGetProcessNameFunc: func(pid int) (string, nvml.Return) {
			if pid == 4242 {
				return "/usr/bin/python3", nvml.SUCCESS
			}
			return "", nvml.ERROR_NOT_FOUND
		},
	}
	n := host.NewNVML(lib)
	if err := n.Init(); err != nil {
		t.Fatal(err)
	}
	sys, err := n.System()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(host.NVMLSystem{DriverVersion: "550.54.15", Errors: []string{"NVML version: ERROR_UNKNOWN"}}, sys); diff != "" {
		t.Errorf("System (-want +got):\n%s", diff)
	}
	devs, err := n.Devices()
	if err != nil {
		t.Fatal(err)
	}
	want := []host.NVMLDevice{{
		Index: 0, Name: "NVIDIA GeForce RTX 4090", UUID: "GPU-x", PCIBusID: "0000:65:00.0",
		MemoryTotal: 24 << 30, MemoryUsed: 1 << 30, ComputeCapability: "8.9",
		MIGMode: "enabled", MIGPending: "enabled", MIGDevices: 2,
		Processes: []host.NVMLProcess{{PID: 4242, UsedMemory: 512 << 20, Name: "/usr/bin/python3"}, {PID: 7, UsedMemory: 1}},
		Errors:    []string{"compute mode: ERROR_GPU_IS_LOST"},
	}, {
		Index: 1, Errors: []string{"handle: ERROR_GPU_IS_LOST"},
	}}
	if diff := cmp.Diff(want, devs); diff != "" {
		t.Errorf("Devices (-want +got):\n%s", diff)
	}
}

func TestNVMLBusIDSpelling(t *testing.T) {
	d := hosttest.NVMLServer("dgxh100").Devices[0].(*server.Device)
	for in, want := range map[string]string{
		"0000:18:00.0":     "0000:18:00.0",
		"0001:ab:00.1":     "0001:ab:00.1",
		"00000000:DB:00.0": "0000:db:00.0",
	} {
		// Complete hands the id to gpuenv as the real library does:
		// eight-digit domain, upper case.
		d.PciBusID = in
		n := host.NewNVML(&mock.Interface{
			InitFunc:                   func() nvml.Return { return nvml.SUCCESS },
			DeviceGetCountFunc:         func() (int, nvml.Return) { return 1, nvml.SUCCESS },
			DeviceGetHandleByIndexFunc: func(int) (nvml.Device, nvml.Return) { return d, nvml.SUCCESS },
		})
		n.Init()
		devs, _ := n.Devices()
		if devs[0].PCIBusID != want {
			t.Errorf("bus id of %q = %q, want %q", in, devs[0].PCIBusID, want)
		}
	}
}

func TestHostNVML(t *testing.T) {
	h := hosttest.New(t, t.TempDir())
	if h.NVML() != nil {
		t.Error("a root other than / has an NVML of its own")
	}
	n := host.NewNVML(hosttest.NVMLServer("dgxh100"))
	h, _ = host.New(t.TempDir(), host.WithNVML(n))
	if h.NVML() != n {
		t.Error("WithNVML not used for a fixture root")
	}
}

// TestLiveNVMLWithoutLibrary runs the real go-nvml library on a machine
// without libnvidia-ml.so.1: Init must say the library is missing (and
// the process must survive it).
func TestLiveNVMLWithoutLibrary(t *testing.T) {
	for _, dir := range []string{"/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/lib/aarch64-linux-gnu", "/lib64"} {
		if _, err := os.Stat(dir + "/libnvidia-ml.so.1"); err == nil {
			t.Skip("this machine has libnvidia-ml.so.1")
		}
	}
	if os.Getenv("LD_LIBRARY_PATH") != "" {
		t.Skip("LD_LIBRARY_PATH may name a libnvidia-ml")
	}
	h := hosttest.New(t, "/")
	n := h.NVML()
	err := n.Init()
	var ne *host.NVMLError
	if !errors.As(err, &ne) || ne.Class != host.NVMLLibraryNotFound {
		t.Fatalf("Init() = %v, want library_not_found", err)
	}
	if _, err := n.Devices(); !errors.Is(err, ne) {
		t.Errorf("Devices after failed Init = %v", err)
	}
}
