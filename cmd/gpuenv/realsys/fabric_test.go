//go:build realsystem

package realsys

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fabricManager is NVIDIA's Fabric Manager for the 550 branch at the
// driver version v (its own revision -1, as NVIDIA publishes it), with
// its unit file.
func fabricManager(v string) Deb {
	return Deb{Name: "nvidia-fabricmanager-550", Version: v, Files: map[string]string{
		"/lib/systemd/system/nvidia-fabricmanager.service": "[Unit]\nDescription=NVIDIA fabric manager service\n\n[Service]\nExecStart=/usr/bin/nv-fabricmanager\n\n[Install]\nWantedBy=multi-user.target\n",
		"/usr/share/doc/nvidia-fabricmanager-550/version":  v + "\n",
	}}
}

// fakeEnable is a systemctl that only enables and disables units, by the
// link systemctl makes: a minimal root has no systemd.
const fakeEnable = `#!/bin/sh
set -e
case "$1" in
enable) mkdir -p /etc/systemd/system/multi-user.target.wants
	ln -sf /lib/systemd/system/"$2" /etc/systemd/system/multi-user.target.wants/"$2" ;;
disable) rm -f /etc/systemd/system/multi-user.target.wants/"$2" ;;
*) echo "systemctl: $1 is not supported here" >&2; exit 1 ;;
esac
`

func fabricSpec(version string) string {
	return "driver {\n  version           = \"" + version + "\"\n  source            = \"nvidia\"\n  kernel_modules    = \"proprietary\"\n  blacklist_nouveau = false\n}\n"
}

// On a board with NVSwitches, with real apt and dpkg and a local
// repository laid out like NVIDIA's holding the driver and Fabric Manager
// at two versions: the driver's install brings Fabric Manager at its
// version in the same apt transaction and enables it, the upgrade takes
// both, and a rollback restores both.
func TestFabricManagerWithDriver(t *testing.T) {
	r := h.NewRoot(t, Base, Mounts{Proc: true})
	r.AddRepository(cudaRepo, append(append(nvidiaDriver(nvidiaDriverOld), nvidiaDriver(nvidiaDriverNew)...),
		fabricManager(nvidiaDriverOld), fabricManager(nvidiaDriverNew)))
	// An H100 NVSwitch on the root's PCI bus (the root's /sys is its own
	// directory here, not the machine's sysfs).
	r.WriteFile("/sys/bus/pci/devices/0000:05:00.0/uevent", "DRIVER=nvidia\nPCI_CLASS=68000\nPCI_ID=10DE:22A3\nPCI_SUBSYS_ID=10DE:1796\nPCI_SLOT_NAME=0000:05:00.0\n")
	r.WriteFile("/usr/local/sbin/systemctl", fakeEnable)
	if err := os.Chmod(r.Path("/usr/local/sbin/systemctl"), 0o755); err != nil {
		t.Fatal(err)
	}
	version := func(pkg string) string {
		return strings.TrimSpace(r.MustSh("dpkg-query -W -f '${Version}' " + pkg))
	}

	r.WriteFile("/root/fm/gpuenv.hcl", fabricSpec("550.54.*"))
	res := r.Gpuenv("plan", "--detailed-exitcode", "/root/fm")
	if res.Code != 2 || !strings.Contains(res.Stdout, "nvidia-fabricmanager-550="+nvidiaDriverOld) {
		t.Fatalf("plan: want nvidia-fabricmanager-550=%s; %s", nvidiaDriverOld, res)
	}
	if !strings.Contains(res.Stdout, "[transaction 1, with driver]") {
		t.Errorf("Fabric Manager is not in the driver's transaction:\n%s", res.Stdout)
	}
	// Plan's predicted end state, over which it judges doctor's
	// Fabric Manager rule, is what apply leaves.
	p, predicted, after := r.applyPredicted("/root/fm")
	checkPredictedPackages(t, p, predicted, after)
	if pf, af := predicted.Fabric.Manager, after.Fabric.Manager; pf.Package != af.Package || pf.Version != af.Version || pf.Upstream != af.Upstream || pf.Enabled != af.Enabled {
		t.Errorf("Fabric Manager predicted %+v, observed after apply %+v", pf, af)
	}
	if v := version("nvidia-fabricmanager-550"); v != nvidiaDriverOld {
		t.Errorf("Fabric Manager %s after apply, want %s", v, nvidiaDriverOld)
	}
	if _, err := os.Lstat(r.Path("/etc/systemd/system/multi-user.target.wants/nvidia-fabricmanager.service")); err != nil {
		t.Errorf("Fabric Manager is not enabled: %v", err)
	}
	if res := r.Gpuenv("plan", "--detailed-exitcode", "/root/fm"); res.Code != 0 {
		t.Errorf("plan after apply: want no changes; %s", res)
	}

	// The upgrade takes both.
	r.WriteFile("/root/fm/gpuenv.hcl", fabricSpec("550.90.*"))
	if res := r.Gpuenv("apply", "--auto-approve", "/root/fm"); res.Code != 0 {
		t.Fatalf("apply of the upgrade: %s", res)
	}
	for _, p := range []string{"cuda-drivers-550", "nvidia-fabricmanager-550"} {
		if v := version(p); v != nvidiaDriverNew {
			t.Errorf("%s %s after the upgrade, want %s", p, v, nvidiaDriverNew)
		}
	}

	// A rollback restores both.
	if res := r.Gpuenv("rollback", "--auto-approve"); res.Code != 0 {
		t.Fatalf("rollback: %s", res)
	}
	for _, p := range []string{"cuda-drivers-550", "nvidia-fabricmanager-550"} {
		if v := version(p); v != nvidiaDriverOld {
			t.Errorf("%s %s after the rollback, want %s", p, v, nvidiaDriverOld)
		}
	}

	// A driver whose Fabric Manager the repository lacks is refused,
	// naming the package.
	gone, _ := filepath.Glob(r.Path(cudaRepo + "/nvidia-fabricmanager-550_" + nvidiaDriverNew + "_*.deb"))
	if len(gone) != 1 {
		t.Fatalf("Fabric Manager %s package files in the repository: %v", nvidiaDriverNew, gone)
	}
	if err := os.Remove(gone[0]); err != nil {
		t.Fatal(err)
	}
	r.AddRepository(cudaRepo, nil)
	r.WriteFile("/root/fm/gpuenv.hcl", fabricSpec("550.90.*"))
	res = r.Gpuenv("plan", "/root/fm")
	if msg := strings.Join(strings.Fields(res.Stderr), " "); res.Code != 1 || !strings.Contains(msg, "No Fabric Manager at the driver's version") || !strings.Contains(msg, "offer no nvidia-fabricmanager-550 550.90.07 (they offer 550.54.15-1)") {
		t.Errorf("plan of a driver without its Fabric Manager: want a refusal naming nvidia-fabricmanager-550 550.90.07; %s", res)
	}
}
