package groups

import (
	"slices"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
)

// GID ranges of shadow-utils' login.defs defaults: groupadd -r takes the
// highest free GID from SYS_GID_MAX down, groupadd the lowest free from
// GID_MIN up (login.defs(5)).
const (
	sysGIDMin = 100
	sysGIDMax = 999
	gidMin    = 1000
	gidMax    = 60000
)

// predict is /etc/group as the steps' group operations leave it: groups
// created (with the GID groupadd would most likely give them: a root's
// login.defs may say otherwise, and no device node has a group gpuenv
// creates) and deleted, members added and removed.
func predict(end *facts.Observation, steps []plan.Step) {
	var gs []facts.Group
	cloned := false
	for _, s := range steps {
		for _, op := range s.Operations {
			g := op.Group
			if g == nil {
				continue
			}
			if !cloned {
				gs, cloned = make([]facts.Group, len(end.Groups)), true
				for i, x := range end.Groups {
					x.Members = slices.Clone(x.Members)
					gs[i] = x
				}
			}
			i := slices.IndexFunc(gs, func(x facts.Group) bool { return x.Name == g.Group })
			switch {
			case g.Delete:
				if i >= 0 {
					gs = slices.Delete(gs, i, i+1)
				}
				continue
			case i < 0 && g.Create:
				gs = append(gs, facts.Group{Name: g.Group, GID: freeGID(gs, g.System), Members: []string{}})
				i = len(gs) - 1
			case i < 0:
				continue
			}
			for _, u := range g.Add {
				if !slices.Contains(gs[i].Members, u) {
					gs[i].Members = append(gs[i].Members, u)
				}
			}
			gs[i].Members = slices.DeleteFunc(gs[i].Members, func(u string) bool { return slices.Contains(g.Remove, u) })
		}
	}
	if cloned {
		end.Groups = gs
	}
}

// freeGID is the GID groupadd picks among gs: for a system group the
// highest free one up to sysGIDMax, else the lowest free from gidMin.
func freeGID(gs []facts.Group, system bool) uint32 {
	used := func(id uint32) bool {
		return slices.ContainsFunc(gs, func(g facts.Group) bool { return g.GID == id })
	}
	if system {
		for id := uint32(sysGIDMax); id >= sysGIDMin; id-- {
			if !used(id) {
				return id
			}
		}
	}
	for id := uint32(gidMin); id < gidMax; id++ {
		if !used(id) {
			return id
		}
	}
	return gidMax
}
