package devaccess

import (
	"slices"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
)

// predict is the device access once the steps are applied: a node whose
// /dev/char link a step makes (or removes) has it (or not), and Docker's
// and containerd's cgroup drivers are read again from their predicted
// configuration. The cgroup version and a container's device rules stay
// as observed.
func predict(end *facts.Observation, steps []plan.Step) {
	a := end.DeviceAccess
	links := map[string]bool{}
	for _, s := range steps {
		for _, op := range s.Operations {
			if f := op.File; f != nil && (f.Symlink != "" || f.Remove) {
				links[f.Path] = !f.Remove
			}
		}
	}
	if len(links) > 0 {
		a.CharLinks, a.MissingCharLinks = []string{}, []string{}
		for _, n := range end.DeviceNodes {
			if !n.Char || !NeedsCharLink(n.Path) {
				continue
			}
			link := CharLink(n)
			has, planned := links[link]
			if !planned {
				has = slices.Contains(end.DeviceAccess.CharLinks, link)
			}
			if has {
				a.CharLinks = append(a.CharLinks, link)
			} else {
				a.MissingCharLinks = append(a.MissingCharLinks, n.Path)
			}
		}
	}
	// The engines' drivers come first, as Observe lists them; the
	// kubelet's and CRI-O's, read from files no step writes, after.
	a.CgroupDrivers = []facts.CgroupDriver{}
	for _, e := range end.Containers.Engines {
		if !e.Exists {
			continue
		}
		if d, ok := cgroupDriver(e, a.CgroupVersion); ok {
			a.CgroupDrivers = append(a.CgroupDrivers, d)
		}
	}
	for _, d := range end.DeviceAccess.CgroupDrivers {
		if _, fromEngine := cgroupDriver(facts.EngineConfig{Engine: d.Engine}, ""); !fromEngine {
			a.CgroupDrivers = append(a.CgroupDrivers, d)
		}
	}
	end.DeviceAccess = a
}
