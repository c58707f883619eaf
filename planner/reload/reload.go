// Package reload decides, from an observation alone, whether the nvidia
// kernel modules can be swapped for the ones on disk without a reboot,
// and what that takes: the GPU services to stop and start again, the
// processes to stop, and the modules to unload and load, in the kernel's
// dependency order. The driver provider plans the reload with it and
// doctor says with it whether a reload would fix a driver/library
// mismatch now.
package reload

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
)

// Service is a GPU service gpuenv stops before unloading the modules and
// starts again after loading the new ones: each holds the GPU while it
// runs, and each is restarted by systemd the same way it was started.
type Service struct {
	Unit string
	// Command is its daemon's name as /proc/PID/comm shows it: the
	// kernel keeps the first 15 bytes of the program's name.
	Command string
}

// Services are the GPU services gpuenv knows how to restart, in the order
// they are stopped (started in the reverse order): the exporters before
// the host engine they read, persistence last.
var Services = []Service{
	{Unit: "dcgm-exporter.service", Command: "dcgm-exporter"},
	{Unit: "nvidia-dcgm.service", Command: "nv-hostengine"},
	{Unit: "nvidia-fabricmanager.service", Command: "nv-fabricmanage"},
	{Unit: "nvidia-persistenced.service", Command: "nvidia-persiste"},
}

// UnitOf is the GPU service whose daemon is the command comm; "" for any
// other.
func UnitOf(comm string) string {
	for _, s := range Services {
		if s.Command == comm {
			return s.Unit
		}
	}
	return ""
}

// Modules are the nvidia modules a reload unloads, when loaded, in the
// order the kernel lets them go when /proc/modules does not say more:
// every module before the ones it uses.
var Modules = []string{"nvidia_peermem", "nvidia_uvm", "nvidia_drm", "nvidia_modeset", "nvidia"}

// Role is the module a loaded module is, whatever its build calls it:
// Debian's nvidia_current_uvm is nvidia_uvm.
func Role(module string) string {
	if rest, ok := strings.CutPrefix(module, "nvidia_current"); ok {
		return "nvidia" + rest
	}
	return module
}

// Options are what the user said.
type Options struct {
	// Interrupt allows stopping the GPU processes that hold the modules
	// (--interrupt-gpu-processes).
	Interrupt bool
	// BuildsModule is set when the new module is built on the host by
	// DKMS, so that it is signed, if at all, by DKMS's own key.
	BuildsModule bool
}

// Process is a process a reload stops.
type Process struct {
	PID     int
	Command string
	// What says what it holds, for the plan.
	What string
}

// Plan is a reload's verdict and, when possible, its parts.
type Plan struct {
	// Loaded is false when no nvidia module is loaded: there is nothing
	// to reload, and the new module loads when a program first asks.
	Loaded bool
	// Blockers say why a reload is not possible now, one sentence each;
	// none when it is.
	Blockers []string
	// Stop are the GPU services to stop first and start again last.
	Stop []string
	// Interrupt are the processes to stop (only with Options.Interrupt).
	Interrupt []Process
	// Unload are the loaded modules in unload order; Load the same in
	// load order.
	Unload, Load []string
}

// Possible reports whether the modules can be reloaded now.
func (p *Plan) Possible() bool { return p.Loaded && len(p.Blockers) == 0 }

// Why is the blockers as one sentence.
func (p *Plan) Why() string { return strings.Join(p.Blockers, "; ") }

// Decide reads obs and tells whether, and how, the nvidia modules can be
// reloaded.
func Decide(obs *facts.Observation, o Options) Plan {
	var p Plan
	// By role: Debian names its build of the modules nvidia_current,
	// nvidia_current_drm …, the same modules by another name.
	loaded := map[string]facts.LoadedModule{}
	for _, m := range obs.Kernel.Loaded {
		loaded[Role(m.Name)] = m
	}
	if _, ok := loaded["nvidia"]; !ok {
		return p
	}
	p.Loaded = true
	for _, role := range unloadOrder(loaded) {
		p.Unload = append(p.Unload, loaded[role].Name)
	}
	p.Load = slices.Clone(p.Unload)
	slices.Reverse(p.Load)

	switch {
	case !obs.Init.Live:
		p.Blockers = append(p.Blockers, fmt.Sprintf("the root %s is not the running system, whose kernel has the modules", obs.Root))
	case obs.Init.Chroot == "yes":
		p.Blockers = append(p.Blockers, "gpuenv runs in a chroot: the kernel and its modules are the machine's, not this root's")
	case obs.Init.Chroot == "unknown":
		p.Blockers = append(p.Blockers, "gpuenv cannot tell whether it runs in a chroot (process 1's root, /proc/1/root, is hidden from it): the kernel may be another system's")
	}
	switch obs.Context.Kind {
	case "container":
		p.Blockers = append(p.Blockers, "this is a container: its kernel and modules are the host's")
	case "wsl":
		p.Blockers = append(p.Blockers, "under WSL the GPU driver is Windows'")
	}
	if obs.Kernel.SecureBoot == "enabled" && o.BuildsModule && obs.Kernel.SigningKey != "enrolled" {
		key := "DKMS's signing key is not enrolled"
		if obs.Kernel.SigningKey == "" {
			key = "gpuenv cannot tell whether DKMS's signing key is enrolled"
		}
		p.Blockers = append(p.Blockers, "Secure Boot is enabled and "+key+": the kernel would refuse the new module (\"Key was rejected by service\")")
	}

	running := map[string]bool{}
	interrupt := map[int]bool{}
	var busy []string
	drmHeld := false
	for _, h := range obs.Kernel.Holders {
		if h.Unit != "" {
			running[h.Unit] = true
			continue
		}
		if len(h.Devices) == 0 {
			continue
		}
		what := fmt.Sprintf("%s (pid %d) holds %s (%s)", h.Command, h.PID, h.Module, strings.Join(h.Devices, ", "))
		if h.Module == "nvidia_drm" {
			drmHeld = true
			p.Blockers = append(p.Blockers, "the display server "+what+": gpuenv does not stop a display")
			continue
		}
		if o.Interrupt {
			if !interrupt[h.PID] {
				interrupt[h.PID] = true
				p.Interrupt = append(p.Interrupt, Process{PID: h.PID, Command: h.Command, What: what})
			}
			continue
		}
		busy = append(busy, what)
	}
	for _, d := range obs.NVML.Devices {
		for _, proc := range d.Processes {
			pid := int(proc.PID)
			if interrupt[pid] || UnitOf(commOf(proc.Name)) != "" || holds(obs, pid) {
				continue
			}
			what := fmt.Sprintf("%s (pid %d) runs on GPU %d", nameOr(proc.Name), pid, d.Index)
			if o.Interrupt {
				interrupt[pid] = true
				p.Interrupt = append(p.Interrupt, Process{PID: pid, Command: commOf(proc.Name), What: what})
				continue
			}
			busy = append(busy, what)
		}
	}
	if len(busy) > 0 {
		p.Blockers = append(p.Blockers, "GPU processes run: "+strings.Join(busy, "; ")+" (--interrupt-gpu-processes stops them)")
	}
	if m, ok := loaded["nvidia_drm"]; ok && !drmHeld && m.RefCount > len(m.UsedBy) {
		p.Blockers = append(p.Blockers, fmt.Sprintf("%s is in use (reference count %d) by no process gpuenv can see: a console on its framebuffer (nvidia_drm.fbdev=1) or a display it may not look into", m.Name, m.RefCount))
	}
	for _, s := range Services {
		if running[s.Unit] {
			p.Stop = append(p.Stop, s.Unit)
		}
	}
	if len(p.Stop) > 0 && obs.Init.Live && !obs.Init.Systemd {
		p.Blockers = append(p.Blockers, fmt.Sprintf("%s must be stopped and started again, and systemd is not process 1 here", strings.Join(p.Stop, ", ")))
	}
	return p
}

// unloadOrder lists the loaded nvidia modules so that each comes before
// the modules it uses, as /proc/modules' "used by" column says; Modules'
// order breaks ties.
func unloadOrder(loaded map[string]facts.LoadedModule) []string {
	var left []string
	for _, m := range Modules {
		if _, ok := loaded[m]; ok {
			left = append(left, m)
		}
	}
	var out []string
	for len(left) > 0 {
		progress := false
		for i, m := range left {
			free := true
			for _, u := range loaded[m].UsedBy {
				if u = Role(u); slices.Contains(left, u) && u != m {
					free = false
				}
			}
			if free {
				out = append(out, m)
				left = slices.Delete(left, i, i+1)
				progress = true
				break
			}
		}
		if !progress {
			// A cycle the kernel cannot have: keep the fixed order.
			out = append(out, left...)
			break
		}
	}
	return out
}

func holds(obs *facts.Observation, pid int) bool {
	return slices.ContainsFunc(obs.Kernel.Holders, func(h facts.Holder) bool { return h.PID == pid })
}

// commOf is the command name of a path NVML reports ("/usr/bin/python3"
// is "python3"), cut as the kernel cuts it.
func commOf(name string) string {
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	if len(name) > 15 {
		name = name[:15]
	}
	if name == "" {
		return "?"
	}
	return name
}

func nameOr(s string) string {
	if s == "" {
		return "?"
	}
	return s
}

// Commands are the reload as a person would type it, one command a line:
// what gpuenv runs for a driver step, for a mismatch that no step fixes
// (the libraries were upgraded under the loaded module).
func (p *Plan) Commands() []string {
	var out []string
	for _, u := range p.Stop {
		out = append(out, "systemctl stop "+u)
	}
	for _, proc := range p.Interrupt {
		out = append(out, fmt.Sprintf("kill %d", proc.PID))
	}
	if len(p.Unload) > 0 {
		out = append(out, "rmmod "+strings.Join(p.Unload, " "), "modprobe -a "+strings.Join(p.Load, " "))
	}
	for _, u := range slices.Backward(p.Stop) {
		out = append(out, "systemctl start "+u)
	}
	return out
}

// Verdict says in a sentence whether a reload fixes a driver/library
// mismatch now, and how.
func (p *Plan) Verdict() string {
	if !p.Loaded {
		return "No nvidia module is loaded: the installed one loads when a program first asks."
	}
	if p.Possible() {
		return "A reload fixes it now, without a reboot: nothing else holds the modules. Run: " + strings.Join(p.Commands(), "; ") + "."
	}
	return "A reload cannot fix it now, since " + p.Why() + ": reboot, or reload once that is no longer so."
}
