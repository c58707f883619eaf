package doctor

import (
	"fmt"
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

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}
