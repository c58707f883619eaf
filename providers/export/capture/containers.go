package capture

import (
	"fmt"
	"slices"
	"strings"

	"github.com/zclconf/go-cty/cty"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/containers"
	cdipkg "github.com/gpuenv/gpuenv/providers/host/cdi"
)

// containerToolkit captures NVIDIA's container toolkit: its version, the
// engines whose configuration names the NVIDIA runtime, whether that is
// their default, and the CDI spec when it is the one gpuenv writes.
func (w *writer) containerToolkit(obs *facts.Observation) {
	c := obs.Containers
	if c.Toolkit.Version == "" {
		return
	}
	var engines, defaults, notes []string
	for _, e := range c.Engines {
		switch {
		case !e.Exists || !e.NVIDIARuntime:
		case e.Error != "":
			notes = append(notes, fmt.Sprintf("%s names the NVIDIA runtime but cannot be read (%s); %s is left out of engines.", e.Path, e.Error, e.Engine))
		default:
			engines = append(engines, e.Engine)
			if e.DefaultRuntime == containers.RuntimeName {
				defaults = append(defaults, e.Engine)
			}
		}
	}
	// default_runtime is all or nothing; left unset, each engine keeps
	// its own default.
	allDefault := len(engines) > 0 && len(defaults) == len(engines)
	if len(defaults) > 0 && !allDefault {
		notes = append(notes, fmt.Sprintf("The NVIDIA runtime is the default of %s only; default_runtime would make it every engine's, so it is left unset and each engine keeps its default here.", strings.Join(defaults, ", ")))
	}
	cdi := false
	for _, s := range c.CDISpecs {
		if s.Path != cdipkg.CDISpecPath {
			continue
		}
		if same, why := gpuenvCDI(obs, s); same {
			cdi = true
		} else {
			notes = append(notes, fmt.Sprintf("%s is not the CDI spec gpuenv would write from this host (%s), so cdi is left unset and it stays as it is.", s.Path, why))
		}
	}
	// cdi = true also writes the management spec: kept where it is
	// gpuenv's, else turned off, so that the captured spec plans no
	// change.
	management := false
	if cdi {
		for _, s := range c.CDISpecs {
			if s.Path != cdipkg.ManagementSpecPath {
				continue
			}
			if same, why := gpuenvManagementCDI(obs, s); same {
				management = true
			} else {
				notes = append(notes, fmt.Sprintf("%s is not the CDI management spec gpuenv would write from this host (%s), so cdi_management = false leaves it as it is.", s.Path, why))
			}
		}
		if !management && !slices.ContainsFunc(c.CDISpecs, func(s facts.CDISpec) bool { return s.Path == cdipkg.ManagementSpecPath }) {
			notes = append(notes, fmt.Sprintf("There is no CDI management spec (%s), so cdi_management = false leaves the host without one; without it gpuenv writes it, giving containers that ask for %s=all every NVIDIA device node.", cdipkg.ManagementSpecPath, cdipkg.ManagementKind))
		}
	}
	devChar := containers.DevCharInPlace(obs)
	if !devChar {
		notes = append(notes, fmt.Sprintf("The NVIDIA device nodes lack /dev/char links, or no udev rule (%s) makes them when the driver loads, so dev_char_links = false leaves the host as it is; without it gpuenv makes them, and containers keep their GPUs when systemd reloads.", containers.DevCharRulePath))
	}
	comment := []string{fmt.Sprintf("NVIDIA's container toolkit %s (%s).", c.Toolkit.Version, strings.Join(packageNames(c.Toolkit.Packages), ", "))}
	b := w.block("container_toolkit", nil, append(comment, notes...)...)
	b.SetAttributeValue("version", cty.StringVal(c.Toolkit.Version))
	if len(engines) > 0 {
		b.SetAttributeValue("engines", strings2cty(engines))
	}
	if cdi {
		b.SetAttributeValue("cdi", cty.True)
		if !management {
			b.SetAttributeValue("cdi_management", cty.False)
		}
	}
	if allDefault {
		b.SetAttributeValue("default_runtime", cty.True)
	}
	if !devChar {
		b.SetAttributeValue("dev_char_links", cty.False)
	}
}

// gpuenvCDI tells whether the CDI spec on disk is the one gpuenv makes
// from the host's files, which cdi = true keeps without a change.
func gpuenvCDI(obs *facts.Observation, on facts.CDISpec) (bool, string) {
	cs := obs.Containers
	s, err := cdipkg.GenerateCDI(&cs, obs.DeviceNodes, obs.NVML.Devices)
	return sameCDI(s, err, on)
}

// gpuenvManagementCDI is gpuenvCDI for the management spec.
func gpuenvManagementCDI(obs *facts.Observation, on facts.CDISpec) (bool, string) {
	cs := obs.Containers
	s, err := cdipkg.GenerateManagementCDI(&cs, obs.DeviceNodes)
	return sameCDI(s, err, on)
}

// sameCDI compares a spec gpuenv made (or failed to make: err) with the
// one on disk.
func sameCDI(s *cdispec.Spec, err error, on facts.CDISpec) (bool, string) {
	if err != nil {
		return false, err.Error()
	}
	content, err := cdipkg.MarshalCDI(s)
	if err != nil {
		return false, err.Error()
	}
	if planner.Digest(content) != on.SHA256 {
		return false, "its bytes differ"
	}
	return true, ""
}

func packageNames(pkgs []facts.Package) []string {
	out := make([]string, len(pkgs))
	for i, p := range pkgs {
		out[i] = p.Name
	}
	return out
}
