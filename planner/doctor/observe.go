package doctor

import (
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
	findings "github.com/gpuenv/gpuenv/planner/finding"
)

// observeLayers are the sections of the observation that observe prints
// each of its stage's rules under, by ID (the part before a colon).
var observeLayers = map[string]string{
	"pci.driver":          "pci",
	"kernel.module":       "kernel",
	"kernel.nouveau":      "kernel",
	"kernel.initramfs":    "kernel",
	"kernel.dkms":         "kernel",
	"nvml.init":           "nvml",
	CheckGPUBus:           "health",
	"driver.versions":     "driver",
	"packages.unfinished": "packages",
}

// ObserveFindings are the observation's problems: the warnings and
// problems of the rules of stage observe, judged on the finished
// observation, in doctor's words and with doctor's verdicts. Observe has
// no rules of its own, so that each rule is worded once.
func ObserveFindings(obs *facts.Observation) findings.Problems {
	var out findings.Problems
	for _, c := range Judge(Input{Obs: obs}, findings.Observe) {
		if c.Stage != findings.Observe || !c.Status.Flagged() {
			continue
		}
		id, _, _ := strings.Cut(c.ID, ":")
		c.Layer = observeLayers[id]
		out = append(out, c)
	}
	return out
}

// gpuBus is the health check gpu.bus alone, which observe reports: the
// others need NVML's counters over time or the kernel log, and are
// doctor's.
func (d *doctor) gpuBus() {
	all := &doctor{in: d.in, obs: d.obs}
	all.gpuHealth()
	for _, c := range all.out {
		if c.ID == CheckGPUBus {
			d.out = append(d.out, c)
		}
	}
}

// packagesUnfinished flags packages a package manager left half done: an
// install or upgrade that was interrupted, whose files or configuration
// are not what any version expects. Each gets the fix that works for its
// state: dpkg --configure -a finishes configuring unpacked packages and
// runs pending triggers, but passes over a package whose unpack was cut
// short (half-installed, or flagged reinstreq): only reinstalling it,
// removing it, or gpuenv rollback where a gpuenv run was cut short, mends
// that one.
func (d *doctor) packagesUnfinished() {
	obs := d.obs
	c := Check{ID: "packages.unfinished", Group: GroupKernel}
	if d.skipUnpacked(c, "The package database's states") {
		return
	}
	if len(obs.Packages.Packages) == 0 {
		d.skip(c, "No installed packages were read")
		return
	}
	db := "/var/lib/dpkg/status"
	if obs.Packages.Manager == facts.DatabaseRPM {
		db = "rpm -qa"
	}
	var reinstall, names, configure, evidence []string
	for _, p := range obs.Packages.Packages {
		switch {
		case p.ReinstallRequired || p.State == facts.StateHalfInstalled:
			state := string(p.State)
			if p.ReinstallRequired {
				state += ", reinstall required"
			}
			reinstall = append(reinstall, p.Name)
			names = append(names, p.Name+" ("+state+")")
			evidence = append(evidence, db+": "+p.Name+" "+state)
		case p.State == facts.StateUnpacked, p.State == facts.StateHalfConfigured, p.State == facts.StateTriggersAwaited, p.State == facts.StateTriggersPending:
			configure = append(configure, p.Name+" ("+string(p.State)+")")
			evidence = append(evidence, db+": "+p.Name+" "+string(p.State))
		}
	}
	if len(reinstall)+len(configure) == 0 {
		c.Status, c.Summary = OK, "Every installed package finished installing"
		d.add(c)
		return
	}
	if len(reinstall) > 0 {
		pkgs := strings.Join(reinstall, " ")
		d.add(Check{ID: c.ID, Group: c.Group, Status: Problem,
			Summary:  "an install or upgrade stopped while unpacking, and dpkg --configure -a does not mend it: " + strings.Join(names, ", "),
			Evidence: evidence[:len(reinstall)],
			Fix: &Fix{Text: "if a gpuenv apply or rollback was cut short (gpuenv history shows it running or failed), run gpuenv rollback; " +
				"otherwise reinstall them (apt-get install --reinstall " + pkgs + ", or dpkg -i of their .deb files), " +
				"or remove those that should not be installed (dpkg --remove --force-remove-reinstreq " + pkgs + ")"}})
	}
	if len(configure) == 0 {
		return
	}
	fix := "run dpkg --configure -a"
	if obs.Packages.Manager == facts.DatabaseRPM {
		fix = "finish or undo the transaction with dnf"
	}
	d.add(Check{ID: c.ID, Group: c.Group, Status: Problem,
		Summary:  "an install or upgrade did not finish: " + strings.Join(configure, ", "),
		Evidence: evidence[len(reinstall):],
		Fix:      &Fix{Text: fix}})
}
