package devices

import (
	"slices"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
)

// predictUnits is gpuenv's boot units once the steps are applied: each
// unit file a step writes (with the MIG layout its command lines make) or
// removes, and each unit a step enables or disables.
func predictUnits(end *facts.Observation, steps []plan.Step) {
	paths := map[string]string{BootUnitPath: BootUnit, MIGBootUnitPath: MIGBootUnit}
	var units []facts.Unit
	edit := func(name string) *facts.Unit {
		if units == nil {
			units = slices.Clone(end.Units)
		}
		i := slices.IndexFunc(units, func(u facts.Unit) bool { return u.Name == name })
		if i < 0 {
			units = append(units, facts.Unit{Name: name})
			i = len(units) - 1
		}
		return &units[i]
	}
	for _, s := range steps {
		for _, op := range s.Operations {
			if f := op.File; f != nil && paths[f.Path] != "" {
				u := edit(paths[f.Path])
				u.File, u.MIGLayout = nil, nil
				if !f.Remove {
					u.File = &facts.FileDigest{Path: f.Path, SHA256: planner.Digest(f.Content)}
					if u.Name == MIGBootUnit {
						u.MIGLayout = unitLayout(f.Content)
					}
				}
			}
			if svc := op.Service; svc != nil && svc.Run == "" && (svc.Unit == BootUnit || svc.Unit == MIGBootUnit) {
				edit(svc.Unit).Enabled = svc.Enable
			}
		}
	}
	if units != nil {
		end.Units = units
	}
}
