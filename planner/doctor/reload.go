package doctor

import (
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/reload"
)

// mismatchFix says whether reloading the modules fixes a driver/library
// mismatch now, with the commands when it does, and a reboot when not.
func mismatchFix(obs *facts.Observation) *Fix {
	rp := reload.Decide(obs, reload.Options{})
	hold := " Hold the driver so that unattended upgrades cannot do it again:"
	if rp.Possible() {
		return &Fix{Text: "Reload the modules now, no reboot needed: nothing else holds them." + hold, Spec: "driver {\n  hold = true\n}", Commands: rp.Commands()}
	}
	return &Fix{
		Text:     "Reboot: a reload cannot fix it now, since " + rp.Why() + ". Once that is no longer so, stopping every GPU program and reloading the modules also works." + hold,
		Spec:     "driver {\n  hold = true\n}",
		Commands: []string{"rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia", "modprobe nvidia"},
	}
}
