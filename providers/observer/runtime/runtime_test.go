package runtime_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
	"github.com/gpuenv/gpuenv/providers/observer/runtime"
)

func nodes(paths ...string) []facts.DeviceNode {
	var out []facts.DeviceNode
	for _, p := range paths {
		out = append(out, facts.DeviceNode{Path: p, Char: true, UID: 65534, GID: 65534, Mode: "0660"})
	}
	return out
}

func TestObserve(t *testing.T) {
	for _, tc := range []struct {
		name  string
		root  string
		obs   facts.Observation
		check func(t *testing.T, c facts.RuntimeContext)
	}{
		{"a host", "-- proc/1/comm --\nsystemd\n-- proc/self/uid_map --\n         0          0 4294967295\n", facts.Observation{},
			func(t *testing.T, c facts.RuntimeContext) {
				if c.Kind != "host" || c.Container != nil || c.UserNamespace != nil || c.Job != nil || c.WSL != nil {
					t.Errorf("%+v", c)
				}
			}},
		{"docker without GPUs, on an overlay root", `
-- .dockerenv --
-- proc/self/mountinfo --
545 500 0:45 / / rw,relatime master:280 - overlay overlay rw,lowerdir=/var/lib/docker/overlay2/l/X
546 545 0:48 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw
`, facts.Observation{},
			func(t *testing.T, c facts.RuntimeContext) {
				ct := c.Container
				if c.Kind != "container" || ct == nil || ct.Engine != "docker" || !ct.OverlayRoot || ct.DeviceNodes || ct.DriverLibraries {
					t.Errorf("%+v %+v", c, ct)
				}
			}},
		{"kubernetes pod given a GPU", `
-- proc/1/cgroup --
0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234.slice/cri-containerd-abc.scope
-- usr/lib/x86_64-linux-gnu/libcuda.so.1 --
-- proc/1/environ --
` + "CUDA_VERSION=12.4.1\x00NVIDIA_REQUIRE_CUDA=cuda>=12.4 brand=tesla,driver>=470\x00\n",
			facts.Observation{DeviceNodes: nodes("/dev/nvidiactl", "/dev/nvidia0")},
			func(t *testing.T, c facts.RuntimeContext) {
				ct := c.Container
				if ct == nil || ct.Engine != "kubernetes" || !ct.DeviceNodes || !ct.DriverLibraries || ct.CUDAVersion != "12.4.1" || !strings.HasPrefix(ct.RequireCUDA, "cuda>=12.4") {
					t.Errorf("%+v", ct)
				}
			}},
		{"rootless podman in a user namespace", `
-- run/.containerenv --
engine="podman-4.9.3"
rootless=1
-- proc/self/uid_map --
         0       1000          1
         1     100000      65536
`, facts.Observation{DeviceNodes: nodes("/dev/nvidia0", "/dev/nvidiactl")},
			func(t *testing.T, c facts.RuntimeContext) {
				if c.Container == nil || c.Container.Engine != "podman" || !c.Container.Rootless {
					t.Errorf("container %+v", c.Container)
				}
				u := c.UserNamespace
				if u == nil || u.OverflowUID != 65534 || !slices.Equal(u.UnmappedNodes, []string{"/dev/nvidia0", "/dev/nvidiactl"}) {
					t.Errorf("user namespace %+v", u)
				}
			}},
		{"a systemd-nspawn container booted with systemd", `
-- run/systemd/container --
systemd-nspawn
-- proc/1/comm --
systemd
-- proc/1/environ --
` + "container=systemd-nspawn\x00container_uuid=5a1c\x00",
			facts.Observation{},
			func(t *testing.T, c facts.RuntimeContext) {
				if c.Kind != "container" || c.Container == nil || c.Container.Engine != "systemd-nspawn" {
					t.Fatalf("%+v %+v", c, c.Container)
				}
				want := []facts.ContextEvidence{
					{File: runtime.SystemdContainer, Fact: "systemd-nspawn: the container manager's name, as systemd in the container writes it"},
					{File: runtime.InitEnviron, Fact: "container=systemd-nspawn in process 1's environment: it runs in a container"},
				}
				for _, w := range want {
					if !slices.Contains(c.Evidence, w) {
						t.Errorf("evidence %+v lacks %+v", c.Evidence, w)
					}
				}
			}},
		{"a systemd-nspawn container running a program as process 1", "-- proc/1/environ --\n" + "PATH=/usr/bin\x00container=systemd-nspawn\x00",
			facts.Observation{},
			func(t *testing.T, c facts.RuntimeContext) {
				if c.Container == nil || c.Container.Engine != "systemd-nspawn" {
					t.Errorf("%+v %+v", c, c.Container)
				}
			}},
		{"an LXC container under libvirt", "-- proc/1/environ --\n" + "container=lxc-libvirt\x00",
			facts.Observation{},
			func(t *testing.T, c facts.RuntimeContext) {
				if c.Container == nil || c.Container.Engine != "lxc" {
					t.Errorf("%+v", c.Container)
				}
			}},
		{"a manager's name that is no name", "-- run/systemd/container --\nno such\tname!\n",
			facts.Observation{},
			func(t *testing.T, c facts.RuntimeContext) {
				if c.Container == nil || c.Container.Engine != "unknown" {
					t.Errorf("%+v", c.Container)
				}
			}},
		{"a Slurm job whose device cgroup admits no GPU", `
-- proc/self/cgroup --
7:devices:/slurm/uid_1000/job_77/step_0
-- sys/fs/cgroup/devices/slurm/uid_1000/job_77/step_0/devices.list --
c 195:255 rw
c 508:* rw
-- etc/slurm/gres.conf --
# two GPUs
Name=gpu File=/dev/nvidia[0-1]
`, facts.Observation{},
			func(t *testing.T, c facts.RuntimeContext) {
				j := c.Job
				if j == nil || j.ID != "77" || len(j.GPUs) != 0 || !j.Constrained || len(j.NodeGPUs) != 1 {
					t.Errorf("%+v", j)
				}
			}},
		{"a Slurm job given a GPU", `
-- proc/self/environ --
` + "SLURM_JOB_ID=9\x00SLURM_JOB_GPUS=3\x00\n", facts.Observation{},
			func(t *testing.T, c facts.RuntimeContext) {
				if j := c.Job; j == nil || !slices.Equal(j.GPUs, []string{"3"}) || j.Constrained {
					t.Errorf("%+v", j)
				}
			}},
		{"WSL with a Linux driver inside", `
-- proc/sys/kernel/osrelease --
5.15.167.4-microsoft-standard-WSL2
-- usr/lib/wsl/lib/libcuda.so.1 --
-- usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15 --
-- .manifest --
chardev /dev/dxg 10 125
symlink /usr/lib/x86_64-linux-gnu/libcuda.so.1 libcuda.so.550.54.15
symlink /usr/lib/x86_64-linux-gnu/libcuda.so /usr/lib/wsl/lib/libcuda.so.1
`, facts.Observation{},
			func(t *testing.T, c facts.RuntimeContext) {
				w := c.WSL
				if c.Kind != "wsl" || w == nil || !w.DXG || len(w.Libraries) != 1 ||
					!slices.Equal(w.LinuxDriver, []string{"/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15"}) {
					t.Errorf("%+v %+v", c, w)
				}
			}},
		{"suspend support off", `
-- sys/power/state --
freeze mem disk
-- proc/driver/nvidia/params --
PreserveVideoMemoryAllocations: 0
-- etc/systemd/system/systemd-suspend.service.wants/nvidia-suspend.service --
`, facts.Observation{},
			func(t *testing.T, c facts.RuntimeContext) {
				s := c.Suspend
				if s == nil || !s.CanSuspend || s.PreserveVideoMemory != "0" || !slices.Equal(s.Services, []string{"nvidia-suspend.service"}) {
					t.Errorf("%+v", s)
				}
			}},
		{"suspend support from modprobe configuration", `
-- sys/power/state --
mem
-- etc/modprobe.d/nvidia-power.conf --
options nvidia NVreg_PreserveVideoMemoryAllocations=1
`, facts.Observation{},
			func(t *testing.T, c facts.RuntimeContext) {
				if s := c.Suspend; s == nil || s.PreserveVideoMemory != "1" {
					t.Errorf("%+v", s)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := hosttest.Host(t, tc.root)
			obs := tc.obs
			c := runtime.Observe(h, &obs)
			tc.check(t, c)
			for _, e := range c.Evidence {
				if e.File == "" || e.Fact == "" {
					t.Errorf("evidence without its file or fact: %+v", e)
				}
			}
		})
	}
}
