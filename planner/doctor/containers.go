package doctor

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpuenv/gpuenv/planner/compat"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/spec/version"
)

// GroupContainers is the container toolkit, the engines' NVIDIA runtime
// and the CDI spec: what GPU containers need of the host.
var GroupContainers = Group{Number: 11, Name: "Containers"}

// containers checks the toolkit against the driver, each configured
// engine for the NVIDIA runtime, and the CDI spec engines use.
func (d *doctor) containers() {
	c := d.obs.Containers
	configured := false
	for _, e := range c.Engines {
		configured = configured || e.Exists
	}
	if c.Toolkit.Version == "" && len(c.CDISpecs) == 0 && !configured {
		// A host that runs no GPU containers gets no group of checks
		// about them.
		return
	}
	d.containerToolkit()
	for _, e := range c.Engines {
		if e.Exists {
			d.containerEngine(e)
		}
	}
	d.containerCDI()
	d.containerManagementCDI()
}

func (d *doctor) containerToolkit() {
	c := d.obs.Containers
	check := Check{ID: "containers.toolkit", Group: GroupContainers}
	if c.Toolkit.Version == "" {
		check.Status = Warning
		check.Summary = "The NVIDIA container toolkit is not installed, and engines are configured on this host"
		check.Fix = &Fix{Text: "Install it with gpuenv:", Spec: "container_toolkit {\n  engines = [\"docker\"]\n}"}
		d.add(check)
		return
	}
	check.Evidence = []string{fmt.Sprintf("nvidia-container-toolkit %s (package database)", c.Toolkit.Version)}
	tv, err1 := version.Parse(c.Toolkit.Version)
	dv, err2 := version.Parse(c.DriverVersion)
	if err1 == nil && err2 == nil {
		check.Evidence = append(check.Evidence, fmt.Sprintf("driver %s (its libraries)", c.DriverVersion))
		if f, ok := compat.ToolkitForDriver(dv.Major()); ok && tv.Compare(f.ToolkitMin) < 0 {
			check.Status = Warning
			check.Summary = fmt.Sprintf("Container toolkit %s is older than driver branch %d supports: %s or newer is needed (%s)", c.Toolkit.Version, dv.Major(), f.ToolkitMin, f.Notes)
			check.Evidence = append(check.Evidence, f.Source.String())
			check.Fix = &Fix{Text: "Upgrade the toolkit with gpuenv:", Spec: fmt.Sprintf("container_toolkit {\n  version = \">= %s\"\n}", f.ToolkitMin)}
			d.add(check)
			return
		}
	}
	check.Status = OK
	check.Summary = fmt.Sprintf("Container toolkit %s", c.Toolkit.Version)
	d.add(check)
}

func (d *doctor) containerEngine(e facts.EngineConfig) {
	check := Check{ID: "containers.engine:" + e.Engine, Group: GroupContainers, Evidence: []string{e.Path}}
	switch {
	case e.Error != "":
		check.Status = Problem
		check.Summary = fmt.Sprintf("%s cannot be read: %s", e.Path, e.Error)
	case !e.NVIDIARuntime:
		check.Status = Warning
		check.Summary = fmt.Sprintf("%s has no NVIDIA runtime: its containers cannot use a GPU through it", e.Engine)
		check.Fix = &Fix{Text: "Add the runtime with gpuenv:", Spec: fmt.Sprintf("container_toolkit {\n  engines = [%q]\n}", e.Engine)}
	default:
		check.Status = OK
		check.Summary = fmt.Sprintf("%s has the NVIDIA runtime", e.Engine)
		if e.DefaultRuntime != "" {
			check.Evidence = append(check.Evidence, "default runtime "+e.DefaultRuntime)
		}
	}
	d.add(check)
}

// containerCDI judges the spec engines use for nvidia.com/gpu: one that
// names another driver's files, or files that are gone, fails every
// container that asks for a GPU through CDI.
func (d *doctor) containerCDI() {
	c := d.obs.Containers
	check := Check{ID: "containers.cdi", Group: GroupContainers}
	var inUse *facts.CDISpec
	var others []string
	for i, s := range c.CDISpecs {
		if s.Path == c.CDIInUse {
			inUse = &c.CDISpecs[i]
		} else if s.Kind == "nvidia.com/gpu" {
			others = append(others, s.Path)
		}
	}
	if inUse == nil {
		if c.Toolkit.Version == "" {
			d.skip(check, "No CDI spec for nvidia.com/gpu, and no toolkit")
			return
		}
		check.Status = Warning
		check.Summary = "No CDI spec for nvidia.com/gpu: podman, and engines in CDI mode, cannot use a GPU"
		check.Fix = &Fix{Text: "Write one with gpuenv:", Spec: "container_toolkit {\n  cdi = true\n}"}
		d.add(check)
		return
	}
	check.Evidence = []string{inUse.Path + " (in use: the CDI directory of highest priority)"}
	if len(others) > 0 {
		check.Evidence = append(check.Evidence, "also for nvidia.com/gpu, outranked: "+strings.Join(others, ", "))
	}
	stale := inUse.DriverVersion != "" && c.DriverVersion != "" && inUse.DriverVersion != c.DriverVersion
	switch {
	case stale || len(inUse.Missing) > 0:
		check.Status = Problem
		parts := []string{}
		if stale {
			parts = append(parts, fmt.Sprintf("names driver %s, and the installed driver is %s", inUse.DriverVersion, c.DriverVersion))
		}
		if len(inUse.Missing) > 0 {
			parts = append(parts, fmt.Sprintf("names %s that %s gone (%s)", plural(len(inUse.Missing), "path"), isAre(len(inUse.Missing)), inUse.Missing[0]))
		}
		check.Summary = fmt.Sprintf("The CDI spec %s is stale: it %s; every container asking for a GPU through it fails to start", inUse.Path, strings.Join(parts, ", and "))
		check.Fix = &Fix{Text: "Regenerate it with gpuenv, which rewrites it whenever the driver changes:", Spec: "container_toolkit {\n  cdi = true\n}"}
	case len(others) > 0:
		check.Status = Warning
		check.Summary = fmt.Sprintf("Two CDI specs declare nvidia.com/gpu; engines use %s", inUse.Path)
	default:
		check.Status = OK
		check.Summary = fmt.Sprintf("CDI spec %s for driver %s, devices %s", inUse.Path, orUnknown(inUse.DriverVersion), strings.Join(inUse.Devices, ", "))
	}
	d.add(check)
}

// managementKind is the kind of the CDI management spec, whose one device
// management.nvidia.com/gpu=all gives a container every NVIDIA device
// node (nvidia-ctk cdi generate --mode=management; gpuenv's
// container_toolkit writes it beside the CDI spec).
const managementKind = "management.nvidia.com/gpu"

// containerManagementCDI judges the management spec engines use, where
// there is one: a device node it names that is gone fails every
// container that asks for it, and on a host with a GPU in MIG mode one
// without the MIG config and monitor capability nodes starts a MIG
// manager or nvidia-smi that cannot create or list the instances.
func (d *doctor) containerManagementCDI() {
	c := d.obs.Containers
	check := Check{ID: "containers.cdi_management", Group: GroupContainers}
	var inUse *facts.CDISpec
	for i, s := range c.CDISpecs {
		if s.Kind == managementKind && s.Error == "" && (inUse == nil || strings.HasPrefix(s.Path, "/var/run/cdi/") && !strings.HasPrefix(inUse.Path, "/var/run/cdi/")) {
			inUse = &c.CDISpecs[i]
		}
	}
	if inUse == nil {
		return
	}
	check.Evidence = []string{inUse.Path + " (in use for " + managementKind + ")"}
	var gone []string
	for _, n := range inUse.DeviceNodes {
		if slices.Contains(inUse.Missing, n) {
			gone = append(gone, n)
		}
	}
	// The capability nodes a MIG manager needs, where a GPU is (or is
	// about to be) in MIG mode and the driver lists the capabilities.
	var unnamed, absent []string
	if migHost(d.obs) {
		for _, capability := range facts.MIGManagementCapabilities {
			n, ok := c.MIGCapabilityNode(capability)
			if !ok {
				continue
			}
			if !slices.Contains(inUse.DeviceNodes, n) {
				unnamed = append(unnamed, fmt.Sprintf("%s (mig/%s)", n, capability))
			}
			if !slices.ContainsFunc(d.obs.DeviceNodes, func(dn facts.DeviceNode) bool { return dn.Path == n }) {
				absent = append(absent, n)
			}
		}
		check.Evidence = append(check.Evidence, "a GPU is in MIG mode (NVML); /proc/driver/nvidia-caps/mig-minors lists the config and monitor capabilities")
	}
	fix := &Fix{Text: "Regenerate it with gpuenv, which writes it from the host's device nodes:", Spec: "container_toolkit {\n  cdi = true\n}"}
	switch {
	case len(gone) > 0:
		check.Status = Problem
		check.Summary = fmt.Sprintf("The CDI management spec %s names %s that %s gone (%s): every container asking for %s=all fails to start", inUse.Path, plural(len(gone), "device node"), isAre(len(gone)), strings.Join(gone, ", "), managementKind)
		check.Fix = fix
	case len(unnamed) > 0:
		check.Status = Problem
		nodes := "nodes"
		if len(unnamed) == 1 {
			nodes = "node"
		}
		check.Summary = fmt.Sprintf("The CDI management spec %s misses the MIG capability %s %s: a MIG manager or nvidia-smi in a container given %s=all cannot create or list MIG instances", inUse.Path, nodes, strings.Join(unnamed, ", "), managementKind)
		check.Fix = fix
		if len(absent) > 0 {
			// Regenerating names only the nodes that exist.
			check.Summary += fmt.Sprintf("; the host lacks %s as well, so no spec can name it until the driver makes it", strings.Join(absent, ", "))
			check.Fix = nil
		}
	default:
		check.Status = OK
		check.Summary = fmt.Sprintf("CDI management spec %s names %s, all present", inUse.Path, plural(len(inUse.DeviceNodes), "device node"))
	}
	d.add(check)
}

// migHost reports whether a GPU is in MIG mode, or will be at its next
// reset.
func migHost(obs *facts.Observation) bool {
	for _, g := range obs.NVML.Devices {
		if g.MIGMode == "enabled" || g.MIGModePending == "enabled" {
			return true
		}
	}
	return false
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}
