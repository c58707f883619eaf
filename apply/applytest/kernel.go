package applytest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/gpuenv/gpuenv/providers/host"
)

// The fake kernel: modprobe, modprobe -r, rmmod, lsmod and kill, acting
// on a fixture root's /proc and /sys as Linux does on its own:
//
//   - a module is a file NAME.ko under /lib/modules/RELEASE (RELEASE from
//     /proc/sys/kernel/osrelease), in a text format of its own:
//     "version=", "depends=" (comma-separated modules it uses) and
//     "signer=" (absent: unsigned) lines;
//   - loading one loads what it depends on first, adds its line to
//     /proc/modules (newest first, as the kernel lists them), makes
//     /sys/module/NAME (refcnt, version, holders/) and, for nvidia,
//     /proc/driver/nvidia/version; with Secure Boot on (the efivars
//     SecureBoot variable's last byte 1) an unsigned module is refused
//     with "Key was rejected by service";
//   - a module's reference count is the loaded modules that use it plus
//     the descriptors processes hold on its devices (/proc/PID/fd/N
//     links: /dev/nvidia-uvm* is nvidia_uvm's, /dev/nvidia-modeset
//     nvidia_modeset's, /dev/dri/* nvidia_drm's, any other /dev/nvidia*
//     nvidia's); unloading a module in use fails "Module NAME is in use";
//   - a process is /proc/PID with its comm and fd links; kill removes it
//     (every signal ends a fake process).

// SecureBootVar is the efivars file of the SecureBoot variable.
const SecureBootVar = "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"

func init() {
	Programs["modprobe"] = fakeModprobe
	Programs["rmmod"] = fakeRmmod
	Programs["lsmod"] = fakeLsmod
	Programs["kill"] = fakeKill
}

// kmod is one loaded module as /proc/modules lists it.
type kmod struct {
	name, version string
	depends       []string
}

// kernelState is the fake kernel's modules, newest first.
type kernelState struct {
	c    *Call
	mods []kmod
}

func readKernel(c *Call) (*kernelState, error) {
	k := &kernelState{c: c}
	data, err := c.readFile("/proc/modules")
	if errors.Is(err, fs.ErrNotExist) {
		return k, nil
	}
	if err != nil {
		return nil, err
	}
	usedBy := map[string][]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		m := kmod{name: f[0]}
		if v, err := c.readFile("/sys/module/" + m.name + "/version"); err == nil {
			m.version = strings.TrimSpace(string(v))
		}
		if len(f) > 3 && f[3] != "-" {
			usedBy[m.name] = strings.Split(strings.TrimSuffix(f[3], ","), ",")
		}
		k.mods = append(k.mods, m)
	}
	// What a module depends on is what lists it as a user.
	for i := range k.mods {
		for dep, users := range usedBy {
			if slices.Contains(users, k.mods[i].name) {
				k.mods[i].depends = append(k.mods[i].depends, dep)
			}
		}
		slices.Sort(k.mods[i].depends)
	}
	return k, nil
}

func (k *kernelState) find(name string) int {
	return slices.IndexFunc(k.mods, func(m kmod) bool { return m.name == name })
}

// refs is a module's reference count, and the modules using it.
func (k *kernelState) refs(name string) (int, []string) {
	var users []string
	for _, m := range k.mods {
		if slices.Contains(m.depends, name) {
			users = append(users, m.name)
		}
	}
	n := len(users)
	for _, p := range k.c.processes() {
		for _, t := range p.fds {
			if deviceOf(t) == name {
				n++
			}
		}
	}
	return n, users
}

// write makes /proc/modules, /sys/module and /proc/driver/nvidia say
// what the state holds.
func (k *kernelState) write() error {
	var b strings.Builder
	for _, m := range k.mods {
		n, users := k.refs(m.name)
		used := "-"
		if len(users) > 0 {
			used = strings.Join(users, ",") + ","
		}
		fmt.Fprintf(&b, "%s 4096 %d %s Live 0x0000000000000000 (OE)\n", m.name, n, used)
		dir := "/sys/module/" + m.name
		if err := k.c.writeFile(dir+"/refcnt", []byte(strconv.Itoa(n)+"\n"), 0o644); err != nil {
			return err
		}
		os.RemoveAll(k.c.path(dir + "/holders"))
		os.MkdirAll(k.c.path(dir+"/holders"), 0o755)
		for _, u := range users {
			if err := os.Symlink("../../"+u, k.c.lpath(dir+"/holders/"+u)); err != nil {
				return err
			}
		}
	}
	return k.c.writeFile("/proc/modules", []byte(b.String()), 0o444)
}

// modulePath finds NAME.ko for the running kernel: DKMS's updates
// directory first, as depmod ranks it.
func (c *Call) modulePath(name string) (string, bool) {
	rel, err := c.readFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "", false
	}
	base := "/lib/modules/" + strings.TrimSpace(string(rel))
	for _, dir := range []string{"updates/dkms", "kernel/drivers/video"} {
		p := path.Join(base, dir, name+".ko")
		if _, err := os.Stat(c.path(p)); err == nil {
			return p, true
		}
	}
	return "", false
}

func (c *Call) secureBoot() bool {
	data, err := c.readFile(SecureBootVar)
	return err == nil && len(data) == 5 && data[4] == 1
}

// load loads name and what it depends on.
func (k *kernelState) load(name string) error {
	if k.find(name) >= 0 {
		return nil
	}
	p, ok := k.c.modulePath(name)
	if !ok {
		return fmt.Errorf("modprobe: FATAL: Module %s not found in directory /lib/modules", name)
	}
	data, err := k.c.readFile(p)
	if err != nil {
		return err
	}
	m := kmod{name: name}
	signed := false
	for _, l := range strings.Split(string(data), "\n") {
		key, v, _ := strings.Cut(l, "=")
		switch key {
		case "version":
			m.version = v
		case "depends":
			if v != "" {
				m.depends = strings.Split(v, ",")
			}
		case "signer":
			signed = v != ""
		}
	}
	for _, d := range m.depends {
		if err := k.load(d); err != nil {
			return err
		}
	}
	if k.c.secureBoot() && !signed {
		return fmt.Errorf("modprobe: ERROR: could not insert '%s': Key was rejected by service", name)
	}
	dir := "/sys/module/" + name
	if err := k.c.writeFile(dir+"/version", []byte(m.version+"\n"), 0o444); err != nil {
		return err
	}
	if name == "nvidia" {
		line := fmt.Sprintf("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  %s  Release Build  (gpuenv-test)\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n", m.version)
		if err := k.c.writeFile("/proc/driver/nvidia/version", []byte(line), 0o444); err != nil {
			return err
		}
	}
	k.mods = append([]kmod{m}, k.mods...)
	return nil
}

// unload removes name; verb names the tool in the message, as modprobe
// and rmmod word it differently.
func (k *kernelState) unload(name, verb string) error {
	i := k.find(name)
	if i < 0 {
		if verb == "rmmod" {
			return fmt.Errorf("rmmod: ERROR: Module %s is not currently loaded", name)
		}
		return fmt.Errorf("modprobe: FATAL: Module %s is not in kernel.", name)
	}
	if n, _ := k.refs(name); n > 0 {
		if verb == "rmmod" {
			return fmt.Errorf("rmmod: ERROR: Module %s is in use", name)
		}
		return fmt.Errorf("modprobe: FATAL: Module %s is in use.", name)
	}
	k.mods = slices.Delete(k.mods, i, i+1)
	os.RemoveAll(k.c.path("/sys/module/" + name))
	if name == "nvidia" {
		os.RemoveAll(k.c.path("/proc/driver/nvidia"))
	}
	return nil
}

func fakeModprobe(c *Call) int {
	remove := false
	var names []string
	for _, a := range c.Args {
		switch {
		case a == "-r" || a == "--remove":
			remove = true
		case a == "--":
		case strings.HasPrefix(a, "-"):
			return c.errorf(1, "modprobe: unsupported option %s", a)
		default:
			names = append(names, strings.ReplaceAll(a, "-", "_"))
		}
	}
	if len(names) == 0 {
		return c.errorf(1, "modprobe: ERROR: missing module name.")
	}
	each := func(k *kernelState, n string) error { return k.load(n) }
	if remove {
		each = func(k *kernelState, n string) error { return k.unload(n, "modprobe") }
	}
	return c.eachModule("modprobe", names, each)
}

func fakeRmmod(c *Call) int {
	var names []string
	for _, a := range c.Args {
		if !strings.HasPrefix(a, "-") {
			names = append(names, strings.ReplaceAll(a, "-", "_"))
		}
	}
	return c.eachModule("rmmod", names, func(k *kernelState, n string) error { return k.unload(n, "rmmod") })
}

// eachModule does to each module in turn what the tool does, stopping at
// the first failure, and leaves /proc and /sys saying what is loaded.
func (c *Call) eachModule(tool string, names []string, do func(*kernelState, string) error) int {
	k, err := readKernel(c)
	if err != nil {
		return c.errorf(1, "%s: %v", tool, err)
	}
	for _, n := range names {
		if err = do(k, n); err != nil {
			break
		}
	}
	if werr := k.write(); werr != nil && err == nil {
		err = werr
	}
	if err != nil {
		return c.errorf(1, "%v", err)
	}
	return 0
}

func fakeLsmod(c *Call) int {
	data, err := c.readFile("/proc/modules")
	if err != nil {
		return c.errorf(1, "lsmod: %v", err)
	}
	fmt.Fprintf(c.Stdout, "%-19s %8s  %s\n", "Module", "Size", "Used by")
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(l)
		if len(f) < 4 {
			continue
		}
		used := strings.TrimSuffix(f[3], ",")
		if used == "-" {
			used = ""
		}
		fmt.Fprintf(c.Stdout, "%-19s %8s  %s %s\n", f[0], f[1], f[2], used)
	}
	return 0
}

// fakeProcess is /proc/PID of a fixture root.
type fakeProcess struct {
	pid  int
	comm string
	fds  []string
}

// processes lists the fixture's processes.
func (c *Call) processes() []fakeProcess {
	entries, _ := os.ReadDir(c.path("/proc"))
	var out []fakeProcess
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		p := fakeProcess{pid: pid}
		comm, _ := c.readFile("/proc/" + e.Name() + "/comm")
		p.comm = strings.TrimSpace(string(comm))
		fds, _ := os.ReadDir(c.path("/proc/" + e.Name() + "/fd"))
		for _, fd := range fds {
			if t, err := os.Readlink(filepath.Join(c.path("/proc/"+e.Name()+"/fd"), fd.Name())); err == nil {
				p.fds = append(p.fds, t)
			}
		}
		out = append(out, p)
	}
	return out
}

// deviceOf is the module whose device node t is.
func deviceOf(t string) string {
	switch {
	case strings.HasPrefix(t, "/dev/dri/"):
		return "nvidia_drm"
	case strings.HasPrefix(t, "/dev/nvidia-uvm"):
		return "nvidia_uvm"
	case t == "/dev/nvidia-modeset":
		return "nvidia_modeset"
	case strings.HasPrefix(t, "/dev/nvidia"):
		return "nvidia"
	}
	return ""
}

// StartProcess makes a process in the fixture root holding devs, as a
// program started on the running system would.
func StartProcess(root string, pid int, comm string, devs ...string) error {
	dir := filepath.Join(root, "proc", strconv.Itoa(pid))
	if err := os.MkdirAll(filepath.Join(dir, "fd"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "comm"), []byte(comm+"\n"), 0o444); err != nil {
		return err
	}
	for i, d := range devs {
		if err := os.Symlink(d, filepath.Join(dir, "fd", strconv.Itoa(3+i))); err != nil {
			return err
		}
	}
	// The reference counts follow.
	c := &Call{Root: root, Dir: "/", Env: os.Getenv}
	h, err := hostFor(root)
	if err != nil {
		return err
	}
	c.h = h
	k, err := readKernel(c)
	if err != nil {
		return err
	}
	return k.write()
}

func fakeKill(c *Call) int {
	var pids []string
	for i := 0; i < len(c.Args); i++ {
		switch a := c.Args[i]; {
		case a == "-s" && i+1 < len(c.Args):
			i++
		case a == "--" || strings.HasPrefix(a, "-"):
		default:
			pids = append(pids, a)
		}
	}
	code := 0
	for _, p := range pids {
		dir := c.path("/proc/" + p)
		if _, err := os.Stat(dir); err != nil {
			code = c.errorf(1, "kill: (%s) - No such process", p)
			continue
		}
		os.RemoveAll(dir)
	}
	if k, err := readKernel(c); err == nil {
		k.write()
	}
	return code
}

// Daemon is a GPU service's process as the fake systemctl starts it:
// always the same pid, so that a service stopped and started again
// leaves the host as it was.
type Daemon struct {
	PID     int
	Command string
	Devices []string
}

// Daemons are the GPU services the fake systemctl starts and stops.
var Daemons = map[string]Daemon{
	"nvidia-persistenced.service":  {PID: 900, Command: "nvidia-persiste", Devices: []string{"/dev/nvidia0", "/dev/nvidiactl"}},
	"nvidia-fabricmanager.service": {PID: 901, Command: "nv-fabricmanage", Devices: []string{"/dev/nvidiactl"}},
	"nvidia-dcgm.service":          {PID: 902, Command: "nv-hostengine", Devices: []string{"/dev/nvidia0", "/dev/nvidiactl"}},
	"dcgm-exporter.service":        {PID: 903, Command: "dcgm-exporter"},
}

func (c *Call) daemonRunning(unit string) bool {
	d, ok := Daemons[unit]
	if !ok {
		return false
	}
	comm, err := c.readFile("/proc/" + strconv.Itoa(d.PID) + "/comm")
	return err == nil && strings.TrimSpace(string(comm)) == d.Command
}

// startStop starts or stops GPU services: a daemon that opens the GPU
// fails to start while the nvidia module is not loaded, as
// nvidia-persistenced does.
func (c *Call) startStop(verb string, units []string) int {
	if c.Root == "/" {
		return c.errorf(1, "fake systemctl: %s on the machine running the tests", verb)
	}
	for _, u := range units {
		d, ok := Daemons[u]
		if !ok {
			return c.errorf(5, "Failed to %s %s: Unit %s not loaded.", verb, u, u)
		}
		running := c.daemonRunning(u)
		switch {
		case verb == "stop" && running:
			os.RemoveAll(c.path("/proc/" + strconv.Itoa(d.PID)))
			if k, err := readKernel(c); err == nil {
				k.write()
			}
		case verb == "start" && !running:
			if _, err := c.readFile("/proc/driver/nvidia/version"); err != nil && len(d.Devices) > 0 {
				return c.errorf(1, "Job for %s failed because the control process exited with error code.", u)
			}
			if err := StartProcess(c.Root, d.PID, d.Command, d.Devices...); err != nil {
				return c.errorf(1, "%v", err)
			}
		}
	}
	return 0
}

// KernelNVML is go-nvml's mock reporting the driver the fixture's fake
// kernel has loaded, as the real library does once it starts: none
// (NVML's DRIVER_NOT_LOADED) while no nvidia module is.
func KernelNVML(root string) *mock.Interface {
	version := func() (string, bool) {
		data, err := os.ReadFile(filepath.Join(root, "proc/driver/nvidia/version"))
		if err != nil {
			return "", false
		}
		v, _, err := host.ParseProcVersion(data)
		return v, err == nil
	}
	return &mock.Interface{
		InitFunc: func() nvml.Return {
			if _, ok := version(); !ok {
				return nvml.ERROR_DRIVER_NOT_LOADED
			}
			return nvml.SUCCESS
		},
		ShutdownFunc: func() nvml.Return { return nvml.SUCCESS },
		SystemGetDriverVersionFunc: func() (string, nvml.Return) {
			v, ok := version()
			if !ok {
				return "", nvml.ERROR_DRIVER_NOT_LOADED
			}
			return v, nvml.SUCCESS
		},
	}
}
