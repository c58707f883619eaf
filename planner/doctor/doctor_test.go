package doctor_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/gpuenv/gpuenv/planner/doctor"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

// machine is a fixture root, changed on disk before it is observed, with
// the NVML it answers through and the user who runs doctor.
type machine struct {
	fixture string
	pythons []string
	// change edits the laid-out root (remove a node, add a file).
	change func(t *testing.T, root string)
	// nvml, when set, answers for the fixture as the GPUs would.
	nvml    func() *server.Server
	user    *doctor.User
	session []facts.Assignment
}

func (m machine) report(t *testing.T) *doctor.Report {
	t.Helper()
	root := hosttest.Build(t, m.fixture)
	if m.change != nil {
		m.change(t, root)
	}
	h := hosttest.New(t, root)
	opts := providers.ObserveOptions{Pythons: m.pythons}
	if m.nvml != nil {
		opts.NVML = host.NewNVML(m.nvml())
	}
	obs := providers.Observe(context.Background(), h, opts)
	return doctor.Run(doctor.Input{Obs: obs, User: m.user, Session: m.session})
}

// finding is what one check must say: its status, and text that must
// appear in its summary and among its evidence and fix.
type finding struct {
	id       string
	status   doctor.Status
	summary  string
	evidence []string
	fix      string
}

var (
	alice = &doctor.User{Name: "alice", UID: 1002, GID: 1002}
	ml    = &doctor.User{Name: "ml", UID: 1001, GID: 1001}
)

func writeFile(path, data string) func(*testing.T, string) {
	return func(t *testing.T, root string) { hosttest.WriteFile(t, root, path, data) }
}

// appendFile adds data to the end of a fixture's file.
func appendFile(path, data string) func(*testing.T, string) {
	return func(t *testing.T, root string) {
		f, err := os.OpenFile(filepath.Join(root, path), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(data); err != nil {
			t.Fatal(err)
		}
	}
}

func symlink(path, target string) func(*testing.T, string) {
	return func(t *testing.T, root string) {
		p := filepath.Join(root, path)
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
}

func remove(paths ...string) func(*testing.T, string) {
	return func(t *testing.T, root string) {
		for _, p := range paths {
			if err := os.RemoveAll(filepath.Join(root, p)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// dgx is the working DGX's NVML with edit applied to its devices.
func dgx(edit func(devs []*server.Device)) func() *server.Server {
	return func() *server.Server {
		s := hosttest.NVMLServer("dgxh100")
		var devs []*server.Device
		for _, d := range s.Devices {
			devs = append(devs, d.(*server.Device))
		}
		if edit != nil {
			edit(devs)
		}
		return s
	}
}

func TestChecks(t *testing.T) {
	tests := []struct {
		name    string
		machine machine
		want    []finding
	}{
		{
			name:    "no GPU on the bus",
			machine: machine{fixture: "ubuntu2204-h100-fresh", change: remove("sys/bus/pci/devices/0000:17:00.0")},
			want: []finding{
				{id: "pci.gpus", status: doctor.Problem, summary: "No NVIDIA GPU", evidence: []string{"/sys/bus/pci/devices: no display or 3D controller of vendor 0x10de"}},
				{id: "kernel.module", status: doctor.Skipped},
			},
		},
		{
			name:    "fresh machine: GPU without driver",
			machine: machine{fixture: "ubuntu2204-h100-fresh"},
			want: []finding{
				{id: "pci.gpus", status: doctor.OK, summary: "1 × H100 SXM5 80GB HBM3", evidence: []string{"/sys/bus/pci/devices/0000:17:00.0: 10de:2330 H100 SXM5 80GB HBM3 (Hopper, compute capability 9.0)"}},
				{id: "pci.driver", status: doctor.Problem, summary: "No kernel driver is bound to 0000:17:00.0", evidence: []string{"/sys/bus/pci/devices/0000:17:00.0/driver: none"}},
				{id: "kernel.module", status: doctor.Problem, summary: "not loaded", evidence: []string{"/lib/modules/5.15.0-105-generic: no nvidia module for the running kernel"}, fix: "driver {"},
				{id: "kernel.nouveau", status: doctor.Warning, summary: "nothing blacklists it", evidence: []string{"no modprobe configuration or kernel parameter blacklists nouveau"}, fix: "blacklist_nouveau = true"},
				{id: "kernel.secure-boot", status: doctor.Warning, summary: "signing key is enrolled", evidence: []string{"EFI variable SecureBoot: enabled"}, fix: "mokutil --import /var/lib/shim-signed/mok/MOK.der"},
				{id: "kernel.dkms", status: doctor.Skipped},
				{id: "devices.nodes", status: doctor.Skipped},
			},
		},
		{
			name: "GPU reserved for virtual machines",
			machine: machine{fixture: "ubuntu2204-h100-fresh", change: func(t *testing.T, root string) {
				if err := os.MkdirAll(filepath.Join(root, "sys/bus/pci/drivers/vfio-pci"), 0o755); err != nil {
					t.Fatal(err)
				}
				dev := "sys/devices/pci0000:16/0000:16:02.0/0000:17:00.0/"
				symlink(dev+"driver", "../../../../bus/pci/drivers/vfio-pci")(t, root)
				uevent, err := os.ReadFile(filepath.Join(root, dev+"uevent"))
				if err != nil {
					t.Fatal(err)
				}
				writeFile(dev+"uevent", "DRIVER=vfio-pci\n"+string(uevent))(t, root)
			}},
			want: []finding{
				{id: "pci.driver", status: doctor.Problem, summary: "0000:17:00.0 reserved for virtual machines (vfio-pci)", evidence: []string{"/sys/bus/pci/devices/0000:17:00.0/driver: vfio-pci"}, fix: "vfio-pci.ids"},
			},
		},
		{
			name:    "nouveau drives the GPU",
			machine: machine{fixture: "nouveau"},
			want: []finding{
				{id: "pci.driver", status: doctor.Problem, summary: "nouveau drives 0000:01:00.0", evidence: []string{"/sys/bus/pci/devices/0000:01:00.0/driver: nouveau"}, fix: "blacklist_nouveau = true"},
				{id: "kernel.nouveau", status: doctor.Problem, summary: "nouveau is loaded", evidence: []string{"/proc/modules: nouveau loaded", "no modprobe configuration or kernel parameter blacklists nouveau"}},
				{id: "kernel.initramfs", status: doctor.Skipped},
			},
		},
		{
			name:    "blacklist newer than the initramfs",
			machine: machine{fixture: "initramfs-stale"},
			want: []finding{
				{id: "kernel.nouveau", status: doctor.Problem, evidence: []string{"/etc/modprobe.d/blacklist-nouveau.conf:1: blacklist nouveau"}},
				{id: "kernel.initramfs", status: doctor.Problem, summary: "newer than the initramfs", evidence: []string{
					"/boot/initrd.img-5.15.0-105-generic: built 2024-04-22 09:12:31",
					"/etc/modprobe.d/blacklist-nouveau.conf:1: blacklist nouveau: modified 2024-05-02 17:30:00",
				}, fix: "update-initramfs -u"},
			},
		},
		{
			name:    "blacklist in the initramfs",
			machine: machine{fixture: "ubuntu2204-working"},
			want: []finding{
				{id: "kernel.nouveau", status: doctor.OK, evidence: []string{"/usr/lib/modprobe.d/nvidia-graphics-drivers.conf:2: blacklist nouveau"}},
				{id: "kernel.initramfs", status: doctor.OK, evidence: []string{"/boot/initrd.img-5.15.0-105-generic: built 2024-04-22 09:12:31"}},
			},
		},
		{
			name:    "Secure Boot rejects the unsigned module",
			machine: machine{fixture: "secure-boot-unsigned"},
			want: []finding{
				{id: "kernel.module", status: doctor.Problem, evidence: []string{"installed for the running kernel: /lib/modules/5.15.0-105-generic/updates/dkms/nvidia.ko 550.54.15"}, fix: "modprobe nvidia"},
				{id: "kernel.secure-boot", status: doctor.Problem, summary: "not signed by an enrolled key", evidence: []string{
					"EFI variable SecureBoot: enabled",
					"installed for the running kernel: /var/lib/dkms/nvidia/550.54.15/5.15.0-105-generic/x86_64: built",
					"/proc/modules: no nvidia module",
				}, fix: "mokutil --import /var/lib/shim-signed/mok/MOK.der"},
				{id: "kernel.dkms", status: doctor.OK},
				{id: "kernel.nouveau", status: doctor.OK},
			},
		},
		{
			// Canonical signed the module: loading it needs no enrolment.
			name: "Secure Boot with Ubuntu's signed module not loaded yet",
			machine: machine{fixture: "ubuntu2204-h100-fresh", change: func(t *testing.T, root string) {
				writeFile("usr/lib/modules/5.15.0-105-generic/kernel/nvidia-550-open/nvidia.ko", "")(t, root)
				appendFile("var/lib/dpkg/status", "\nPackage: linux-modules-nvidia-550-open-5.15.0-105-generic\nStatus: install ok installed\nArchitecture: amd64\nVersion: 5.15.0-105.115\n")(t, root)
			}},
			want: []finding{
				{id: "kernel.secure-boot", status: doctor.Warning, summary: "signed nvidia module is installed but not loaded: it needs no key enrolment", evidence: []string{
					"EFI variable SecureBoot: enabled",
					"installed for the running kernel: /lib/modules/5.15.0-105-generic/kernel/nvidia-550-open/nvidia.ko",
					"linux-modules-nvidia-550-open-5.15.0-105-generic is installed: Ubuntu's signed prebuilt modules",
				}, fix: "modprobe nvidia"},
			},
		},
		{
			name: "DKMS module missing for the running kernel",
			machine: machine{fixture: "ubuntu2204-working", change: remove(
				"usr/lib/modules/5.15.0-105-generic/updates",
				"var/lib/dkms/nvidia/550.54.15/5.15.0-105-generic",
				"var/lib/dkms/nvidia/kernel-5.15.0-105-generic-x86_64",
			)},
			want: []finding{
				{id: "kernel.dkms", status: doctor.Problem, summary: "No nvidia module for the running kernel 5.15.0-105-generic", evidence: []string{
					"/lib/modules/5.15.0-105-generic: no nvidia module",
					"/lib/modules/5.15.0-94-generic: /lib/modules/5.15.0-94-generic/updates/dkms/nvidia.ko 550.54.15",
				}, fix: "dkms autoinstall -k 5.15.0-105-generic"},
			},
		},
		{
			name: "DKMS module missing for another kernel without headers",
			machine: machine{fixture: "ubuntu2204-working", change: remove(
				"usr/lib/modules/5.15.0-94-generic/updates",
				"usr/lib/modules/5.15.0-94-generic/build",
				"var/lib/dkms/nvidia/550.54.15/5.15.0-94-generic",
				"var/lib/dkms/nvidia/kernel-5.15.0-94-generic-x86_64",
			)},
			want: []finding{
				{id: "kernel.dkms", status: doctor.Warning, summary: "No nvidia module for 5.15.0-94-generic", evidence: []string{"/lib/modules/5.15.0-94-generic: no nvidia module; no headers"}, fix: "apt-get install linux-headers-5.15.0-94-generic"},
			},
		},
		{
			name:    "NVML answers on the working DGX",
			machine: machine{fixture: "ubuntu2204-working", nvml: dgx(nil), user: ml},
			want: []finding{
				{id: "nvml.init", status: doctor.OK, summary: "driver 550.54.15, CUDA 12.4, 8 GPUs", evidence: []string{"NVML 12.550.54.15: driver 550.54.15, CUDA driver API 12.4"}},
				{id: "driver.versions", status: doctor.OK, summary: "both 550.54.15"},
				{id: "devices.nodes", status: doctor.OK, summary: "nvidia-uvm included (10)"},
				{id: "devices.access", status: doctor.OK, summary: "ml can open the device nodes (as others)", evidence: []string{"user ml: uid 1001, groups ml, render, video"}},
				{id: "gpu.memory", status: doctor.OK},
				{id: "gpu.compute-mode", status: doctor.OK},
				{id: "gpu.mig", status: doctor.OK},
			},
		},
		{
			name:    "NVML: library missing",
			machine: machine{fixture: "ubuntu2204-working", nvml: failing(nvml.ERROR_LIBRARY_NOT_FOUND)},
			want: []finding{
				{id: "nvml.init", status: doctor.Problem, summary: "libnvidia-ml.so.1 is not installed", evidence: []string{"NVML: NVML library libnvidia-ml.so.1 not found"}, fix: "version = \"550.54.15\""},
			},
		},
		{
			name:    "NVML: library missing on a host without GPU",
			machine: machine{fixture: "ubuntu2204-h100-fresh", change: remove("sys/bus/pci/devices/0000:17:00.0"), nvml: failing(nvml.ERROR_LIBRARY_NOT_FOUND)},
			want:    []finding{{id: "nvml.init", status: doctor.Skipped, summary: "no GPU"}},
		},
		{
			name:    "NVML: driver not loaded",
			machine: machine{fixture: "ubuntu2204-working", nvml: failing(nvml.ERROR_DRIVER_NOT_LOADED)},
			want: []finding{
				{id: "nvml.init", status: doctor.Problem, summary: "the nvidia kernel module is not loaded", evidence: []string{"NVML: NVML reports the NVIDIA kernel driver is not loaded"}, fix: "modprobe nvidia"},
			},
		},
		{
			name:    "NVML: no permission",
			machine: machine{fixture: "ubuntu2204-working", nvml: failing(nvml.ERROR_NO_PERMISSION)},
			want: []finding{
				{id: "nvml.init", status: doctor.Problem, summary: "no permission on /dev/nvidia*", evidence: []string{"NVML: NVML has no permission"}},
			},
		},
		{
			name:    "NVML: driver/library mismatch after an upgrade",
			machine: machine{fixture: "ubuntu2204-mismatch", nvml: failing(nvml.ERROR_LIB_RM_VERSION_MISMATCH)},
			want: []finding{
				{id: "nvml.init", status: doctor.Problem, summary: "driver/library version mismatch", evidence: []string{
					"/proc/driver/nvidia/version: kernel module 550.54.15",
					"/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.127.05: library 550.127.05",
				}, fix: "hold = true"},
				{id: "driver.versions", status: doctor.Skipped},
			},
		},
		{
			name:    "driver/library mismatch seen in the files",
			machine: machine{fixture: "ubuntu2204-mismatch"},
			want: []finding{
				{id: "nvml.init", status: doctor.Skipped},
				{id: "driver.versions", status: doctor.Problem, summary: "module 550.54.15, libraries 550.127.05", evidence: []string{"libnvidia-ml.so.1 leads to 550.127.05"}, fix: "rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia"},
			},
		},
		{
			name:    "module loaded without its libraries",
			machine: machine{fixture: "ubuntu2204-working", change: remove("usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.15", "usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1")},
			want: []finding{
				{id: "driver.versions", status: doctor.Problem, summary: "no libnvidia-ml is installed", evidence: []string{"/proc/driver/nvidia/version: kernel module 550.54.15"}, fix: "version = \"550.54.15\""},
			},
		},
		{
			name:    "nvidia-uvm node missing",
			machine: machine{fixture: "ubuntu2204-working", change: remove("dev/nvidia-uvm", "dev/nvidia-uvm-tools")},
			want: []finding{
				{id: "devices.nodes", status: doctor.Problem, summary: "/dev/nvidia-uvm is missing", evidence: []string{"/dev/nvidia-uvm: missing", "/dev/nvidiactl: char 195:255, mode 0666"}, fix: "nvidia-modprobe -u -c=0"},
			},
		},
		{
			name:    "device nodes 0660 root:video, user not in video",
			machine: machine{fixture: "ubuntu2204-misconfigured", user: alice},
			want: []finding{
				{id: "devices.access", status: doctor.Problem, summary: "they belong to group video, which alice is not in", evidence: []string{
					"user alice: uid 1002, groups alice",
					"/dev/nvidia-uvm, /dev/nvidia0, /dev/nvidia1, /dev/nvidia2, /dev/nvidia3, /dev/nvidia4, /dev/nvidia5, /dev/nvidia6, /dev/nvidia7, /dev/nvidiactl: mode 0660, uid 0, group video: denied",
				}, fix: "group \"video\" {\n  members = [\"alice\"]\n}"},
			},
		},
		{
			name:    "device nodes 0660 root:video, user in video",
			machine: machine{fixture: "ubuntu2204-misconfigured", user: ml},
			want: []finding{
				{id: "devices.access", status: doctor.OK, summary: "ml can open the device nodes (as group)"},
			},
		},
		{
			name:    "device nodes without a user",
			machine: machine{fixture: "ubuntu2204-working"},
			want:    []finding{{id: "devices.access", status: doctor.Skipped}},
		},
		{
			name:    "working toolkit",
			machine: machine{fixture: "ubuntu2204-working"},
			want: []finding{
				{id: "cuda.driver:/usr/local/cuda-12.4", status: doctor.OK, summary: "Driver 550.54.15 runs CUDA 12.4.1", evidence: []string{"/usr/local/cuda-12.4: CUDA 12.4.1 (from version.json)"}},
				{id: "cuda.default", status: doctor.OK, evidence: []string{"/usr/local/cuda -> /usr/local/cuda-12.4"}},
				{id: "cuda.nvcc", status: doctor.OK, evidence: []string{"/etc/profile.d/cuda-12.4.sh:2: PATH includes /usr/local/cuda-12.4/bin"}},
				{id: "cuda.loader", status: doctor.OK, evidence: []string{"/etc/ld.so.conf.d/000_cuda.conf: /usr/local/cuda/targets/x86_64-linux/lib"}},
			},
		},
		{
			name: "toolkit off PATH and off the loader, no /usr/local/cuda",
			machine: machine{fixture: "ubuntu2204-working", change: remove(
				"etc/profile.d/cuda-12.4.sh", "etc/ld.so.conf.d/000_cuda.conf", "etc/ld.so.conf.d/988_cuda-12.conf", "usr/local/cuda",
			)},
			want: []finding{
				{id: "cuda.default", status: doctor.Warning, evidence: []string{"/usr/local/cuda: does not exist"}, fix: "ln -s /usr/local/cuda-12.4 /usr/local/cuda"},
				{id: "cuda.nvcc", status: doctor.Warning, summary: "is not on PATH", evidence: []string{"nvcc: /usr/local/cuda-12.4/bin/nvcc"}, fix: "set_environment = true"},
				{id: "cuda.loader", status: doctor.Warning, summary: "does not find CUDA 12.4.1's libraries", evidence: []string{"no directory of /etc/ld.so.conf.d or LD_LIBRARY_PATH is below /usr/local/cuda-12.4"}, fix: "set_environment = true"},
			},
		},
		{
			name:    "toolkit newer than the driver",
			machine: machine{fixture: "ubuntu2204-working", nvml: dgx(nil), change: writeFile("usr/local/cuda-12.4/version.json", `{"cuda": {"name": "CUDA SDK", "version": "12.8.1"}, "cuda_cudart": {"name": "CUDA Runtime (cudart)", "version": "12.8.90"}}`)},
			want: []finding{
				{id: "cuda.driver:/usr/local/cuda-12.4", status: doctor.Warning, summary: "only through minor-version compatibility", evidence: []string{"NVML: driver 550.54.15", "driver 550.54.15 runs CUDA up to 12.4"}},
			},
		},
		{
			name:    "toolkit of a major the driver does not run",
			machine: machine{fixture: "tensorflow-no-cudnn", change: writeFile("usr/local/cuda-12.3/version.json", `{"cuda": {"name": "CUDA SDK", "version": "13.0.1"}, "cuda_cudart": {"name": "CUDA Runtime (cudart)", "version": "13.0.88"}}`)},
			want: []finding{
				{id: "cuda.driver:/usr/local/cuda-12.3", status: doctor.Problem, summary: "needs a newer driver than 545.23.08", evidence: []string{"/proc/driver/nvidia/version: driver 545.23.08"}, fix: "driver {\n  version = \">= 580.82.07\"\n}"},
			},
		},
		{
			name:    "cuDNN for the toolkit's CUDA major",
			machine: machine{fixture: "ubuntu2204-working"},
			want: []finding{
				{id: "cudnn:9.1.0", status: doctor.OK, summary: "built for CUDA 12", evidence: []string{"/usr/include/x86_64-linux-gnu/cudnn_version_v9.h: cuDNN 9.1.0 for CUDA 12 (package libcudnn9-cuda-12 9.1.0.70-1)", "/usr/local/cuda-12.4: CUDA 12.4.1"}},
			},
		},
		{
			name:    "cuDNN without a build for the toolkit's CUDA",
			machine: machine{fixture: "tensorflow-no-cudnn", change: writeFile("usr/include/cudnn_version.h", "#define CUDNN_MAJOR 8\n#define CUDNN_MINOR 6\n#define CUDNN_PATCHLEVEL 0\n")},
			want: []finding{
				{id: "cudnn:8.6.0", status: doctor.Problem, summary: "cuDNN 8.6.0 has no build for the installed CUDA 12", evidence: []string{"/usr/include/cudnn_version.h: cuDNN 8.6.0", "/usr/local/cuda-12.3: CUDA 12.3.2"}, fix: "cudnn {"},
			},
		},
		{
			name:    "no cuDNN",
			machine: machine{fixture: "tensorflow-no-cudnn"},
			want:    []finding{{id: "cudnn", status: doctor.Skipped}},
		},
		{
			name:    "PyTorch built for the driver's CUDA",
			machine: machine{fixture: "ubuntu2204-working", pythons: []string{"/opt/venv/bin/python"}},
			want: []finding{
				{id: "framework:/opt/venv/bin/python:pytorch", status: doctor.OK, summary: "built for CUDA 12.4", evidence: []string{"/opt/venv/lib/python3.10/site-packages/torch: pytorch 2.5.1+cu124 (built for CUDA 12.4, cuDNN 9.1.0.70, installed by pip)"}},
			},
		},
		{
			name: "CPU-only PyTorch",
			machine: machine{fixture: "ubuntu2204-working", pythons: []string{"/opt/venv/bin/python"}, change: func(t *testing.T, root string) {
				writeFile("opt/venv/lib/python3.10/site-packages/torch/version.py", "__version__ = '2.5.1+cpu'\ncuda = None\n")(t, root)
				dist := filepath.Join(root, "opt/venv/lib/python3.10/site-packages")
				if err := os.Rename(filepath.Join(dist, "torch-2.5.1+cu124.dist-info"), filepath.Join(dist, "torch-2.5.1+cpu.dist-info")); err != nil {
					t.Fatal(err)
				}
				writeFile("opt/venv/lib/python3.10/site-packages/torch-2.5.1+cpu.dist-info/METADATA", "Metadata-Version: 2.1\nName: torch\nVersion: 2.5.1+cpu\n")(t, root)
			}},
			want: []finding{
				{id: "framework.cpu-only:/opt/venv/bin/python:pytorch", status: doctor.Problem, summary: "is a CPU-only build", evidence: []string{"pytorch 2.5.1+cpu (CPU-only build"}, fix: "framework \"pytorch\" {\n  version = \"2.5.*\"\n  python  = \"/opt/venv/bin/python\"\n  cuda    = \"12.4\"\n}"},
			},
		},
		{
			name: "PyTorch built for a CUDA newer than the driver runs",
			machine: machine{fixture: "tensorflow-no-cudnn", change: func(t *testing.T, root string) {
				writeFile("opt/tf/lib/python3.10/site-packages/torch/version.py", "__version__ = '2.9.0+cu130'\ncuda = '13.0'\n")(t, root)
				writeFile("opt/tf/lib/python3.10/site-packages/torch-2.9.0+cu130.dist-info/METADATA", "Metadata-Version: 2.1\nName: torch\nVersion: 2.9.0+cu130\n")(t, root)
				writeFile("opt/tf/lib/python3.10/site-packages/torch-2.9.0+cu130.dist-info/INSTALLER", "pip\n")(t, root)
			}, pythons: []string{"/opt/tf/bin/python"}},
			want: []finding{
				{id: "framework.driver:/opt/tf/bin/python:pytorch", status: doctor.Problem, summary: "needs a newer driver than 545.23.08", evidence: []string{"pytorch 2.9.0+cu130 (built for CUDA 13.0", "/proc/driver/nvidia/version: driver 545.23.08"}, fix: "cuda    = \"12.8\""},
			},
		},
		{
			name: "PyTorch without code for the GPU's architecture",
			machine: machine{fixture: "ubuntu2204-working", pythons: []string{"/opt/venv/bin/python"}, nvml: dgx(func(devs []*server.Device) {
				for _, d := range devs {
					d.GetCudaComputeCapabilityFunc = func() (int, int, nvml.Return) { return 12, 0, nvml.SUCCESS }
				}
			})},
			want: []finding{
				{id: "framework.arch:/opt/venv/bin/python:pytorch", status: doctor.Problem, summary: "no code for compute capability 12.0", evidence: []string{"none of which runs on compute capability 12.0"}},
			},
		},
		{
			name:    "JAX with the CUDA 12 plugin",
			machine: machine{fixture: "ubuntu2204-working", pythons: []string{"/opt/venv/bin/python"}, change: jax("0.4.35", "12")},
			want: []finding{
				{id: "framework:/opt/venv/bin/python:jax", status: doctor.OK, summary: "jax 0.4.35 in /opt/venv/bin/python is built for CUDA 12", evidence: []string{"/opt/venv/lib/python3.10/site-packages/jax: jax 0.4.35 (built for CUDA 12"}},
			},
		},
		{
			name: "JAX's CUDA 13 plugin on a Volta GPU",
			machine: machine{fixture: "ubuntu2204-working", pythons: []string{"/opt/venv/bin/python"}, change: jax("0.7.0", "13"), nvml: dgx(func(devs []*server.Device) {
				for _, d := range devs {
					d.GetCudaComputeCapabilityFunc = func() (int, int, nvml.Return) { return 7, 0, nvml.SUCCESS }
				}
			})},
			want: []finding{
				{id: "framework.arch:/opt/venv/bin/python:jax", status: doctor.Problem, summary: "no code for compute capability 7.0", evidence: []string{"JAX's CUDA 13 plugin needs compute capability 7.5 or newer"}, fix: "extras  = [\"cuda12\"]"},
				{id: "framework.driver:/opt/venv/bin/python:jax", status: doctor.Problem, summary: "needs a newer driver than 550.54.15"},
			},
		},
		{
			name:    "TensorFlow without its cuDNN",
			machine: machine{fixture: "tensorflow-no-cudnn", pythons: []string{"/opt/tf/bin/python"}},
			want: []finding{
				{id: "framework.libraries:/opt/tf/bin/python:tensorflow", status: doctor.Problem, summary: "needs cuDNN 8 (libcudnn.so.8)", evidence: []string{
					"/opt/tf/lib/python3.10/site-packages/tensorflow: tensorflow 2.17.0 (built for CUDA 12.3, cuDNN 8, installed by pip)",
					"no cuDNN in the package database",
				}, fix: "extras  = [\"and-cuda\"]"},
			},
		},
		{
			// pip install tensorflow[and-cuda] brings cuDNN and the CUDA
			// libraries as NVIDIA's wheels, which TensorFlow loads from
			// the environment: nothing is missing.
			name: "TensorFlow with its [and-cuda] wheels",
			machine: machine{fixture: "tensorflow-no-cudnn", pythons: []string{"/opt/tf/bin/python"}, change: func(t *testing.T, root string) {
				site := "opt/tf/lib/python3.10/site-packages/"
				for _, w := range []string{"nvidia_cudnn_cu12-8.9.7.29", "nvidia_cuda_runtime_cu12-12.3.101", "nvidia_cublas_cu12-12.3.4.1"} {
					writeFile(site+w+".dist-info/INSTALLER", "pip\n")(t, root)
				}
				writeFile(site+"nvidia/cudnn/lib/libcudnn.so.8", "")(t, root)
			}},
			want: []finding{
				{id: "framework:/opt/tf/bin/python:tensorflow", status: doctor.OK, summary: "tensorflow 2.17.0 in /opt/tf/bin/python is built for CUDA 12.3"},
			},
		},
		{
			name:    "no framework named",
			machine: machine{fixture: "ubuntu2204-working"},
			want:    []finding{{id: "framework", status: doctor.Skipped, summary: "--python"}},
		},
		{
			name:    "CUDA_VISIBLE_DEVICES names a GPU that does not exist",
			machine: machine{fixture: "ubuntu2204-misconfigured"},
			want: []finding{
				{id: "env.cuda-visible-devices", status: doctor.Problem, summary: "names GPU 9, but the host has 8 GPUs", evidence: []string{"/etc/profile.d/gpu.sh:2: CUDA_VISIBLE_DEVICES=0,9"}, fix: "cuda_visible_devices = [\"0\"]"},
				{id: "env.cuda-device-order", status: doctor.Warning, evidence: []string{"CUDA_DEVICE_ORDER is not set: CUDA's default is FASTEST_FIRST"}, fix: "cuda_device_order = \"PCI_BUS_ID\""},
			},
		},
		{
			name:    "CUDA_VISIBLE_DEVICES empty",
			machine: machine{fixture: "ubuntu2204-working", change: writeFile("etc/profile.d/gpu.sh", "export CUDA_VISIBLE_DEVICES=\n")},
			want: []finding{
				{id: "env.cuda-visible-devices", status: doctor.Problem, summary: "sets it empty, which hides every GPU", evidence: []string{"/etc/profile.d/gpu.sh:1: CUDA_VISIBLE_DEVICES="}, fix: `cuda_visible_devices = ["0", "1", "2", "3", "4", "5", "6", "7"]`},
			},
		},
		{
			name:    "CUDA_VISIBLE_DEVICES names an unknown UUID",
			machine: machine{fixture: "ubuntu2204-working", nvml: dgx(nil), session: []facts.Assignment{{Name: "CUDA_VISIBLE_DEVICES", Value: "GPU-00000000-0000-0000-0000-000000000003,GPU-deadbeef"}}},
			want: []finding{
				{id: "env.cuda-visible-devices", status: doctor.Problem, summary: "this session's environment names GPU-deadbeef", fix: "[\"GPU-00000000-0000-0000-0000-000000000003\"]"},
				{id: "env.cuda-device-order", status: doctor.Skipped},
			},
		},
		{
			name:    "index pinning with PCI_BUS_ID order",
			machine: machine{fixture: "ubuntu2204-working", change: writeFile("etc/profile.d/gpu.sh", "export CUDA_VISIBLE_DEVICES=2,3\nexport CUDA_DEVICE_ORDER=PCI_BUS_ID\n")},
			want: []finding{
				{id: "env.cuda-visible-devices", status: doctor.OK},
				{id: "env.cuda-device-order", status: doctor.OK, evidence: []string{"/etc/profile.d/gpu.sh:2: CUDA_DEVICE_ORDER=PCI_BUS_ID"}},
			},
		},
		{
			name:    "LD_LIBRARY_PATH set system-wide",
			machine: machine{fixture: "tensorflow-no-cudnn"},
			want: []finding{
				{id: "env.ld-library-path", status: doctor.Warning, evidence: []string{"/etc/profile.d/cuda.sh:2: LD_LIBRARY_PATH=/usr/local/cuda/lib64"}},
			},
		},
		{
			name: "GPU busy, exclusive and MIG without instances",
			machine: machine{fixture: "ubuntu2204-working", nvml: dgx(func(devs []*server.Device) {
				devs[2].GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
					return []nvml.ProcessInfo{{Pid: 4242, UsedGpuMemory: 30 << 30}}, nvml.SUCCESS
				}
				devs[2].GetComputeModeFunc = func() (nvml.ComputeMode, nvml.Return) { return nvml.COMPUTEMODE_EXCLUSIVE_PROCESS, nvml.SUCCESS }
				devs[5].GetComputeModeFunc = func() (nvml.ComputeMode, nvml.Return) { return nvml.COMPUTEMODE_PROHIBITED, nvml.SUCCESS }
				devs[7].MigMode = nvml.DEVICE_MIG_ENABLE
			})},
			want: []finding{
				{id: "gpu.memory", status: doctor.Warning, summary: "GPU 2 (", evidence: []string{"GPU 2 (GPU-00000000-0000-0000-0000-000000000002): pid 4242 ? holds 30.0 GiB"}},
				{id: "gpu.compute-mode", status: doctor.Problem, summary: "GPU 2 is exclusive to pid 4242", evidence: []string{"GPU 5 (GPU-00000000-0000-0000-0000-000000000005): compute mode prohibited"}, fix: "device \"5\" {\n  compute_mode = \"default\"\n}"},
				{id: "gpu.mig", status: doctor.Problem, summary: "MIG is enabled on GPU 7 without instances", evidence: []string{"GPU 7 (GPU-00000000-0000-0000-0000-000000000007): MIG enabled, 0 MIG devices"}, fix: "nvidia-smi -i 7 -mig 0"},
			},
		},
		{
			name:    "GPU state without NVML",
			machine: machine{fixture: "ubuntu2204-working"},
			want:    []finding{{id: "gpu.state", status: doctor.Skipped}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := tt.machine.report(t)
			for _, w := range tt.want {
				assertFinding(t, r, w)
			}
		})
	}
}

// jax installs JAX with its CUDA plugin of a CUDA major into the working
// DGX's venv, as pip install 'jax[cudaN]' lays it out.
func jax(version, major string) func(*testing.T, string) {
	return func(t *testing.T, root string) {
		site := "opt/venv/lib/python3.10/site-packages/"
		for path, data := range map[string]string{
			"jax/version.py": "_version: str = \"" + version + "\"\n",
			"jax-" + version + ".dist-info/INSTALLER":                          "pip\n",
			"jaxlib/version.py":                                                "_version: str = \"" + version + "\"\n",
			"jaxlib-" + version + ".dist-info/INSTALLER":                       "pip\n",
			"jax_cuda" + major + "_plugin/version.py":                          "_version: str = \"" + version + "\"\n",
			"jax_cuda" + major + "_plugin-" + version + ".dist-info/INSTALLER": "pip\n",
			"jax_plugins/xla_cuda" + major + "/version.py":                     "_version: str = \"" + version + "\"\n",
		} {
			writeFile(site+path, data)(t, root)
		}
	}
}

func failing(ret nvml.Return) func() *server.Server {
	return func() *server.Server {
		s := hosttest.NVMLServer("dgxh100")
		s.InitFunc = func() nvml.Return { return ret }
		return s
	}
}

func assertFinding(t *testing.T, r *doctor.Report, w finding) {
	t.Helper()
	var c *doctor.Check
	for i := range r.Checks {
		if r.Checks[i].ID == w.id {
			c = &r.Checks[i]
		}
	}
	if c == nil {
		var ids []string
		for _, c := range r.Checks {
			ids = append(ids, c.ID)
		}
		t.Fatalf("no check %s among %s", w.id, strings.Join(ids, ", "))
	}
	dump, _ := json.MarshalIndent(c, "", "  ")
	if c.Status != w.status {
		t.Errorf("%s: status %s, want %s\n%s", w.id, c.Status, w.status, dump)
	}
	if !strings.Contains(c.Summary, w.summary) {
		t.Errorf("%s: summary %q lacks %q", w.id, c.Summary, w.summary)
	}
	for _, e := range w.evidence {
		found := false
		for _, have := range c.Evidence {
			if strings.Contains(have, e) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: no evidence containing %q\n%s", w.id, e, dump)
		}
	}
	if w.fix != "" {
		if c.Fix == nil {
			t.Errorf("%s: no fix, want one with %q", w.id, w.fix)
		} else if text := c.Fix.Text + "\n" + c.Fix.Spec + "\n" + strings.Join(c.Fix.Commands, "\n"); !strings.Contains(text, w.fix) {
			t.Errorf("%s: fix lacks %q:\n%s", w.id, w.fix, text)
		}
	}
	if c.Status == doctor.Problem && c.Fix == nil {
		t.Errorf("%s: a problem without a fix", w.id)
	}
}

// TestHealthy: a report with only warnings is healthy; one problem is
// not.
func TestHealthy(t *testing.T) {
	working := machine{fixture: "ubuntu2204-working", nvml: dgx(nil), user: ml, pythons: []string{"/opt/venv/bin/python"}}.report(t)
	if !working.Healthy || working.Counts.Problems != 0 {
		t.Errorf("working DGX: healthy %v, %d problems", working.Healthy, working.Counts.Problems)
		for _, c := range working.Checks {
			if c.Status == doctor.Problem {
				t.Logf("%s: %s", c.ID, c.Summary)
			}
		}
	}
	broken := machine{fixture: "nouveau"}.report(t)
	if broken.Healthy || broken.Counts.Problems == 0 {
		t.Errorf("nouveau: healthy %v, %d problems", broken.Healthy, broken.Counts.Problems)
	}
	warned := machine{fixture: "ubuntu2204-working", change: writeFile("etc/profile.d/gpu.sh", "export CUDA_VISIBLE_DEVICES=1\n")}.report(t)
	if !warned.Healthy || warned.Counts.Warnings == 0 {
		t.Errorf("index pinning: healthy %v with %d warnings, want healthy with warnings", warned.Healthy, warned.Counts.Warnings)
	}
}

// TestOrder: checks come in the expert's order, group after group.
func TestOrder(t *testing.T) {
	r := machine{fixture: "ubuntu2204-misconfigured", user: alice, pythons: []string{"/opt/venv/bin/python"}}.report(t)
	last := 0
	seen := map[int]bool{}
	for _, c := range r.Checks {
		if c.Group.Number < last {
			t.Errorf("%s (group %d) after group %d", c.ID, c.Group.Number, last)
		}
		last = c.Group.Number
		seen[last] = true
	}
	for g := 1; g <= 9; g++ {
		if !seen[g] {
			t.Errorf("group %d reported nothing", g)
		}
	}
}
