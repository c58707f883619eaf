package doctor

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gpuenv/gpuenv/planner/compat"
	"github.com/gpuenv/gpuenv/planner/facts"
)

// GroupFabric is the NVSwitch fabric of an HGX or DGX board: its
// switches and the Fabric Manager that programs them.
var GroupFabric = Group{Number: 12, Name: "NVSwitch fabric"}

// fabricManager checks, on a board with NVSwitches, that Fabric Manager
// is installed at the running driver's version, enabled, and running:
// until it has programmed the switches, CUDA fails on every GPU of the
// board with error 802, "system not yet initialized" (NVIDIA Fabric
// Manager user guide).
func (d *doctor) fabricManager() {
	f := d.obs.Fabric
	if len(f.NVSwitches) == 0 {
		return
	}
	fm := f.Manager
	c := Check{ID: "fabric.manager", Group: GroupFabric}
	c.Evidence = append(c.Evidence, fmt.Sprintf("%s on the PCI bus (%s, class 0x068000)", switches(len(f.NVSwitches)), switchModels(f.NVSwitches[0].Model, f.NVSwitches[0].PCIID)))
	driver, from := d.runningDriver()
	fix := &Fix{Text: "Let gpuenv install Fabric Manager with the driver, at its version: the driver block does so on a board with NVSwitches.", Spec: "driver {\n  version = \"" + orUnknown(driver) + "\"\n}"}
	if fm.Package == "" {
		c.Status = Problem
		c.Summary = "Fabric Manager is not installed: CUDA fails on every GPU of this board with error 802 (system not yet initialized)"
		c.Evidence = append(c.Evidence, "no nvidia-fabricmanager package (package database)")
		if driver != "" {
			c.Fix = fix
			c.Fix.Commands = installCommands(d.obs.Packages.Manager == facts.DatabaseRPM, driver)
		}
		d.add(c)
		return
	}
	c.Evidence = append(c.Evidence, fmt.Sprintf("%s %s (package database)", fm.Package, fm.Version))
	if driver != "" {
		c.Evidence = append(c.Evidence, fmt.Sprintf("driver %s (%s)", driver, from))
	}
	if driver != "" && fm.Upstream != "" && fm.Upstream != driver {
		c.Status = Problem
		c.Summary = fmt.Sprintf("Fabric Manager %s is not the driver's version %s: it refuses to start, and CUDA fails with error 802", fm.Upstream, driver)
		c.Fix = fix
		d.add(c)
		return
	}
	switch {
	case fm.Running == "no":
		c.Status = Problem
		c.Summary = "Fabric Manager is installed but not running: CUDA fails with error 802 until it has programmed the NVSwitches"
		c.Evidence = append(c.Evidence, "no nv-fabricmanager process (/proc)")
		c.Fix = &Fix{Text: "Start it, and enable it for every boot; its log (/var/log/fabricmanager.log) says why it stopped:",
			Commands: []string{"systemctl enable --now " + compat.FabricManagerUnit}}
	case !fm.Enabled:
		c.Status = Warning
		c.Summary = "Fabric Manager is not enabled: after the next reboot CUDA fails with error 802 until someone starts it"
		c.Evidence = append(c.Evidence, "no multi-user.target.wants link for "+compat.FabricManagerUnit)
		c.Fix = &Fix{Text: "Enable it:", Commands: []string{"systemctl enable " + compat.FabricManagerUnit}}
	default:
		c.Status = OK
		c.Summary = fmt.Sprintf("Fabric Manager %s", fm.Upstream)
		if fm.Running == "yes" {
			c.Summary += " runs"
			c.Evidence = append(c.Evidence, fmt.Sprintf("nv-fabricmanager, pid %d (/proc)", fm.PID))
		}
	}
	d.add(c)
}

// runningDriver is the driver Fabric Manager must match: the loaded
// kernel module's, which it talks to, else what NVML or the library say.
func (d *doctor) runningDriver() (string, string) {
	if v := d.obs.Driver.ModuleVersion; v != "" {
		return v, orUnknown(d.obs.Driver.ModuleVersionFrom)
	}
	v, from := d.driverVersion()
	if v.IsZero() {
		return "", ""
	}
	return v.String(), from
}

func switchModels(model, id string) string {
	if model == "" {
		return id
	}
	return model + ", " + id
}

// installCommands install Fabric Manager at driver by NVIDIA's package
// names (compat: gpu-driver-container-fm).
func installCommands(rpm bool, driver string) []string {
	branch, _, _ := strings.Cut(driver, ".")
	b, _ := strconv.Atoi(branch)
	if rpm {
		name := "nvidia-fabric-manager"
		if b >= 580 {
			name = "nvidia-fabricmanager"
		}
		return []string{fmt.Sprintf("dnf install %s-%s-1", name, driver), "systemctl enable --now " + compat.FabricManagerUnit}
	}
	name := "nvidia-fabricmanager-" + branch
	if b >= 580 {
		name = "nvidia-fabricmanager"
	}
	return []string{fmt.Sprintf("apt-get install %s=%s-1", name, driver), "apt-mark hold " + name, "systemctl enable --now " + compat.FabricManagerUnit}
}

func switches(n int) string {
	if n == 1 {
		return "1 NVSwitch"
	}
	return fmt.Sprintf("%d NVSwitches", n)
}
