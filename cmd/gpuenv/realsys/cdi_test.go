//go:build realsystem

package realsys

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host/cdi"
)

// cdiScript runs in a private mount namespace on this machine. It gives
// the namespace a /dev of its own, with the machine's basic nodes copied
// and a GPU's made with mknod, so that the machine's /dev never holds
// them; a fresh /run for the CDI spec (podman 4.3 reads /etc/cdi and
// /var/run/cdi, and has no option to read another directory); then runs
// podman twice, with the GPU and without. $1 is the work directory, $2
// the spec, $3 a marker printed between the two runs, $4 the driver's
// library.
const cdiScript = `
work="$1"
dev="$work/dev"
mkdir "$dev"
mount -t tmpfs -o mode=0755 tmpfs "$dev"
for n in null zero full random urandom tty; do cp -a "/dev/$n" "$dev/"; done
mknod -m 0666 "$dev/nvidia0" c 195 0
mknod -m 0666 "$dev/nvidiactl" c 195 255
mkdir "$dev/pts" "$dev/shm"
mount --move "$dev" /dev
mount -t devpts -o newinstance,ptmxmode=0666 devpts /dev/pts
ln -s pts/ptmx /dev/ptmx
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs -o mode=0755 tmpfs /run
mkdir /run/cdi
cp "$2" /run/cdi/nvidia.yaml
# On a machine with hybrid cgroups (version 1 controllers, and the unified
# hierarchy at /sys/fs/cgroup/unified) crun refuses to start ("cgroups in
# hybrid mode not supported"); in this namespace it gets version 1 alone,
# as the engines' test roots do (mountCgroups).
if [ "$(stat -f -c %T /sys/fs/cgroup)" != cgroup2fs ] && mountpoint -q /sys/fs/cgroup/unified; then
  umount /sys/fs/cgroup/unified
fi
podman() {
  command podman --root "$work/storage" --runroot /run/podman --cgroup-manager cgroupfs --events-backend file \
    run --rm --network none --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 "$@"
}
podman --device nvidia.com/gpu=all --rootfs "$work/rootfs" /bin/busybox sh -c '/bin/busybox ls -l /dev/nvidia0 /dev/nvidiactl && /bin/busybox cat "$0"' "$4"
echo "$3"
podman --rootfs "$work/rootfs" /bin/busybox ls /dev
`

// Scenario: the CDI spec gpuenv generates, without hooks (no toolkit is
// installed: podman needs none), given to this machine's podman for a
// container whose root is a directory holding busybox. The container sees
// the GPU's device nodes and the driver's file only when it asks for
// nvidia.com/gpu=all.
//
// podman as root asks runc for 1048576 open files; where the test runs
// without CAP_SYS_RESOURCE (this machine's sandbox) and the hard limit is
// lower, runc fails with "error setting rlimit type 7: operation not
// permitted". The runs pass limits no higher than any hard limit, which
// needs no privilege, rather than skip.
func TestCDIDevicesInPodmanContainer(t *testing.T) {
	for _, tool := range []string{"podman", "unshare", "busybox"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("podman cannot run a container here: %s is not installed (.ci/run installs podman and busybox-static)", tool)
		}
	}
	work := t.TempDir()
	rootfs := filepath.Join(work, "rootfs")
	if err := os.MkdirAll(filepath.Join(rootfs, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	busybox, _ := exec.LookPath("busybox")
	if out, err := exec.Command("cp", busybox, filepath.Join(rootfs, "bin", "busybox")).CombinedOutput(); err != nil {
		t.Fatalf("copying busybox: %v\n%s", err, out)
	}
	lib := filepath.Join(work, "driver", "libcuda.so.550.54.15")
	if err := os.MkdirAll(filepath.Dir(lib), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lib, []byte("the driver's library\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	c := facts.Containers{
		GPUs:          []facts.ContainerGPU{{Index: 0, Minor: 0, UUID: "GPU-5d5a1ee2-2f2a-4b33-9ac3-5b3e8f1b2c4d", PCIBusID: "0000:01:00.0"}},
		DriverVersion: "550.54.15",
		DriverFiles:   []string{lib},
	}
	s, err := cdi.GenerateCDI(&c, []facts.DeviceNode{{Path: "/dev/nvidia0"}, {Path: "/dev/nvidiactl"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.ContainerEdits.Hooks) != 0 {
		t.Fatalf("a spec without a toolkit names hooks: %+v", s.ContainerEdits.Hooks)
	}
	text, err := cdi.MarshalCDI(s)
	if err != nil {
		t.Fatal(err)
	}
	specFile := filepath.Join(work, "nvidia.yaml")
	if err := os.WriteFile(specFile, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}

	const marker = "--- without the device ---"
	_, hadNode := os.Lstat("/dev/nvidia0")
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-ec", cdiScript, "sh", work, specFile, marker, lib)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("podman in a private mount namespace: %v\n%s", err, out)
	}
	with, without, ok := strings.Cut(string(out), marker)
	if !ok {
		t.Fatalf("the script stopped before the second run:\n%s", out)
	}
	for path, want := range map[string]string{"/dev/nvidia0": "crw-rw-rw- 195,0", "/dev/nvidiactl": "crw-rw-rw- 195,255"} {
		if got := lsLine(with, path); got != want {
			t.Errorf("with nvidia.com/gpu=all, %s is %q, want %q:\n%s", path, got, want, with)
		}
	}
	if !strings.Contains(with, "the driver's library") {
		t.Errorf("the driver's library is not mounted in the container:\n%s", with)
	}
	if strings.Contains(without, "nvidia") {
		t.Errorf("a container without the CDI device sees the GPU:\n%s", without)
	}
	// The machine's /dev never had the nodes.
	if _, err := os.Lstat("/dev/nvidia0"); err == nil && hadNode != nil {
		t.Errorf("/dev/nvidia0 exists on the machine")
	}
}
