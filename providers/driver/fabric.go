package driver

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/gpuenv/gpuenv/planner/compat"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/pkgdb"
)

// fabricManagerWants is the link systemctl enable makes for Fabric
// Manager's unit.
const fabricManagerWants = "/etc/systemd/system/multi-user.target.wants/" + compat.FabricManagerUnit

// nvswitch records an NVSwitch found on the PCI bus.
func (o *observer) nvswitch(addr string, d facts.PCIDevice) {
	d.Address = addr
	d.PCIID = fmt.Sprintf("%04x:%04x", d.VendorID, d.DeviceID)
	if d.SubsystemVendor != 0 || d.SubsystemDevice != 0 {
		d.SubsystemID = fmt.Sprintf("%04x:%04x", d.SubsystemVendor, d.SubsystemDevice)
	}
	if s, ok := compat.NVSwitchByPCIID(d.DeviceID); ok {
		d.Model = s.Model
	}
	o.obs.Fabric.NVSwitches = append(o.obs.Fabric.NVSwitches, d)
}

// FabricManagerPackage reports whether a package is a Fabric Manager:
// nvidia-fabricmanager-<branch>, nvidia-fabricmanager (from 580), or
// nvidia-fabric-manager (NVIDIA's RPMs before 580). Its development
// package is not.
func FabricManagerPackage(name string) bool {
	if name == "nvidia-fabricmanager" || name == "nvidia-fabric-manager" {
		return true
	}
	rest, ok := strings.CutPrefix(name, "nvidia-fabricmanager-")
	return ok && isBranch(rest)
}

// NSCQPackage reports whether a package is the NVSwitch Configuration
// and Query library: libnvidia-nscq-<branch> or libnvidia-nscq.
func NSCQPackage(name string) bool {
	if name == "libnvidia-nscq" {
		return true
	}
	rest, ok := strings.CutPrefix(name, "libnvidia-nscq-")
	return ok && isBranch(rest)
}

// isBranch reports whether s is a driver branch number. It is asked of
// every installed package's name, so a name that is none costs nothing.
func isBranch(s string) bool {
	_, err := strconv.ParseUint(s, 10, 32)
	return err == nil
}

// ObserveFabric fills obs.Fabric.Manager from the package database
// (read into obs.Packages before), the unit's enablement link and the
// root's process table. It looks only on a board with NVSwitches or a
// host with Fabric Manager installed: elsewhere there is nothing to
// judge and no process table to walk.
func ObserveFabric(h *host.Host, obs *facts.Observation) {
	fabricPackages(obs)
	fm := &obs.Fabric.Manager
	if len(obs.Fabric.NVSwitches) == 0 && fm.Package == "" {
		return
	}
	_, err := h.Lstat(fabricManagerWants)
	fm.Enabled = err == nil
	fm.Running, fm.PID = fabricManagerProcess(h)
}

// fabricPackages fills Fabric Manager's packages in obs.Fabric.Manager
// from obs.Packages.
func fabricPackages(obs *facts.Observation) {
	fm := &obs.Fabric.Manager
	fm.Package, fm.Version, fm.Hold, fm.Upstream, fm.NSCQ, fm.NSCQVersion = "", "", false, "", "", ""
	manager := "apt"
	if obs.Packages.Manager == facts.DatabaseRPM {
		manager = "dnf"
	}
	for _, p := range obs.Packages.Packages {
		if p.State != facts.StateInstalled {
			continue
		}
		switch {
		case FabricManagerPackage(p.Name):
			fm.Package, fm.Version, fm.Hold = p.Name, p.Version, p.Hold
			if up, err := pkgdb.UpstreamVersion(manager, p.Version); err == nil {
				fm.Upstream = up.String()
			}
		case NSCQPackage(p.Name):
			fm.NSCQ, fm.NSCQVersion = p.Name, p.Version
		}
	}
}

// fabricManagerProcess looks for the daemon among the root's processes.
func fabricManagerProcess(h *host.Host) (string, int) {
	entries, err := h.ReadDir(ProcDir)
	if err != nil {
		return "", 0
	}
	seen := false
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		seen = true
		comm, err := h.ReadFile(path.Join(ProcDir, e.Name(), "comm"))
		if err == nil && strings.TrimSpace(string(comm)) == compat.FabricManagerCommand {
			return "yes", pid
		}
	}
	if !seen {
		return "", 0
	}
	return "no", 0
}
