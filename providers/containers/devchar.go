package containers

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/observer/devaccess"
	"github.com/gpuenv/gpuenv/spec"
)

// DevCharAddress makes the /dev/char links of the NVIDIA device nodes and
// the udev rule that makes them again whenever the driver binds.
const DevCharAddress = "container_toolkit.dev_char"

// DevCharRulePath is the rule gpuenv writes: in /etc, which outranks a
// rule of the same name in /usr/lib or /lib.
var DevCharRulePath = path.Join(DevCharRuleDirs[0], DevCharRuleName)

// DevCharRule is NVIDIA's rule for the links, as the container toolkit's
// notice about containers losing their GPUs gives it
// (NVIDIA/nvidia-container-toolkit#48; the toolkit's troubleshooting
// page, "Containers losing access to GPUs with error: Failed to
// initialize NVML: Unknown Error"): when the nvidia driver registers
// (every boot, and every time its modules are loaded again) the toolkit's
// command makes a link for every NVIDIA device node. The command comes
// with the toolkit this block installs.
const DevCharRule = `# Written by gpuenv (container_toolkit): when the nvidia driver loads, at
# boot and after its modules are reloaded, make the /dev/char/MAJOR:MINOR
# links of the NVIDIA device nodes. With systemd's cgroup driver, systemd
# names devices by these links when it rewrites a container's device rules
# (systemctl daemon-reload); without them the containers lose their GPUs.
ACTION=="add", DEVPATH=="/bus/pci/drivers/nvidia", RUN+="/usr/bin/nvidia-ctk system create-dev-char-symlinks --create-all"
`

// planDevChar plans the links the observation lacks and the rule that
// keeps them; nil when both are in place, when the block turns them off,
// or inside a container, whose /dev is the engine's.
func planDevChar(req *planner.Request, c *spec.ContainerToolkit, toolkitStep *plan.Step) *plan.Step {
	obs := req.Facts
	if !c.EffectiveDevCharLinks() || req.Desired != nil && req.Desired.NoKernel != "" || obs.Context.Kind == "container" || obs.Context.Container != nil {
		return nil
	}
	ops, made, rule := devCharOps(obs)
	if len(ops) == 0 {
		return nil
	}
	step := &plan.Step{
		Address:    DevCharAddress,
		Action:     plan.Create,
		ReasonCode: plan.ReasonMissing,
		After:      map[string]string{"udev_rule": DevCharRulePath},
		Operations: ops,
		DependsOn:  []string{"driver"},
	}
	if toolkitStep != nil {
		step.DependsOn = append(step.DependsOn, ToolkitAddress)
	}
	if len(made) > 0 {
		step.After["links"] = strings.Join(made, ", ")
	}
	var why []string
	if len(made) > 0 {
		why = append(why, fmt.Sprintf("%s lack their %s links, which systemd names devices by when it rewrites a container's device rules", strings.Join(linkTargets(made), ", "), plan.DevCharDir))
	}
	if len(obs.DeviceAccess.CharLinks) > 0 || rule != "missing" {
		step.Action = plan.Update
		before := map[string]string{}
		if len(obs.DeviceAccess.CharLinks) > 0 {
			before["links"] = strings.Join(obs.DeviceAccess.CharLinks, ", ")
		}
		if rule != "missing" {
			before["udev_rule"] = obs.Containers.DevCharRules[0].Path
		}
		step.Before = before
	}
	switch rule {
	case "missing":
		why = append(why, fmt.Sprintf("no udev rule makes them when the driver loads, at boot or after a module reload; writes %s", DevCharRulePath))
	case "differs":
		why = append(why, fmt.Sprintf("%s is not the rule gpuenv writes; replaces it", DevCharRulePath))
	}
	step.Reason = plan.Sentence(why)
	return step
}

// devCharOps are the operations that make the links obs lacks and the
// rule, with the links as "link → node" and the rule's state.
func devCharOps(obs *facts.Observation) (ops []plan.Operation, made []string, rule string) {
	nodes := map[string]facts.DeviceNode{}
	for _, n := range obs.DeviceNodes {
		nodes[n.Path] = n
	}
	for _, p := range obs.DeviceAccess.MissingCharLinks {
		n, ok := nodes[p]
		if !ok || !n.Char || !devaccess.NeedsCharLink(p) {
			continue
		}
		link := devaccess.CharLink(n)
		ops = append(ops, plan.Operation{Kind: plan.OpFile, File: &plan.FileOp{Path: link, Symlink: p}})
		made = append(made, fmt.Sprintf("%s → %s", link, p))
	}
	rule = devCharRuleState(obs.Containers.DevCharRules)
	if rule != "in place" {
		ops = append(ops, plan.Operation{Kind: plan.OpFile, File: &plan.FileOp{Path: DevCharRulePath, Content: DevCharRule, Mode: 0o644}})
	}
	return ops, made, rule
}

// DevCharInPlace reports whether the host has every /dev/char link the
// block makes and a rule that makes them again: a spec captured from it
// keeps dev_char_links on only then, so that its plan changes nothing.
func DevCharInPlace(obs *facts.Observation) bool {
	ops, _, _ := devCharOps(obs)
	return len(ops) == 0
}

// devCharRuleState says whether gpuenv's rule is "in place" (its own in
// /etc, or a rule of the name the administrator or a package put in
// /usr/lib or /lib and /etc does not override), "differs" (/etc holds
// another), or "missing".
func devCharRuleState(rules []facts.FileDigest) string {
	if len(rules) == 0 {
		return "missing"
	}
	i := slices.IndexFunc(rules, func(r facts.FileDigest) bool { return r.Path == DevCharRulePath })
	switch {
	case i < 0:
		return "in place"
	case rules[i].SHA256 == planner.Digest(DevCharRule):
		return "in place"
	}
	return "differs"
}

// linkTargets are the device nodes of "link → node" texts.
func linkTargets(made []string) []string {
	out := make([]string, len(made))
	for i, m := range made {
		_, out[i], _ = strings.Cut(m, " → ")
	}
	return out
}
