//go:build realsystem

package realsys

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The reload cells' driver: NVIDIA's cuda-drivers-535 for Debian 12 and
// the packages it needs at its own version (nvidia-kernel-dkms with the
// modules, the libraries), as small test packages in the cell's
// repository, at versions Debian's archive does not have. The module
// files are those the fake kernel below reads, for the machine's running
// kernel.
const (
	reloadOld     = "535.216.03-1"
	reloadNew     = "535.230.02-1"
	reloadUnit    = "nvidia-persistenced.service"
	fakeKernelDir = "/run/fake-kernel"
)

// reloadDebs are the driver's packages at package version deb.
func reloadDebs(deb, release string) []Deb {
	v := upstream(deb)
	mods := map[string]string{}
	for m, dep := range map[string]string{"nvidia": "", "nvidia_modeset": "nvidia", "nvidia_drm": "nvidia_modeset", "nvidia_uvm": "nvidia"} {
		mods["/lib/modules/"+release+"/updates/dkms/"+m+".ko"] = "version=" + v + "\ndepends=" + dep + "\n"
	}
	return []Deb{
		{Name: "nvidia-kernel-dkms", Version: deb, Files: mods},
		{Name: "libnvidia-ml1", Version: deb, Files: map[string]string{
			"/usr/lib/x86_64-linux-gnu/nvidia/current/libnvidia-ml.so." + v: "not a library: NVML " + v + "\n",
		}},
		{Name: "libcuda1", Version: deb, Files: map[string]string{
			"/usr/lib/x86_64-linux-gnu/nvidia/current/libcuda.so." + v: "not a library: CUDA driver " + v + "\n",
		}},
		{Name: "nvidia-smi", Version: deb, Depends: "libnvidia-ml1 (= " + deb + ")", Files: map[string]string{
			"/usr/share/doc/nvidia-smi/version": v + "\n",
		}},
		{Name: "cuda-drivers-535", Version: deb, Depends: fmt.Sprintf("nvidia-kernel-dkms (= %[1]s), nvidia-smi (= %[1]s), libcuda1 (= %[1]s)", deb)},
	}
}

func upstream(deb string) string {
	v, _, _ := strings.Cut(deb, "-")
	return v
}

func reloadSpec(deb string) string {
	v := upstream(deb)
	return fmt.Sprintf("driver {\n  version        = %q\n  source         = \"nvidia\"\n  kernel_modules = \"proprietary\"\n}\n", v)
}

// The fake kernel, as shell scripts in the root's /usr/local/sbin (first
// on the PATH): modprobe, modprobe -r, rmmod and lsmod act on the files
// the root sees as the kernel's, as apply/applytest's fakes do on a
// fixture root — /proc/modules, /proc/driver/nvidia/version and
// /sys/module/NAME — and systemctl starts and stops nvidia-persistenced,
// a process (/proc/PID) holding /dev/nvidiactl, which counts as a
// reference of the nvidia module. The root's /proc is a tmpfs of these
// files, not a procfs: a procfs has no /proc/modules where the machine's
// kernel has no modules, and its entries cannot be made, so that no file
// of the machine's kernel is ever in reach of the cell. What each loaded module uses is kept in
// /run/fake-kernel/deps, as the kernel keeps it, since the module files
// change under it with the packages.
//
// Every step can be stopped, for the kill cells, as the maintainer
// scripts are (faultHook): /run/gpuenv-fault/modprobe.load-M before
// module M loads, modprobe.unloaded-M once M is gone, and
// systemctl.VERB-UNIT before a service starts or stops.
const fakeKernelLib = `fk=` + fakeKernelDir + `
stop_at() {
	if [ -e ` + faultMarkers + `/"$1" ]; then
		: >` + faultMarkers + `/"$1".reached
		while :; do sleep 1; done
	fi
}
loaded() { awk '{print $1}' /proc/modules; }
is_loaded() { loaded | grep -qx "$1"; }
# rewrite makes /proc/modules and /sys/module/*/refcnt say what is loaded
# (newest first) and who uses it: the modules that depend on it and the
# services holding it.
rewrite() {
	local m u users n held
	: >"$fk/modules.new"
	for m in "$@"; do
		users=
		n=0
		for u in "$@"; do
			if grep -qx "$m" "$fk/deps/$u" 2>/dev/null; then
				users="$users$u,"
				n=$((n + 1))
			fi
		done
		held=$(cat "$fk"/holders/* 2>/dev/null | grep -cx "$m" || true)
		n=$((n + held))
		echo "$m 4096 $n ${users:--} Live 0x0000000000000000 (OE)" >>"$fk/modules.new"
		echo "$n" >/sys/module/"$m"/refcnt
	done
	cat "$fk/modules.new" >/proc/modules
}
`

const fakeModprobe = `#!/bin/sh
# gpuenv test: the fake kernel's modprobe (see cmd/gpuenv/realsys/reloadfault.go).
set -e
. /usr/local/lib/fake-kernel.sh
dir=/lib/modules/$(cat /proc/sys/kernel/osrelease)/updates/dkms
load() {
	local m dep v
	m=$1
	is_loaded "$m" && return 0
	if [ ! -e "$dir/$m.ko" ]; then
		echo "modprobe: FATAL: Module $m not found in directory ${dir%/updates/dkms}" >&2
		exit 1
	fi
	for dep in $(sed -n 's/^depends=//p' "$dir/$m.ko" | tr , ' '); do
		load "$dep"
	done
	stop_at "modprobe.load-$m"
	v=$(sed -n 's/^version=//p' "$dir/$m.ko")
	mkdir -p /sys/module/"$m" "$fk/deps"
	echo "$v" >/sys/module/"$m"/version
	sed -n 's/^depends=//p' "$dir/$m.ko" | tr , '\n' | grep . >"$fk/deps/$m" || true
	if [ "$m" = nvidia ]; then
		mkdir -p /proc/driver/nvidia
		printf 'NVRM version: NVIDIA UNIX x86_64 Kernel Module  %s  Release Build  (gpuenv-test)\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n' "$v" >/proc/driver/nvidia/version
	fi
	rewrite "$m" $(loaded)
}
unload() {
	local m
	m=$1
	if ! is_loaded "$m"; then
		echo "modprobe: FATAL: Module $m is not in kernel." >&2
		exit 1
	fi
	if [ "$(cat /sys/module/"$m"/refcnt)" != 0 ]; then
		echo "modprobe: FATAL: Module $m is in use." >&2
		exit 1
	fi
	rm -rf /sys/module/"$m" "$fk/deps/$m"
	[ "$m" != nvidia ] || rm -rf /proc/driver/nvidia
	rewrite $(loaded | grep -vx "$m")
	stop_at "modprobe.unloaded-$m"
}
remove=
case "$1" in -r|--remove) remove=1; shift ;; esac
[ $# -gt 0 ] || { echo "modprobe: ERROR: missing module name." >&2; exit 1; }
for m in "$@"; do
	m=$(echo "$m" | tr - _)
	if [ -n "$remove" ]; then unload "$m"; else load "$m"; fi
done
`

const fakeRmmod = `#!/bin/sh
# gpuenv test: the fake kernel's rmmod.
exec modprobe -r "$@"
`

const fakeLsmod = `#!/bin/sh
# gpuenv test: the fake kernel's lsmod.
printf '%-19s %8s  %s\n' Module Size 'Used by'
awk '{u = $4; sub(/,$/, "", u); if (u == "-") u = ""; printf "%-19s %8s  %s %s\n", $1, $2, $3, u}' /proc/modules
`

const fakeSystemctl = `#!/bin/sh
# gpuenv test: a systemctl that runs ` + reloadUnit + ` alone.
set -e
. /usr/local/lib/fake-kernel.sh
verb=$1
unit=$2
pidfile=$fk/services/$unit.pid
active() { [ -e "$pidfile" ] && [ -e /proc/"$(cat "$pidfile")"/comm ]; }
case "$verb" in
is-active)
	if active; then echo active; exit 0; fi
	echo inactive
	exit 3
	;;
start|stop|restart)
	if [ "$unit" != ` + reloadUnit + ` ]; then
		echo "Failed to $verb $unit: Unit $unit not found." >&2
		exit 5
	fi
	stop_at "systemctl.$verb-$unit"
	if [ "$verb" != start ] && active; then
		rm -rf /proc/"$(cat "$pidfile")"
	fi
	rm -f "$pidfile" "$fk/holders/$unit"
	rewrite $(loaded)
	[ "$verb" != stop ] || exit 0
	if ! is_loaded nvidia; then
		echo "Job for $unit failed: nvidia-persistenced: failed to open /dev/nvidiactl" >&2
		exit 1
	fi
	mkdir -p "$fk/services" "$fk/holders" /proc/` + persistencedPID + `/fd
	echo nvidia-persiste >/proc/` + persistencedPID + `/comm
	ln -sfn /dev/nvidiactl /proc/` + persistencedPID + `/fd/3
	echo ` + persistencedPID + ` >"$pidfile"
	echo nvidia >"$fk/holders/$unit"
	rewrite $(loaded)
	;;
*)
	exit 0
	;;
esac
`

// persistencedPID is the fake nvidia-persistenced's process: /proc/PID
// with its command name, cut as the kernel cuts it, and the nvidia
// control device open, as the real daemon holds it.
const persistencedPID = "4242"

// newReloadRoot is a fault root for the reload cells: the driver's
// packages in its repository, the fake kernel with nothing loaded,
// systemd as the process 1 the root sees, and the faultinject gpuenv
// taking the root for the running system
// (GPUENV_FAULT_RUNNING_SYSTEM=1, set by the root's gpuenv wrapper for
// every command the cell runs, its recovery included). Then the old
// driver is installed by gpuenv, its modules are loaded and
// nvidia-persistenced started: the host of a driver upgrade that reloads
// the modules.
func newReloadRoot(t *testing.T) *faultRoot {
	t.Helper()
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		t.Fatal(err)
	}
	release := unix.ByteSliceToString(uts.Release[:])
	pkgs := append([]Deb{faultConfigCommon}, reloadDebs(reloadOld, release)...)
	r := newFaultRoot(t, faultRootOptions{FakeProc: true, Packages: append(pkgs, reloadDebs(reloadNew, release)...)})

	// DKMS would build against the running kernel's headers: as if
	// they were installed.
	if err := os.MkdirAll(r.Path("/lib/modules/"+release+"/build"), 0o755); err != nil {
		t.Fatal(err)
	}
	r.WriteFile("/proc/modules", "")
	r.WriteFile("/proc/sys/kernel/osrelease", release+"\n")
	r.WriteFile("/proc/1/comm", "systemd\n")
	for _, dir := range []string{"/proc/driver", "/sys/module"} {
		if err := os.MkdirAll(r.Path(dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r.WriteFile("/usr/local/lib/fake-kernel.sh", fakeKernelLib)
	for name, script := range map[string]string{
		"modprobe": fakeModprobe, "rmmod": fakeRmmod, "lsmod": fakeLsmod, "systemctl": fakeSystemctl,
	} {
		r.WriteFile("/usr/local/sbin/"+name, script)
		if err := os.Chmod(r.Path("/usr/local/sbin/"+name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r.copyFile(h.FaultGpuenv(t), r.Path("/usr/local/lib/gpuenv-faultinject"), 0o755)
	r.WriteFile("/usr/local/bin/gpuenv", "#!/bin/sh\nGPUENV_FAULT_RUNNING_SYSTEM=1 exec /usr/local/lib/gpuenv-faultinject \"$@\"\n")
	if err := os.Chmod(r.Path("/usr/local/bin/gpuenv"), 0o755); err != nil {
		t.Fatal(err)
	}

	r.mustApply(reloadSpec(reloadOld))
	r.MustSh("modprobe nvidia nvidia_modeset nvidia_drm nvidia_uvm && systemctl start " + reloadUnit)
	r.checkKernel(reloadOld)
	return r
}

// checkKernel fails the test unless the fake kernel has the driver of
// package version deb loaded, all four modules, with nvidia-persistenced
// running, and says what is wrong.
func (r *faultRoot) checkKernel(deb string) []string {
	v := upstream(deb)
	var bad []string
	mods := r.MustSh("lsmod")
	for _, m := range []string{"nvidia", "nvidia_modeset", "nvidia_drm", "nvidia_uvm"} {
		if !strings.Contains(mods, "\n"+m+" ") {
			bad = append(bad, "module "+m+" is not loaded")
		}
	}
	ver, _ := os.ReadFile(r.Path("/proc/driver/nvidia/version"))
	if !strings.Contains(string(ver), "  "+v+"  ") {
		bad = append(bad, fmt.Sprintf("/proc/driver/nvidia/version does not show %s: %q", v, ver))
	}
	if sys, _ := os.ReadFile(r.Path("/sys/module/nvidia/version")); strings.TrimSpace(string(sys)) != v {
		bad = append(bad, fmt.Sprintf("/sys/module/nvidia/version is %q, not %s", strings.TrimSpace(string(sys)), v))
	}
	if r.Sh("systemctl is-active "+reloadUnit).Code != 0 {
		bad = append(bad, reloadUnit+" is not running")
	}
	if len(bad) > 0 {
		r.t.Errorf("the fake kernel: %s\nlsmod:\n%s", strings.Join(bad, "; "), mods)
	}
	return bad
}

// A reloadCell kills gpuenv, with every process in the root, at a step of
// a driver upgrade's module reload (the apply) or of its rollback, when
// the fake kernel or systemctl reaches phase. Recovery is the matrix's:
// force-unlock and at most one rollback; then dpkg is as before, and the
// old driver is loaded again, from the restored packages' files, with
// nvidia-persistenced running.
type reloadCell struct {
	name  string
	when  string // apply or rollback
	phase string
	// left is what the fake kernel has loaded at the kill, newest
	// first, and the nvidia module's version ("" for none).
	left, version string
}

var reloadCells = []reloadCell{
	// Every module is unloaded, the new ones not yet loaded: the
	// kernel has no nvidia driver at all.
	{"apply/between-unload-and-load", "apply", "modprobe.unloaded-nvidia", "", ""},
	// The new modules are loaded; nvidia-persistenced is started again.
	{"apply/service-restart", "apply", "systemctl.start-" + reloadUnit, "nvidia_uvm nvidia_drm nvidia_modeset nvidia", reloadNew},
	// The rollback has unloaded the new modules, restored the old
	// packages, and loads the old module from their files.
	{"rollback/load-old-module", "rollback", "modprobe.load-nvidia", "", ""},
}

func (k reloadCell) run(c *cell) {
	t := c.t
	r := newReloadRoot(t)
	c.r = r
	before := r.Snapshot()
	argv, kind := []string{"apply", "--auto-approve", specDir}, faultedApply
	if k.when == "rollback" {
		r.mustApply(reloadSpec(reloadNew))
		if r.checkKernel(reloadNew) != nil {
			c.fail("the upgrade did not reload the modules", r.dpkgEvidence())
		}
		argv, kind = []string{"rollback", "--auto-approve"}, faultedRollback
	} else {
		r.writeSpec(reloadSpec(reloadNew))
		plan := r.Gpuenv("plan", specDir)
		if !strings.Contains(plan.Stdout, "unload module nvidia") || !strings.Contains(plan.Stdout, "load module nvidia") {
			t.Fatalf("the upgrade's plan has no module reload: %s", plan)
		}
	}
	res, ok := c.killAt(k.when, k.phase, argv, before, kind)
	if !ok {
		return
	}
	left := strings.Join(strings.Fields(r.MustSh("awk '{print $1}' /proc/modules")), " ")
	ver := ""
	if data, err := os.ReadFile(r.Path("/sys/module/nvidia/version")); err == nil {
		ver = strings.TrimSpace(string(data))
	}
	c.step("left loaded: %q %s", left, ver)
	if left != k.left || ver != upstream(k.version) {
		c.fail(fmt.Sprintf("at the kill the kernel has %q loaded (nvidia %q), want %q (nvidia %q): the cell stopped elsewhere", left, ver, k.left, upstream(k.version)), res.String())
	}
	c.finish(before, kind, res)
	if bad := r.checkKernel(reloadOld); len(bad) > 0 {
		c.why = append(c.why, "after recovery "+bad[0])
	} else {
		c.step("%s loaded, %s running", reloadOld, reloadUnit)
	}
}
