package spec

import (
	"fmt"
	"slices"

	"github.com/hashicorp/hcl/v2"
)

func (l *loader) decodeContainerToolkit(blk *hcl.Block) *ContainerToolkit {
	b := l.openBlock(blk, "version", "engines", "cdi", "cdi_management", "default_runtime", "dev_char_links")
	c := &ContainerToolkit{Block: Block{DefRange: blk.DefRange, Absent: b.boolean("absent")}}
	c.Version = b.constraint("version")
	engines, ranges := b.list("engines", "Invalid engine", func(s string) string {
		if slices.Contains(engineNames, s) {
			return ""
		}
		return fmt.Sprintf("gpuenv configures the engines %s; %q is not one of them.%s",
			joinList(quoteAll(engineNames), "and"), s, didYouMean(s, engineNames))
	})
	if engines.Set {
		seen := map[string]int{}
		for i, e := range engines.Value {
			if j, dup := seen[e]; dup {
				l.errorf(ranges[i].Ptr(), "Duplicate engine",
					"The engine %q is listed twice in engines; the first is at %s.", e, ranges[j])
				engines = Attr[[]string]{}
				break
			}
			seen[e] = i
		}
	}
	c.Engines = Attr[[]Engine]{Set: engines.Set, Range: engines.Range}
	for _, e := range engines.Value {
		c.Engines.Value = append(c.Engines.Value, Engine(e))
	}
	c.CDI = b.boolean("cdi")
	c.CDIManagement = b.boolean("cdi_management")
	c.DefaultRuntime = b.boolean("default_runtime")
	c.DevCharLinks = b.boolean("dev_char_links")
	b.checkAbsent(c.Absent, "the NVIDIA container toolkit")
	if c.Absent.Value {
		return c
	}

	// Podman finds GPUs only through a CDI spec: without one, a podman
	// container asking for nvidia.com/gpu fails to start.
	if i := slices.Index(c.Engines.Value, EnginePodman); i >= 0 && c.CDI.Set && !c.CDI.Value {
		l.errorf(c.CDI.Range.Ptr(), "Podman needs the CDI spec",
			"engines lists \"podman\" (at %s), which finds GPUs only through a CDI spec and has no runtime entry to configure; with cdi = false no container it starts can use a GPU. Set cdi = true, or remove \"podman\" from engines.", ranges[i])
	}
	// The management spec is written beside the CDI spec, from the same
	// files; asking for it alone is a contradiction, not a default.
	if c.CDIManagement.Value && !c.EffectiveCDI() {
		why := "cdi is not set and engines lists no \"podman\""
		if c.CDI.Set {
			why = fmt.Sprintf("cdi = false (at %s)", c.CDI.Range)
		}
		l.errorf(c.CDIManagement.Range.Ptr(), "Management spec without the CDI spec",
			"cdi_management = true writes the CDI management spec beside the CDI spec, and %s, so gpuenv writes neither. Set cdi = true, or remove cdi_management.", why)
	}
	if c.DefaultRuntime.Value && c.Engines.Set && !slices.ContainsFunc(c.Engines.Value, hasRuntimeEntry) {
		l.errorf(c.DefaultRuntime.Range.Ptr(), "No engine for the default runtime",
			"default_runtime = true makes the NVIDIA runtime the default of the engines that have runtime entries (%s), and engines lists none of them. Add the engine, or remove default_runtime.",
			joinList(quoteAll(runtimeEngines()), "and"))
	}
	return c
}

// hasRuntimeEntry reports whether engine e is configured with a runtime
// entry in its own configuration file rather than through CDI alone.
func hasRuntimeEntry(e Engine) bool { return e != EnginePodman }

func runtimeEngines() []string {
	var out []string
	for _, e := range engineNames {
		if hasRuntimeEntry(Engine(e)) {
			out = append(out, e)
		}
	}
	return out
}

// EffectiveDevCharLinks reports whether the block makes the /dev/char
// links: unless dev_char_links = false.
func (c *ContainerToolkit) EffectiveDevCharLinks() bool {
	return !c.DevCharLinks.Set || c.DevCharLinks.Value
}

// EffectiveCDIManagement reports whether the block writes the CDI
// management spec (management.nvidia.com/gpu=all): with the CDI spec,
// unless cdi_management = false.
func (c *ContainerToolkit) EffectiveCDIManagement() bool {
	return c.EffectiveCDI() && (!c.CDIManagement.Set || c.CDIManagement.Value)
}

// EffectiveCDI reports whether the block writes the CDI spec: as the spec
// says, and otherwise when an engine reads GPUs from it (podman).
func (c *ContainerToolkit) EffectiveCDI() bool {
	if c.CDI.Set {
		return c.CDI.Value
	}
	return c.HasEngine(EnginePodman)
}
