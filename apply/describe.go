package apply

import (
	"fmt"
	"strings"

	"github.com/gpuenv/gpuenv/planner/plan"
)

// Describe says in words what an operation does, as progress prints it:
// "installing cuda-toolkit-12-4 12.4.1-1".
func Describe(op plan.Operation) string {
	switch {
	case op.Packages != nil:
		p := op.Packages
		var parts []string
		if p.Venv != "" {
			parts = append(parts, "in "+p.Venv)
		}
		if len(p.Unhold) > 0 {
			parts = append(parts, "releasing the hold on "+strings.Join(p.Unhold, ", "))
		}
		if len(p.Install) > 0 {
			pins := make([]string, len(p.Install))
			for i, pin := range p.Install {
				switch {
				case pin.Version != "":
					pins[i] = pin.Name + " " + pin.Version
				case pin.Constraint != "":
					pins[i] = pin.Name + " (newest " + pin.Constraint + ")"
				default:
					pins[i] = pin.Name + " (newest)"
				}
			}
			verb := "installing "
			switch {
			case p.Reinstall:
				verb = "reinstalling "
			case p.AllowDowngrade:
				verb = "installing (downgrading) "
			}
			parts = append(parts, verb+strings.Join(pins, ", "))
		}
		if len(p.Remove) > 0 {
			verb := "removing "
			if p.Purge {
				verb = "purging "
			}
			parts = append(parts, verb+strings.Join(p.Remove, ", "))
		}
		if len(p.Hold) > 0 {
			parts = append(parts, "holding "+strings.Join(p.Hold, ", "))
		}
		return string(p.Manager) + ": " + strings.Join(parts, "; ")
	case op.File != nil:
		if op.File.Remove {
			return "removing " + op.File.Path
		}
		if op.File.Symlink != "" {
			return "linking " + op.File.Path + " to " + op.File.Symlink
		}
		if op.File.Key != nil {
			return "fetching and checking the key " + op.File.Key.URL + " for " + op.File.Path
		}
		return "writing " + op.File.Path
	case op.Group != nil:
		g := op.Group
		var parts []string
		switch {
		case g.Delete:
			parts = append(parts, "deleting group "+g.Group)
		case g.Create:
			parts = append(parts, "creating group "+g.Group)
		}
		if len(g.Add) > 0 {
			parts = append(parts, fmt.Sprintf("adding %s to %s", strings.Join(g.Add, ", "), g.Group))
		}
		if len(g.Remove) > 0 {
			parts = append(parts, fmt.Sprintf("removing %s from %s", strings.Join(g.Remove, ", "), g.Group))
		}
		return strings.Join(parts, ", ")
	case op.Kernel != nil:
		return describeKernel(op.Kernel)
	case op.Service != nil:
		switch op.Service.Run {
		case plan.ServiceStop:
			return "stopping " + op.Service.Unit
		case plan.ServiceStart:
			return "starting " + op.Service.Unit
		}
		verb := "disabling "
		if op.Service.Enable {
			verb = "enabling "
		}
		return verb + op.Service.Unit
	case op.Device != nil && op.Device.Instance != nil:
		verb := "creating"
		if op.Device.Value == plan.GPUInstanceAbsent {
			verb = "destroying"
		}
		return fmt.Sprintf("%s MIG instance %s at memory slice %d of GPU %d", verb, op.Device.Instance.Profile, op.Device.Instance.Start, op.Device.Index)
	case op.Device != nil:
		return fmt.Sprintf("setting %s of GPU %d to %s", op.Device.Setting, op.Device.Index, op.Device.Value)
	case op.Refresh != nil:
		return fmt.Sprintf("fetching %s's package indexes", op.Refresh.Manager)
	}
	return string(op.Kind)
}

// DescribeInverse says what undoing an operation restores.
func DescribeInverse(inv *Inverse) string {
	switch {
	case inv == nil:
		return "nothing"
	case inv.File != nil:
		if !inv.File.Existed {
			return "removing " + inv.File.Path
		}
		return "restoring " + inv.File.Path
	case inv.Group != nil:
		if !inv.Group.Existed {
			return "deleting group " + inv.Group.Group
		}
		return fmt.Sprintf("restoring group %s members (%s)", inv.Group.Group, strings.Join(inv.Group.Members, ","))
	case inv.Packages != nil:
		if inv.Packages.VenvCreated {
			return "removing the virtual environment " + inv.Packages.Venv
		}
		var parts []string
		for _, p := range inv.Packages.Packages {
			v := p.Version
			if v == "" {
				v = "(absent)"
			}
			if p.Held {
				v += " held"
			}
			parts = append(parts, p.Name+" "+v)
		}
		return inv.Packages.Manager + ": restoring " + strings.Join(parts, ", ")
	case inv.Kernel != nil:
		switch inv.Kernel.Action {
		case "":
			if inv.Kernel.Nothing != "" {
				return "nothing: " + inv.Kernel.Nothing
			}
			return "nothing (the module was already in that state)"
		case "rebuild_initramfs":
			return "rebuilding the initramfs from the restored files"
		case "load_module":
			if inv.Kernel.AfterPackages {
				what := "loading module " + inv.Kernel.Module + " again from the restored packages' files"
				if inv.Kernel.Version != "" {
					what += " (" + inv.Kernel.Version + ")"
				}
				return what
			}
		}
		return describeKernel(&plan.KernelOp{Action: plan.KernelAction(inv.Kernel.Action), Module: inv.Kernel.Module})
	case inv.Service != nil && inv.Service.AfterPackages:
		return "starting " + inv.Service.Unit + " again once the old module is loaded"
	case inv.Service != nil && inv.Service.RunOnly:
		if inv.Service.Active != nil && *inv.Service.Active {
			return "starting " + inv.Service.Unit
		}
		return "stopping " + inv.Service.Unit
	case inv.Service != nil:
		if inv.Service.Enabled {
			return "re-enabling " + inv.Service.Unit
		}
		return "disabling " + inv.Service.Unit
	case inv.Device != nil && inv.Device.Instance != nil:
		if inv.Device.Value == plan.GPUInstancePresent {
			return fmt.Sprintf("creating MIG instance %s at memory slice %d of GPU %s again", inv.Device.Instance.Profile, inv.Device.Instance.Start, inv.Device.UUID)
		}
		return fmt.Sprintf("destroying MIG instance %s at memory slice %d of GPU %s", inv.Device.Instance.Profile, inv.Device.Instance.Start, inv.Device.UUID)
	case inv.Device != nil:
		return fmt.Sprintf("setting %s of GPU %s back to %s", inv.Device.Setting, inv.Device.UUID, inv.Device.Value)
	case inv.Refresh != nil:
		return "nothing: the package indexes are a cache of the archives, kept as fetched"
	}
	return string(inv.Kind)
}

// summarize is a generation's one-line summary of a plan.
func summarize(p *plan.Plan) string {
	var addrs []string
	for _, s := range p.Steps {
		addrs = append(addrs, s.Action.Symbol()+s.Address)
	}
	return fmt.Sprintf("%d steps, %d operations: %s", len(p.Steps), len(planItems(p)), strings.Join(addrs, " "))
}
