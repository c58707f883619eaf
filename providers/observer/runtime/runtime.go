// Package runtime tells, from a root's files, where programs on it run: a
// bare host, a container (and whether it was given the GPUs), a user
// namespace, a batch scheduler's job, or WSL, and how the driver handles
// suspend. Doctor judges every other finding in that light: a container
// started without GPUs needs --gpus, not a driver install.
//
// /proc/self is read as the root lays it out: on "/", gpuenv's own
// process, which runs in the session (and job) being diagnosed; in a
// fixture root, the files recorded there.
package runtime

import (
	"bytes"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/spec/lazyregexp"
)

// Files read.
const (
	DockerEnv    = "/.dockerenv"
	ContainerEnv = "/run/.containerenv"
	SelfCgroup   = "/proc/self/cgroup"
	InitCgroup   = "/proc/1/cgroup"
	MountInfo    = "/proc/self/mountinfo"
	UIDMap       = "/proc/self/uid_map"
	OverflowUID  = "/proc/sys/kernel/overflowuid"
	SelfEnviron  = "/proc/self/environ"
	InitEnviron  = "/proc/1/environ"
	// SystemdContainer holds the container manager's name, as systemd
	// running in a container (systemd-nspawn's, or another manager's that
	// follows systemd's container interface) writes it.
	SystemdContainer = "/run/systemd/container"
	OSRelease        = "/proc/sys/kernel/osrelease"
	DXG              = "/dev/dxg"
	WSLLib           = "/usr/lib/wsl/lib"
	DriverParams     = "/proc/driver/nvidia/params"
	PowerState       = "/sys/power/state"
	// SuspendCount counts the successful suspends since boot: each was
	// followed by a resume.
	SuspendCount = "/sys/power/suspend_stats/success"
)

// gresFiles are Slurm's generic-resource configurations.
var gresFiles = []string{"/etc/slurm/gres.conf", "/etc/slurm-llnl/gres.conf"}

// suspendUnits are the driver's units and the targets that want them.
var suspendUnits = [][2]string{
	{"systemd-suspend.service.wants", "nvidia-suspend.service"},
	{"systemd-hibernate.service.wants", "nvidia-hibernate.service"},
	{"systemd-suspend.service.wants", "nvidia-resume.service"},
	{"systemd-hibernate.service.wants", "nvidia-resume.service"},
}

var (
	jobID = lazyregexp.New(`/job_(\d+)(?:/|$)`)
	// gpuDevice is a cgroup v1 rule that admits a /dev/nvidiaN node.
	gpuDevice = lazyregexp.New(`c 195:([0-9]|[1-9][0-9]|1[0-9][0-9]|2[0-4][0-9]|25[0-4]) `)
	preserve  = lazyregexp.New(`NVreg_PreserveVideoMemoryAllocations=(\d)`)
)

type observer struct {
	h   *host.Host
	obs *facts.Observation
	c   facts.RuntimeContext
}

func (o *observer) saw(file, format string, args ...any) {
	o.c.Evidence = append(o.c.Evidence, facts.ContextEvidence{File: file, Fact: fmt.Sprintf(format, args...)})
}

func (o *observer) read(p string) ([]byte, bool) {
	data, err := o.h.ReadFile(p)
	return data, err == nil
}

func (o *observer) exists(p string) bool {
	_, err := o.h.Lstat(p)
	return err == nil
}

// Observe tells the runtime context of obs's root; obs must hold the
// device nodes, driver, toolkits and kernel release already.
func Observe(h *host.Host, obs *facts.Observation) facts.RuntimeContext {
	o := &observer{h: h, obs: obs, c: facts.RuntimeContext{Kind: "host", Evidence: []facts.ContextEvidence{}}}
	env := o.environ(SelfEnviron)
	initEnv := o.environ(InitEnviron)
	o.wsl()
	o.container(initEnv, env)
	o.userNamespace()
	o.job(env)
	o.suspend()
	return o.c
}

// environ reads a NUL-separated environment file.
func (o *observer) environ(p string) map[string]string {
	data, ok := o.read(p)
	if !ok {
		return nil
	}
	out := map[string]string{}
	for _, kv := range bytes.Split(data, []byte{0}) {
		if k, v, ok := strings.Cut(strings.TrimSpace(string(kv)), "="); ok {
			out[k] = v
		}
	}
	return out
}

func (o *observer) wsl() {
	rel, _ := o.read(OSRelease)
	r := strings.TrimSpace(string(rel))
	isWSL := strings.Contains(strings.ToLower(r), "microsoft") || strings.Contains(r, "WSL")
	dxg := o.exists(DXG)
	libs, _ := o.h.Glob(path.Join(WSLLib, "libcuda.so*"))
	if !isWSL && !dxg && len(libs) == 0 {
		return
	}
	w := &facts.WSL{DXG: dxg, Libraries: libs}
	if isWSL {
		o.saw(OSRelease, "kernel %s is WSL's", r)
	}
	if dxg {
		o.saw(DXG, "exists: the Windows GPU's paravirtual device")
	} else {
		o.saw(DXG, "missing")
	}
	for _, l := range libs {
		o.saw(l, "the Windows driver's CUDA library")
	}
	// A Linux driver installed inside WSL puts its own libcuda where the
	// loader finds it before /usr/lib/wsl/lib.
	for _, dir := range []string{"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib"} {
		m, _ := o.h.Glob(path.Join(dir, "libcuda.so*"))
		for _, f := range m {
			real, err := o.h.EvalSymlinks(f)
			if err != nil || strings.HasPrefix(real, WSLLib+"/") || strings.Contains(f, "/stubs/") {
				continue
			}
			w.LinuxDriver = append(w.LinuxDriver, f)
			o.saw(f, "a Linux driver's libcuda (leads to %s)", real)
		}
	}
	o.c.WSL = w
	o.c.Kind = "wsl"
}

func (o *observer) container(initEnv, env map[string]string) {
	var ct facts.Container
	found := false
	if o.exists(DockerEnv) {
		found, ct.Engine = true, "docker"
		o.saw(DockerEnv, "exists: Docker made this container")
	}
	if data, ok := o.read(ContainerEnv); ok {
		found, ct.Engine = true, "podman"
		o.saw(ContainerEnv, "exists: Podman made this container")
		for _, line := range strings.Split(string(data), "\n") {
			k, v, _ := strings.Cut(strings.TrimSpace(line), "=")
			v = strings.Trim(v, `"`)
			switch k {
			case "engine":
				o.saw(ContainerEnv, "engine %s", v)
			case "rootless":
				ct.Rootless = v == "1"
				if ct.Rootless {
					o.saw(ContainerEnv, "rootless")
				}
			}
		}
	}
	for _, f := range []string{InitCgroup, SelfCgroup} {
		data, ok := o.read(f)
		if !ok {
			continue
		}
		s := string(data)
		engine := ""
		switch {
		case strings.Contains(s, "kubepods"):
			engine = "kubernetes"
		case strings.Contains(s, "/docker/") || strings.Contains(s, "docker-"):
			engine = "docker"
		case strings.Contains(s, "libpod"):
			engine = "podman"
		case strings.Contains(s, "/lxc/") || strings.Contains(s, "lxc.payload"):
			engine = "lxc"
		case strings.Contains(s, "containerd"):
			engine = "containerd"
		}
		if engine != "" {
			if !found || ct.Engine == "docker" && engine == "kubernetes" {
				ct.Engine = engine
			}
			found = true
			o.saw(f, "cgroup path of a %s container", engine)
			break
		}
	}
	// systemd-nspawn, and other managers that follow systemd's container
	// interface, put container=NAME in process 1's environment, and
	// systemd in the container writes NAME to /run/systemd/container.
	manager := func(file, name, fact string) {
		if name == "" {
			return
		}
		if !managerName.MatchString(name) {
			name = "unknown"
		}
		if !found || ct.Engine == "unknown" {
			ct.Engine = engineOf(name)
		}
		found = true
		o.saw(file, fact, name)
	}
	if data, ok := o.read(SystemdContainer); ok {
		manager(SystemdContainer, strings.TrimSpace(string(data)), "%s: the container manager's name, as systemd in the container writes it")
	}
	manager(InitEnviron, initEnv["container"], "container=%s in process 1's environment: it runs in a container")
	if data, ok := o.read(MountInfo); ok && rootIsOverlay(data) {
		ct.OverlayRoot = true
		o.saw(MountInfo, "/ is an overlay mount")
	}
	if !found {
		return
	}
	ct.DeviceNodes = slices.ContainsFunc(o.obs.DeviceNodes, func(n facts.DeviceNode) bool {
		return n.Path == "/dev/nvidiactl" || strings.HasPrefix(n.Path, "/dev/nvidia") && n.Path[len(n.Path)-1] >= '0' && n.Path[len(n.Path)-1] <= '9'
	})
	// libcuda is what CUDA programs need; the toolkit mounts it only
	// with the compute capability (libnvidia-ml alone is "utility").
	ct.DriverLibraries = o.libcuda()
	if ct.DeviceNodes {
		o.saw("/dev", "NVIDIA device nodes present")
	} else {
		o.saw("/dev", "no /dev/nvidiactl or /dev/nvidiaN")
	}
	if ct.DriverLibraries {
		o.saw("/usr/lib", "the driver's libcuda.so.1 is mounted in")
	} else {
		o.saw("/usr/lib", "no libcuda.so.1")
	}
	for _, e := range []map[string]string{env, initEnv} {
		if v := e["CUDA_VERSION"]; v != "" && ct.CUDAVersion == "" {
			ct.CUDAVersion = v
			o.saw("CUDA_VERSION", "%s (the image's)", v)
		}
		if v := e["NVIDIA_REQUIRE_CUDA"]; v != "" && ct.RequireCUDA == "" {
			ct.RequireCUDA = v
			o.saw("NVIDIA_REQUIRE_CUDA", "%s", v)
		}
	}
	if ct.CUDAVersion == "" {
		for _, tk := range o.obs.CUDA.Toolkits {
			if tk.Path == o.obs.CUDA.Default || len(o.obs.CUDA.Toolkits) == 1 {
				ct.CUDAVersion = tk.Version
			}
		}
	}
	if o.c.Kind == "host" {
		o.c.Kind = "container"
	}
	o.c.Container = &ct
}

// managerName is what a container manager may call itself in
// container= and /run/systemd/container.
var managerName = lazyregexp.New(`^[a-z0-9][a-z0-9._-]{0,31}$`)

// engineOf is the engine a container manager's name says.
func engineOf(name string) string {
	switch {
	case strings.HasPrefix(name, "lxc"):
		// lxc, lxc-libvirt
		return "lxc"
	case name == "oci":
		// runc and crun say only that an OCI runtime made it.
		return "unknown"
	}
	return name
}

// libcuda reports whether the driver's libcuda.so.1 is in a library
// directory (the container toolkit mounts it with libnvidia-ml).
func (o *observer) libcuda() bool {
	for _, d := range []string{"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/nvidia/lib64"} {
		if o.exists(path.Join(d, "libcuda.so.1")) {
			return true
		}
	}
	return false
}

// rootIsOverlay reports whether mountinfo's mount at / is an overlay.
func rootIsOverlay(data []byte) bool {
	for _, line := range strings.Split(string(data), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f := strings.Fields(pre)
		if len(f) >= 5 && f[4] == "/" && strings.HasPrefix(post, "overlay") {
			return true
		}
	}
	return false
}

func (o *observer) userNamespace() {
	data, ok := o.read(UIDMap)
	if !ok {
		return
	}
	first := strings.TrimSpace(strings.SplitN(string(data), "\n", 2)[0])
	if f := strings.Fields(first); len(f) == 3 && f[0] == "0" && f[1] == "0" && f[2] == "4294967295" {
		return
	}
	u := &facts.UserNamespace{UIDMap: first, OverflowUID: 65534}
	if d, ok := o.read(OverflowUID); ok {
		if n, err := strconv.ParseUint(strings.TrimSpace(string(d)), 10, 32); err == nil {
			u.OverflowUID = uint32(n)
		}
	}
	o.saw(UIDMap, "%s: a user namespace", first)
	for _, n := range o.obs.DeviceNodes {
		if n.UID == u.OverflowUID || n.GID == u.OverflowUID {
			u.UnmappedNodes = append(u.UnmappedNodes, n.Path)
		}
	}
	if len(u.UnmappedNodes) > 0 {
		o.saw("/dev", "%s owned by the overflow id %d: the host's owner is not mapped", strings.Join(u.UnmappedNodes, ", "), u.OverflowUID)
	}
	o.c.UserNamespace = u
}

func (o *observer) job(env map[string]string) {
	id := env["SLURM_JOB_ID"]
	from := SelfEnviron
	data, _ := o.read(SelfCgroup)
	cg := string(data)
	if id == "" {
		if m := jobID.FindStringSubmatch(cg); m != nil && strings.Contains(cg, "slurm") {
			id, from = m[1], SelfCgroup
		}
	}
	if id == "" {
		return
	}
	j := &facts.BatchJob{Scheduler: "slurm", ID: id, GPUs: []string{}}
	o.saw(from, "Slurm job %s", id)
	for _, k := range []string{"SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "GPU_DEVICE_ORDINAL"} {
		if v := env[k]; v != "" {
			j.GPUs = strings.Split(v, ",")
			o.saw(SelfEnviron, "%s=%s", k, v)
			break
		}
	}
	if len(j.GPUs) == 0 {
		o.saw(SelfEnviron, "no SLURM_JOB_GPUS, SLURM_STEP_GPUS or GPU_DEVICE_ORDINAL: the job was allocated no GPU")
	}
	for _, f := range gresFiles {
		data, ok := o.read(f)
		if !ok {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			line = strings.TrimSpace(line)
			if strings.HasPrefix(line, "#") || !strings.Contains(strings.ToLower(line), "name=gpu") {
				continue
			}
			j.NodeGPUs = append(j.NodeGPUs, line)
			o.saw(f, "%s", line)
		}
	}
	// Cgroup v1: the job's device whitelist.
	for _, line := range strings.Split(cg, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || !strings.Contains(parts[1], "devices") {
			continue
		}
		list := path.Join("/sys/fs/cgroup/devices", parts[2], "devices.list")
		dl, ok := o.read(list)
		if !ok {
			continue
		}
		allowed := string(dl)
		if !strings.Contains(allowed, "a *:* rwm") && !gpuDevice.MatchString(allowed) {
			j.Constrained = true
			o.saw(list, "no /dev/nvidiaN (char 195:N) is allowed")
		}
	}
	o.c.Job = j
}

func (o *observer) suspend() {
	data, ok := o.read(PowerState)
	if !ok {
		return
	}
	s := &facts.Suspend{CanSuspend: slices.Contains(strings.Fields(string(data)), "mem")}
	if !s.CanSuspend {
		return
	}
	o.saw(PowerState, "%s", strings.TrimSpace(string(data)))
	if p, ok := o.read(DriverParams); ok {
		for _, line := range strings.Split(string(p), "\n") {
			if v, ok := strings.CutPrefix(line, "PreserveVideoMemoryAllocations:"); ok {
				s.PreserveVideoMemory = strings.TrimSpace(v)
				o.saw(DriverParams, "PreserveVideoMemoryAllocations: %s", s.PreserveVideoMemory)
			}
		}
	}
	if s.PreserveVideoMemory == "" {
		confs, _ := o.h.Glob("/etc/modprobe.d/*.conf")
		more, _ := o.h.Glob("/usr/lib/modprobe.d/*.conf")
		for _, f := range append(confs, more...) {
			c, ok := o.read(f)
			if !ok {
				continue
			}
			if m := preserve.FindSubmatch(c); m != nil {
				s.PreserveVideoMemory = string(m[1])
				o.saw(f, "NVreg_PreserveVideoMemoryAllocations=%s", m[1])
			}
		}
	}
	for _, u := range suspendUnits {
		for _, base := range []string{"/etc/systemd/system", "/usr/lib/systemd/system"} {
			p := path.Join(base, u[0], u[1])
			if o.exists(p) && !slices.Contains(s.Services, u[1]) {
				s.Services = append(s.Services, u[1])
				o.saw(p, "enabled")
			}
		}
	}
	if data, ok := o.read(SuspendCount); ok {
		if n, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && n > 0 {
			s.Resumes = n
			o.saw(SuspendCount, "%d", n)
		}
	}
	o.c.Suspend = s
}
