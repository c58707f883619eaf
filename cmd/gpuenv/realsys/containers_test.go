//go:build realsystem

package realsys

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pelletier/go-toml/v2"
	"golang.org/x/sys/unix"

	"github.com/gpuenv/gpuenv/apply"
	"github.com/gpuenv/gpuenv/providers/containers"
	"github.com/gpuenv/gpuenv/providers/host/cdi"
)

// Containers adds Debian 12's engines (docker.io 20.10, containerd 1.6,
// podman 4.3) and the distribution's driver libraries, whose dpkg file
// lists the CDI spec is made from; busybox-static is the program of the
// containers podman starts.
var Containers = &Layer{Name: "bookworm-containers", Parent: Base, Include: []string{
	"docker.io", "containerd", "podman", "libcuda1", "libnvidia-ml1", "busybox-static",
}}

// toolkitRepo is laid out like NVIDIA's libnvidia-container repository,
// whose apt line is "deb … https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH) /".
const (
	toolkitRepo    = "/srv/libnvidia-container/stable/deb/amd64"
	toolkitKeyring = "/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg"
	toolkitVersion = "1.17.8-1"
)

// toolkitDebs are the toolkit's four packages at version, related as
// NVIDIA's are, with small scripts for the programs gpuenv and the
// engines name. The hook records each call, so that the test sees the
// engine run the hooks the CDI spec names.
func toolkitDebs(version string) []Deb {
	script := func(body string) string { return "#!/bin/sh\n" + body + "\n" }
	return []Deb{{
		Name: "libnvidia-container1", Version: version,
		Files: map[string]string{"/usr/lib/x86_64-linux-gnu/libnvidia-container.so." + strings.TrimSuffix(version, "-1"): "test library\n"},
	}, {
		Name: "libnvidia-container-tools", Version: version,
		Depends: "libnvidia-container1 (>= " + version + ")",
		Files:   map[string]string{"/usr/bin/nvidia-container-cli": script(`echo "nvidia-container-cli $*"`)},
	}, {
		Name: "nvidia-container-toolkit-base", Version: version,
		Files: map[string]string{
			"/usr/bin/nvidia-ctk":      script(`echo "NVIDIA Container Toolkit CLI version ` + version + `"`),
			"/usr/bin/nvidia-cdi-hook": script(`echo "$*" >> /var/log/nvidia-cdi-hook.log`),
			// Docker's and containerd's nvidia runtime: runc, as the
			// real one is when CDI has already set the container up.
			"/usr/bin/nvidia-container-runtime": script(`exec runc "$@"`),
		},
	}, {
		Name: "nvidia-container-toolkit", Version: version,
		Depends: "nvidia-container-toolkit-base (= " + version + "), libnvidia-container-tools (>= " + version + ")",
		Files:   map[string]string{"/usr/bin/nvidia-container-runtime-hook": script(`exit 0`)},
	}}
}

// The engines' files as an administrator left them: settings gpuenv must
// keep, and a CDI spec of the driver before the upgrade, which names
// files that are gone.
const (
	origDaemonJSON = `{
  "log-level": "warn",
  "registry-mirrors": ["https://mirror.gpuenv.invalid"],
  "max-concurrent-downloads": 7
}
`
	origContainerdExtra = `
oom_score = -999

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
    SystemdCgroup = true
`
	staleCDI = `cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
- name: all
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
containerEdits:
  mounts:
  - hostPath: /usr/lib/x86_64-linux-gnu/nvidia/current/libcuda.so.535.261.03
    containerPath: /usr/lib/x86_64-linux-gnu/nvidia/current/libcuda.so.535.261.03
    options: [ro, nosuid, nodev, bind]
`
)

const toolkitSpec = `repository "nvidia-container-toolkit" {
  url     = "file://` + toolkitRepo + `/"
  keyring = "` + toolkitKeyring + `"
}

container_toolkit {
  version = "1.17.*"
  engines = ["docker", "containerd", "podman"]
  cdi     = true
}
`

// Scenario: the toolkit from a signed local repository laid out like
// NVIDIA's, Docker's and containerd's configurations merged, the CDI spec
// written from the driver's files, each checked by the engine's own
// reader; rollback brings every file back byte for byte.
func TestContainerToolkitApplyRollback(t *testing.T) {
	r := h.NewRoot(t, Containers, Mounts{Proc: true, Sys: true})
	r.BuildRepository(toolkitRepo, toolkitDebs(toolkitVersion))
	r.SignRepository(toolkitRepo, toolkitKeyring)
	gpu := r.fakeGPU()
	driver := strings.TrimSuffix(r.Dpkg()["libcuda1"].Version, "-0+deb12u1")

	r.WriteFile(containers.DockerConfig, origDaemonJSON)
	r.MustSh("cat /etc/containerd/config.toml - > /tmp/config.toml <<'EOF'\n" + origContainerdExtra + "EOF\nmv /tmp/config.toml /etc/containerd/config.toml")
	r.WriteFile(cdi.CDISpecPath, staleCDI)
	originals := map[string][]byte{}
	for _, p := range []string{containers.DockerConfig, containers.ContainerdConfig, cdi.CDISpecPath} {
		originals[p] = r.readFile(p)
	}
	dumpBefore := r.containerdDump()

	r.WriteFile("/root/ctk/gpuenv.hcl", toolkitSpec)
	res := r.Gpuenv("plan", "--detailed-exitcode", "/root/ctk")
	if res.Code != 2 {
		t.Fatalf("plan: want changes (exit 2); %s", res)
	}
	// apt learns of the repository's packages only once apply has
	// written its source.
	// The CDI spec names the hooks of the toolkit apt then picks: apply
	// makes it after the toolkit step.
	for _, want := range []string{"nvidia-container-toolkit=(known after apply)", containers.DockerConfig, containers.ContainerdConfig, cdi.CDISpecPath,
		"write " + cdi.CDISpecPath + " (mode 0644, content made at apply from the host's files)"} {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("plan does not name %s:\n%s", want, res.Stdout)
		}
	}
	// What plan predicted of the containers, to judge doctor's rules on,
	// is what apply leaves: the engines' files, the CDI spec in use and
	// the driver it names.
	p, predicted, after := r.applyPredicted("/root/ctk")
	checkPredictedPackages(t, p, predicted, after)
	checkPredictedContainers(t, predicted, after)
	// The journal holds the spec apply made, byte for byte as written.
	if got, want := r.journaledContent(cdi.CDISpecPath), string(r.readFile(cdi.CDISpecPath)); got != want {
		t.Errorf("the journal records for %s:\n%s\nthe file holds:\n%s", cdi.CDISpecPath, got, want)
	}
	pkgs := r.Dpkg()
	for _, name := range containers.ToolkitPackages {
		if p := pkgs[name]; p.Version != toolkitVersion || p.Status != "installed" {
			t.Errorf("dpkg: %s %+v, want %s installed", name, p, toolkitVersion)
		}
	}
	// The device nodes have their /dev/char links, and NVIDIA's udev rule
	// makes them again whenever the driver loads.
	for link, node := range map[string]string{"/dev/char/195:0": gpu, "/dev/char/195:255": "/dev/nvidiactl"} {
		if got, err := os.Readlink(r.Path(link)); err != nil || got != node {
			t.Errorf("%s -> %q (%v), want %s", link, got, err, node)
		}
	}
	if got := string(r.readFile(containers.DevCharRulePath)); got != containers.DevCharRule {
		t.Errorf("%s holds:\n%s", containers.DevCharRulePath, got)
	}

	// containerd reads the merged file: the nvidia runtime is there with
	// runc's options, and every setting the old file made is unchanged.
	dumpAfter := r.containerdDump()
	for k, v := range dumpBefore {
		if !reflect.DeepEqual(dumpAfter[k], v) {
			t.Errorf("containerd config dump: %s = %v after apply, was %v", k, dumpAfter[k], v)
		}
	}
	const nvidia = `plugins.io\.containerd\.grpc\.v1\.cri.containerd.runtimes.nvidia.`
	for k, want := range map[string]any{
		nvidia + "runtime_type":          "io.containerd.runc.v2",
		nvidia + "options.BinaryName":    containers.RuntimeBinary,
		nvidia + "options.SystemdCgroup": true,
	} {
		if got := dumpAfter[k]; !reflect.DeepEqual(got, want) {
			t.Errorf("containerd config dump: %s = %v, want %v", k, got, want)
		}
	}

	r.mountCgroups()
	// dockerd 20.10 has no --validate: the daemon itself starts with
	// the merged file and reports the runtimes and mirrors it read.
	info := r.dockerInfo("{{json .Runtimes.nvidia}} {{.RegistryConfig.Mirrors}}")
	if want := `{"path":"` + containers.RuntimeBinary + `"} [https://mirror.gpuenv.invalid/]`; info != want {
		t.Errorf("docker info: %q, want %q", info, want)
	}

	// podman reads the CDI spec gpuenv wrote and gives the container the
	// GPU's device nodes and the driver's library, running the hooks of
	// toolkit 1.17.8.
	out := r.podmanRun("--device", cdi.CDIKind+"=all", "--rootfs", "/srv/rootfs",
		"/bin/busybox", "ls", "-l", gpu, "/dev/nvidiactl", "/usr/lib/x86_64-linux-gnu/nvidia/current/libcuda.so."+driver)
	for path, want := range map[string]string{gpu: "crw-rw-rw- 195,0", "/dev/nvidiactl": "crw-rw-rw- 195,255", "/usr/lib/x86_64-linux-gnu/nvidia/current/libcuda.so." + driver: "-rw-r--r--"} {
		if got := lsLine(out, path); got != want {
			t.Errorf("podman run with the CDI device: %s is %q, want %q; ls printed\n%s", path, got, want, out)
		}
	}
	// Without the device, the same container has none of it: the nodes
	// came from the spec.
	if out := r.podmanRun("--rootfs", "/srv/rootfs", "/bin/busybox", "ls", "/dev"); strings.Contains(out, "nvidia") {
		t.Errorf("a container without the CDI device sees the GPU:\n%s", out)
	}
	hooks := string(r.readFile("/var/log/nvidia-cdi-hook.log"))
	for _, want := range []string{"create-symlinks --link libcuda.so.1::", "enable-cuda-compat --host-driver-version=" + driver, "update-ldcache --folder /usr/lib/x86_64-linux-gnu --folder /usr/lib/x86_64-linux-gnu/nvidia/current"} {
		if !strings.Contains(hooks, want) {
			t.Errorf("the engine did not run the hook %q; the hook saw:\n%s", want, hooks)
		}
	}

	obs := r.Observe()
	c := obs.Containers
	if c.CDIInUse != cdi.CDISpecPath {
		t.Errorf("observe: engines use %q, want %s", c.CDIInUse, cdi.CDISpecPath)
	}
	for _, s := range c.CDISpecs {
		if s.Path == cdi.CDISpecPath && (s.DriverVersion != driver || len(s.Missing) > 0 || !slices.Equal(s.Hooks, []string{"create-symlinks", "enable-cuda-compat", "update-ldcache"})) {
			t.Errorf("observe: the spec names driver %s, hooks %q, missing %v; want %s, toolkit 1.17.8's three hooks, nothing missing", s.DriverVersion, s.Hooks, s.Missing, driver)
		}
	}
	for _, e := range c.Engines {
		if (e.Engine == "docker" || e.Engine == "containerd") && !e.NVIDIARuntime {
			t.Errorf("observe: %s has no nvidia runtime: %+v", e.Engine, e)
		}
	}
	if res := r.Gpuenv("plan", "--detailed-exitcode", "/root/ctk"); res.Code != 0 {
		t.Errorf("plan after apply: want no changes; %s", res)
	}

	// absent = true: the engines stop naming the runtime, keeping what
	// else they had, and then the packages go; rolling that back brings
	// the applied files and the packages back.
	applied := map[string][]byte{}
	for p := range originals {
		applied[p] = r.readFile(p)
	}
	r.WriteFile("/root/ctk/gpuenv.hcl", strings.Replace(toolkitSpec, `version = "1.17.*"
  engines = ["docker", "containerd", "podman"]
  cdi     = true`, "absent = true", 1))
	if res := r.Gpuenv("apply", "--auto-approve", "/root/ctk"); res.Code != 0 {
		t.Fatalf("apply of absent = true: %s", res)
	}
	dumpAbsent := r.containerdDump()
	if !reflect.DeepEqual(dumpAbsent, dumpBefore) {
		for k, v := range dumpAbsent {
			if !reflect.DeepEqual(dumpBefore[k], v) {
				t.Errorf("containerd config dump after absent = true: %s = %v, before the toolkit %v", k, v, dumpBefore[k])
			}
		}
	}
	var orig, now map[string]any
	if json.Unmarshal(originals[containers.DockerConfig], &orig) != nil || json.Unmarshal(r.readFile(containers.DockerConfig), &now) != nil || !reflect.DeepEqual(orig, now) {
		t.Errorf("daemon.json after absent = true:\n%s\nwant the settings of\n%s", r.readFile(containers.DockerConfig), originals[containers.DockerConfig])
	}
	for name, p := range r.Dpkg() {
		if slices.Contains(containers.ToolkitPackages, name) && p.Status == "installed" {
			t.Errorf("dpkg after absent = true: %s %+v", name, p)
		}
	}
	r.rollbackRestores(applied, "what apply wrote")
	for _, name := range containers.ToolkitPackages {
		if p := r.Dpkg()[name]; p.Version != toolkitVersion || p.Status != "installed" {
			t.Errorf("dpkg after rolling back absent = true: %s %+v", name, p)
		}
	}

	r.rollbackRestores(originals, "the original")
	for _, p := range []string{"/dev/char/195:0", "/dev/char/195:255", containers.DevCharRulePath} {
		if _, err := os.Lstat(r.Path(p)); err == nil {
			t.Errorf("%s is still there after rollback", p)
		}
	}
	pkgs = r.Dpkg()
	for _, name := range containers.ToolkitPackages {
		if p, ok := pkgs[name]; ok && p.Status != "not-installed" && p.Status != "config-files" {
			t.Errorf("dpkg after rollback: %s %+v, want it gone", name, p)
		}
	}
}

// rollbackRestores rolls the newest apply back and checks that each file
// holds exactly the bytes given (what, in a failure's words).
func (r *Root) rollbackRestores(files map[string][]byte, what string) {
	r.t.Helper()
	if res := r.Gpuenv("rollback", "--auto-approve"); res.Code != 0 {
		r.t.Fatalf("rollback: %s", res)
	}
	for p, want := range files {
		if got := r.readFile(p); string(got) != string(want) {
			r.t.Errorf("%s after rollback:\n%s\nwant %s:\n%s", p, got, what, want)
		}
	}
}

// fakeGPU gives the root one GPU as the driver shows it: the /proc file
// gpuenv reads the GPU's minor number and UUID from (on a tmpfs over the
// root's /proc/driver, so that the machine's stays untouched) and its
// device nodes, made in the root's own /dev. It returns the GPU's node.
func (r *Root) fakeGPU() string {
	r.t.Helper()
	r.mount("tmpfs", r.Path("/proc/driver"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0755")
	r.WriteFile("/proc/driver/nvidia/gpus/0000:01:00.0/information",
		"Model: \t\t NVIDIA A100-SXM4-40GB\nIRQ:   \t\t 42\nGPU UUID: \t GPU-5d5a1ee2-2f2a-4b33-9ac3-5b3e8f1b2c4d\nDevice Minor: \t 0\nBus Location: \t 0000:01:00.0\n")
	for node, minor := range map[string]uint32{"/dev/nvidia0": 0, "/dev/nvidiactl": 255} {
		if err := unix.Mknod(r.Path(node), unix.S_IFCHR|0o666, int(unix.Mkdev(195, minor))); err != nil {
			r.t.Fatalf("mknod %s: %v", node, err)
		}
	}
	return "/dev/nvidia0"
}

// containerdDump runs containerd's own reader over its configuration and
// returns every setting it prints, by dotted path.
func (r *Root) containerdDump() map[string]any {
	r.t.Helper()
	var doc map[string]any
	if err := toml.Unmarshal([]byte(r.MustSh("containerd config dump")), &doc); err != nil {
		r.t.Fatalf("containerd config dump printed no TOML: %v", err)
	}
	out := map[string]any{}
	flatten("", doc, out)
	return out
}

func flatten(prefix string, v any, out map[string]any) {
	m, ok := v.(map[string]any)
	if !ok {
		out[prefix] = v
		return
	}
	for k, sub := range m {
		if prefix != "" {
			k = prefix + "." + strings.ReplaceAll(k, ".", `\.`)
		} else {
			k = strings.ReplaceAll(k, ".", `\.`)
		}
		flatten(k, sub, out)
	}
}

// mountCgroups gives the root the cgroups the engines need, mounted the
// way the machine has them: the unified hierarchy, or the devices
// controller of version 1, which dockerd refuses to start without.
func (r *Root) mountCgroups() {
	r.t.Helper()
	cg := r.Path("/sys/fs/cgroup")
	var st unix.Statfs_t
	if err := unix.Statfs("/sys/fs/cgroup", &st); err == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
		r.mount("cgroup2", cg, "cgroup2", 0, "")
		return
	}
	r.mount("tmpfs", cg, "tmpfs", 0, "mode=0755")
	if err := os.Mkdir(filepath.Join(cg, "devices"), 0o755); err != nil {
		r.t.Fatal(err)
	}
	r.mount("cgroup", filepath.Join(cg, "devices"), "cgroup", 0, "devices")
}

// dockerInfo starts dockerd in the root with its configuration file and
// asks it for format. It runs in a mount namespace of its own, so that
// its mounts end with it.
func (r *Root) dockerInfo(format string) string {
	r.t.Helper()
	r.MustSh(`unshare -m --propagation private dockerd --config-file /etc/docker/daemon.json \
  --iptables=false --ip-masq=false --bridge=none --storage-driver=vfs \
  --data-root /var/lib/docker-test --exec-root /run/docker-test \
  -H unix:///run/docker-test.sock --pidfile /run/docker-test.pid >/var/log/dockerd-test.log 2>&1 &`)
	defer r.Sh("kill $(cat /run/docker-test.pid)")
	deadline := time.Now().Add(60 * time.Second)
	for {
		res := r.Chroot(userEnv, "docker", "-H", "unix:///run/docker-test.sock", "info", "--format", format)
		if res.Code == 0 {
			return strings.TrimSpace(res.Stdout)
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(r.Path("/var/log/dockerd-test.log"))
			r.t.Fatalf("dockerd did not answer: %s\ndockerd's log:\n%s", res, log)
		}
		time.Sleep(time.Second)
	}
}

// podmanRun runs a container with the root's podman, its storage under
// /var/tmp so that nothing of the machine's is used. This machine's
// runner lacks CAP_SYS_RESOURCE, and podman as root asks runc for a million
// open files, more than the hard limit, which runc cannot set ("error
// setting rlimit type 7: operation not permitted"): the container gets
// limits below any hard limit instead, which lowering needs no privilege
// for.
func (r *Root) podmanRun(args ...string) string {
	r.t.Helper()
	r.MustSh("mkdir -p /srv/rootfs/bin && cp /bin/busybox /srv/rootfs/bin/busybox")
	argv := append([]string{"unshare", "-m", "--propagation", "private",
		"podman", "--root", "/var/tmp/podman/storage", "--runroot", "/var/tmp/podman/run",
		"--cgroup-manager", "cgroupfs", "--events-backend", "file",
		"run", "--rm", "--network", "none", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"}, args...)
	res := r.Chroot(userEnv, argv...)
	if res.Code != 0 {
		r.t.Fatalf("podman run: %s", res)
	}
	return res.Stdout
}

// lsLine finds path in the output of busybox's ls -l and returns its mode
// and, for a device, its major and minor numbers ("crw-rw-rw- 195,0").
func lsLine(out, path string) string {
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) < 2 || f[len(f)-1] != path {
			continue
		}
		if strings.HasPrefix(f[0], "c") && len(f) >= 6 {
			return f[0] + " " + f[4] + strings.TrimSpace(f[5])
		}
		return f[0]
	}
	return ""
}

// journaledContent is the content the newest generation's journal records
// for the write of file p; it fails the test when none is recorded.
func (r *Root) journaledContent(p string) string {
	r.t.Helper()
	gens, _ := filepath.Glob(r.Path("/var/lib/gpuenv/generations/*/journal"))
	newest, id := "", -1
	for _, g := range gens {
		var n int
		if _, err := fmt.Sscanf(filepath.Base(filepath.Dir(g)), "%d", &n); err == nil && n > id {
			newest, id = g, n
		}
	}
	recs, err := apply.ReadJournal(newest, true)
	if err != nil {
		r.t.Fatalf("journal of generation %d: %v", id, err)
	}
	for _, rec := range recs {
		if rec.Event == apply.EventBegin && rec.Operation != nil && rec.Operation.File != nil && rec.Operation.File.Path == p {
			if rec.Operation.File.Generate != "" {
				r.t.Errorf("generation %d journals the write of %s with its content still to be made", id, p)
			}
			return rec.Operation.File.Content
		}
	}
	r.t.Fatalf("generation %d journals no write of %s", id, p)
	return ""
}
