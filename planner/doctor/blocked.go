package doctor

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
)

// computeModules are the driver's modules a CUDA program needs; Debian's
// packages name them nvidia-current*. The display modules (nvidia_drm,
// nvidia_modeset) matter to a desktop, not to compute.
var computeModules = []string{"nvidia", "nvidia_uvm", "nvidia_current", "nvidia_current_uvm"}

func driverModule(m string) bool {
	return m == "nvidia" || strings.HasPrefix(m, "nvidia_") && m != "nvidia_peermem" && m != "nvidia_current_peermem"
}

// hardBlock tells whether a directive keeps the module from loading
// whoever asks for it, rather than only from loading by itself at boot:
// an install command, "alias M off", the kernel's module_blacklist=. A
// plain blacklist (in a file or as modprobe.blacklist=) stops only
// loading by alias, so udev no longer loads it at boot, and dracut's
// rd.driver.blacklist= only the initramfs.
func hardBlock(d string) bool {
	return d == "install" || d == "alias off" || d == "module_blacklist"
}

// blockWriter names the tool that wrote a blacklist file, where its name
// says, with the command that takes it back.
func blockWriter(file string) (tool, undo string) {
	switch base := path.Base(file); {
	case base == "blacklist-nvidia.conf" && (strings.HasPrefix(file, "/lib/modprobe.d/") || strings.HasPrefix(file, "/usr/lib/modprobe.d/")):
		// canonical/nvidia-prime's prime-select writes it for the intel
		// profile and removes it for the nvidia one (prime-select's
		// _blacklist_nvidia and _enable_nvidia).
		return "nvidia-prime (prime-select intel)", "prime-select nvidia"
	case strings.Contains(base, "bbswitch") || base == "bumblebee.conf":
		return "a GPU switcher (Bumblebee, bbswitch, SUSEPrime)", ""
	}
	return "", ""
}

// kernelBlocked finds the nvidia modules that modprobe configuration or
// the kernel command line keeps from loading: PRIME tools' profiles,
// Bumblebee, vendor scripts, a kernel parameter left from an install.
func (d *doctor) kernelBlocked() {
	c := Check{ID: "kernel.blocked", Group: GroupKernel}
	if hidden, why := d.hostKernelHidden(); hidden {
		d.skip(c, why)
		return
	}
	if !d.hasGPU() && len(d.logEvents(facts.EventBoundToNova, facts.EventRmInitFailed)) == 0 {
		d.skip(c, "No GPU for the nvidia modules to drive")
		return
	}
	loaded := func(m string) bool {
		return slices.ContainsFunc(d.obs.Kernel.Loaded, func(l facts.LoadedModule) bool { return l.Name == m })
	}
	var hard, soft, display []facts.Blacklist
	for _, b := range d.obs.Kernel.Blacklists {
		if !driverModule(b.Module) || b.Directive == "rd.driver.blacklist" {
			continue
		}
		switch {
		case !slices.Contains(computeModules, b.Module):
			display = append(display, b)
		case hardBlock(b.Directive):
			hard = append(hard, b)
		default:
			soft = append(soft, b)
		}
	}
	all := slices.Concat(hard, soft, display)
	if len(all) == 0 {
		c.Status, c.Summary = OK, "Nothing keeps the nvidia modules from loading"
		d.add(c)
		return
	}
	if len(hard)+len(soft) == 0 {
		// A compute host may keep the display modules out on purpose.
		for _, b := range display {
			c.Evidence = append(c.Evidence, fmt.Sprintf("%s: %s %s", b.File, b.Directive, b.Module))
		}
		c.Status, c.Summary = OK, "Only display modules are kept from loading; CUDA needs none of them"
		d.add(c)
		return
	}
	var files []string
	for _, b := range all {
		where := b.File
		if b.Line > 0 {
			where = fmt.Sprintf("%s:%d", b.File, b.Line)
		}
		c.Evidence = append(c.Evidence, fmt.Sprintf("%s: %s %s", where, b.Directive, b.Module))
		if !slices.Contains(files, b.File) {
			files = append(files, b.File)
		}
	}
	var tools, undo []string
	for _, f := range files {
		if t, u := blockWriter(f); t != "" {
			c.Evidence = append(c.Evidence, f+": written by "+t)
			if !slices.Contains(tools, t) {
				tools = append(tools, t)
			}
			if u != "" && !slices.Contains(undo, u) {
				undo = append(undo, u)
			}
		}
	}
	nvidiaUp := d.moduleLoaded()
	names := func(bl []facts.Blacklist) string {
		var out []string
		for _, b := range bl {
			if !slices.Contains(out, b.Module) {
				out = append(out, b.Module)
			}
		}
		return strings.Join(out, ", ")
	}
	switch {
	case len(hard) > 0 && !nvidiaUp:
		c.Status = Problem
		c.Summary = fmt.Sprintf("The configuration keeps %s from loading at all (%s): no program can reach the GPU", names(hard), hard[0].Directive)
	case len(soft) > 0 && !nvidiaUp:
		c.Status = Problem
		c.Summary = fmt.Sprintf("%s is blacklisted, so nothing loads it at boot, and it is not loaded", names(soft))
	case len(hard) > 0 || slices.ContainsFunc(soft, func(b facts.Blacklist) bool { return !loaded(b.Module) }):
		c.Status = Warning
		c.Summary = fmt.Sprintf("%s is loaded now, but the configuration keeps it from loading after a reboot or a reload", names(slices.Concat(hard, soft)))
	default:
		c.Status = Warning
		c.Summary = fmt.Sprintf("The configuration keeps %s from loading by itself: it loads now only because something loads it by name", names(slices.Concat(hard, soft)))
	}
	fix := &Fix{}
	if len(undo) > 0 {
		fix.Text = fmt.Sprintf("%s wrote the blacklist; select the profile that uses the NVIDIA GPU, which removes it (on-demand keeps the integrated GPU for the desktop), then reboot:", strings.Join(tools, ", "))
		fix.Commands = append(undo, "reboot")
	} else {
		text := "Remove the lines above"
		if len(tools) > 0 {
			text += fmt.Sprintf(" (%s wrote them; switch it to the NVIDIA GPU, or remove it, instead)", strings.Join(tools, ", "))
		}
		for _, b := range all {
			if b.File == "/proc/cmdline" {
				text += "; the kernel parameters come from the boot loader's configuration (GRUB_CMDLINE_LINUX in /etc/default/grub, then update-grub or grub2-mkconfig)"
				break
			}
		}
		fix.Text = text + ", rebuild the initramfs and reboot:"
		fix.Commands = []string{d.initramfsCommand(), "reboot"}
	}
	c.Fix = fix
	d.add(c)
}
