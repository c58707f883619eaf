package doctor

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
)

// charLinkFix makes the links now and at every boot, as the container
// toolkit's notice (NVIDIA/nvidia-container-toolkit#48) gives it: a udev
// rule runs the same command when the driver binds.
var charLinkFix = &Fix{
	Text: "Create the /dev/char links for the NVIDIA device nodes, now and at every boot (a udev rule that runs when the nvidia driver binds), so that systemd keeps the containers' device rules when it reloads; or switch the engine to the cgroupfs driver.",
	Commands: []string{
		"nvidia-ctk system create-dev-char-symlinks --create-all",
		`echo 'ACTION=="add", DEVPATH=="/bus/pci/drivers/nvidia", RUN+="/usr/bin/nvidia-ctk system create-dev-char-symlinks --create-all"' > /lib/udev/rules.d/71-nvidia-dev-char.rules`,
	},
}

// containerDevices judges whether containers keep the GPUs they were given:
// on a host, whether systemd can name the device nodes when it rewrites a
// container's rules; inside a container, whether its device cgroup
// still admits them.
func (d *doctor) containerDevices() {
	if d.obs.Context.Kind == "container" || d.obs.Context.Container != nil {
		d.containerDeviceRules()
		return
	}
	d.charLinks()
}

func (d *doctor) charLinks() {
	a := d.obs.DeviceAccess
	var systemd []string
	for _, cd := range a.CgroupDrivers {
		if cd.Driver != "systemd" {
			continue
		}
		s := fmt.Sprintf("%s: %s uses the systemd cgroup driver", cd.File, cd.Engine)
		switch {
		case cd.Default && cd.Engine == "docker":
			s += fmt.Sprintf(" (its default under cgroup %s)", a.CgroupVersion)
		case cd.Default:
			s += " (its default)"
		}
		systemd = append(systemd, s)
	}
	tk := d.obs.Containers.Toolkit.Version != "" || len(d.obs.Containers.CDISpecs) > 0
	for _, e := range d.obs.Containers.Engines {
		tk = tk || e.NVIDIARuntime
	}
	if len(systemd) == 0 || !tk || len(a.CharLinks)+len(a.MissingCharLinks) == 0 {
		return
	}
	c := Check{ID: "containers.dev-char", Group: GroupDevices, Evidence: systemd}
	if len(a.MissingCharLinks) == 0 {
		c.Status, c.Summary = OK, "Every NVIDIA device node has its /dev/char link: containers keep their GPUs when systemd reloads"
		d.add(c)
		return
	}
	for _, n := range a.MissingCharLinks {
		c.Evidence = append(c.Evidence, n+": no /dev/char link")
	}
	c.Status = Warning
	c.Summary = fmt.Sprintf("%s lack /dev/char links while containers run under the systemd cgroup driver: the next systemctl daemon-reload removes the running containers' access to the GPUs (\"Failed to initialize NVML: Unknown Error\" inside them)", strings.Join(a.MissingCharLinks, ", "))
	c.Fix = charLinkFix
	d.add(c)
}

func (d *doctor) containerDeviceRules() {
	a := d.obs.DeviceAccess
	var nodes []facts.DeviceNode
	for _, n := range d.obs.DeviceNodes {
		if n.Char && strings.HasPrefix(n.Path, "/dev/nvidia") {
			nodes = append(nodes, n)
		}
	}
	if len(nodes) == 0 {
		return
	}
	c := Check{ID: "containers.device-cgroup", Group: GroupDevices}
	if a.CgroupVersion == "v2" {
		d.skip(c, "Under cgroup v2 a container's device rules are an eBPF program, which cannot be read from inside: if nvidia-smi says \"Failed to initialize NVML: Unknown Error\" while the device nodes are present, the host's systemd removed them (daemon-reload); recreate the container")
		return
	}
	if a.DeviceRulesFile == "" {
		return
	}
	c.Evidence = []string{fmt.Sprintf("%s: %s", a.DeviceRulesFile, strings.Join(a.DeviceRules, "; "))}
	var denied []string
	for _, n := range nodes {
		if !admitted(a.DeviceRules, n.Major, n.Minor) {
			denied = append(denied, fmt.Sprintf("%s (c %d:%d)", n.Path, n.Major, n.Minor))
		}
	}
	if len(denied) == 0 {
		c.Status, c.Summary = OK, "The container's device cgroup admits its NVIDIA device nodes"
		d.add(c)
		return
	}
	c.Status = Problem
	c.Summary = fmt.Sprintf("The container's device cgroup no longer lets it read and write %s: the nodes are present but every open fails (\"Failed to initialize NVML: Unknown Error\"); the host's systemd rewrote the rules (systemctl daemon-reload under the systemd cgroup driver) without the NVIDIA devices", strings.Join(denied, ", "))
	c.Fix = &Fix{Text: "Recreate the container (docker rm and docker run again, or delete the pod): its rules are set when it starts. On the host, so that it does not happen again: " + charLinkFix.Text, Commands: charLinkFix.Commands}
	d.add(c)
}

// admitted reports whether cgroup v1 device rules ("c 195:* rwm", "a
// *:* rwm") let a character device major:minor be read and written.
func admitted(rules []string, major, minor uint32) bool {
	for _, r := range rules {
		f := strings.Fields(r)
		if len(f) != 3 || f[0] != "a" && f[0] != "c" {
			continue
		}
		if f[0] == "a" && strings.ContainsRune(f[2], 'r') && strings.ContainsRune(f[2], 'w') {
			return true
		}
		mj, mn, ok := strings.Cut(f[1], ":")
		if !ok || !numberMatches(mj, major) || !numberMatches(mn, minor) {
			continue
		}
		if strings.ContainsRune(f[2], 'r') && strings.ContainsRune(f[2], 'w') {
			return true
		}
	}
	return false
}

func numberMatches(s string, n uint32) bool {
	if s == "*" {
		return true
	}
	v, err := strconv.ParseUint(s, 10, 32)
	return err == nil && uint32(v) == n
}
