package reload_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/reload"
)

// running is a running system with the nvidia modules loaded as
// /proc/modules lists them after nvidia_drm and nvidia_uvm (and, with
// peermem, nvidia_peermem) were loaded.
func running(peermem bool) *facts.Observation {
	nvidiaUsers := []string{"nvidia_uvm", "nvidia_modeset"}
	mods := []facts.LoadedModule{
		{Name: "nvidia_drm", RefCount: 0},
		{Name: "nvidia_modeset", RefCount: 1, UsedBy: []string{"nvidia_drm"}},
		{Name: "nvidia_uvm", RefCount: 0},
	}
	if peermem {
		mods = append(mods, facts.LoadedModule{Name: "nvidia_peermem"})
		nvidiaUsers = append(nvidiaUsers, "nvidia_peermem")
	}
	mods = append(mods, facts.LoadedModule{Name: "nvidia", RefCount: len(nvidiaUsers) + 2, UsedBy: nvidiaUsers})
	return &facts.Observation{
		Root:    "/",
		Init:    facts.Init{Live: true, PID1: "systemd", Systemd: true},
		Context: facts.RuntimeContext{Kind: "host"},
		Kernel: facts.Kernel{Loaded: mods, Holders: []facts.Holder{
			{PID: 900, Command: "nvidia-persiste", Devices: []string{"/dev/nvidia0", "/dev/nvidiactl"}, Module: "nvidia", Unit: "nvidia-persistenced.service"},
		}},
	}
}

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name   string
		obs    func() *facts.Observation
		opts   reload.Options
		unload []string
		stop   []string
		// blockers are substrings of Why, none when the reload is possible.
		blockers []string
	}{
		{name: "idle server", obs: func() *facts.Observation { return running(false) },
			unload: []string{"nvidia_uvm", "nvidia_drm", "nvidia_modeset", "nvidia"}, stop: []string{"nvidia-persistenced.service"}},
		{name: "peermem goes before nvidia", obs: func() *facts.Observation { return running(true) },
			unload: []string{"nvidia_peermem", "nvidia_uvm", "nvidia_drm", "nvidia_modeset", "nvidia"}, stop: []string{"nvidia-persistenced.service"}},
		{name: "another root", obs: func() *facts.Observation {
			o := running(false)
			o.Root, o.Init.Live, o.Init.Systemd = "/srv/image", false, false
			return o
		}, blockers: []string{"the root /srv/image is not the running system"}},
		{name: "chroot", obs: func() *facts.Observation {
			o := running(false)
			o.Init.Chroot = "yes"
			return o
		}, blockers: []string{"gpuenv runs in a chroot"}},
		{name: "process 1 hidden", obs: func() *facts.Observation {
			o := running(false)
			o.Init.Chroot = "unknown"
			return o
		}, blockers: []string{"gpuenv cannot tell whether it runs in a chroot"}},
		{name: "container", obs: func() *facts.Observation {
			o := running(false)
			o.Context.Kind = "container"
			return o
		}, blockers: []string{"container"}},
		{name: "training job", obs: func() *facts.Observation {
			o := running(false)
			o.NVML.Devices = []facts.GPUDevice{{Index: 0, Processes: []facts.GPUProcess{{PID: 4242, Name: "/usr/bin/python3"}}}}
			return o
		}, blockers: []string{"/usr/bin/python3 (pid 4242) runs on GPU 0", "--interrupt-gpu-processes"}},
		{name: "training job, interrupted", opts: reload.Options{Interrupt: true}, obs: func() *facts.Observation {
			o := running(false)
			o.NVML.Devices = []facts.GPUDevice{{Index: 0, Processes: []facts.GPUProcess{{PID: 4242, Name: "/usr/bin/python3"}}}}
			return o
		}, unload: []string{"nvidia_uvm", "nvidia_drm", "nvidia_modeset", "nvidia"}, stop: []string{"nvidia-persistenced.service"}},
		{name: "display server", opts: reload.Options{Interrupt: true}, obs: func() *facts.Observation {
			o := running(false)
			o.Kernel.Holders = append(o.Kernel.Holders, facts.Holder{PID: 1500, Command: "Xorg", Devices: []string{"/dev/dri/card1"}, Module: "nvidia_drm"})
			return o
		}, blockers: []string{"the display server Xorg (pid 1500) holds nvidia_drm (/dev/dri/card1)"}},
		{name: "framebuffer console", obs: func() *facts.Observation {
			o := running(false)
			o.Kernel.Loaded[0].RefCount = 1
			return o
		}, blockers: []string{"nvidia_drm is in use (reference count 1)"}},
		{name: "Secure Boot, key not enrolled", opts: reload.Options{BuildsModule: true}, obs: func() *facts.Observation {
			o := running(false)
			o.Kernel.SecureBoot, o.Kernel.SigningKey = "enabled", "not_enrolled"
			return o
		}, blockers: []string{"DKMS's signing key is not enrolled", "Key was rejected by service"}},
		{name: "Secure Boot, key enrolled", opts: reload.Options{BuildsModule: true}, obs: func() *facts.Observation {
			o := running(false)
			o.Kernel.SecureBoot, o.Kernel.SigningKey = "enabled", "enrolled"
			return o
		}, unload: []string{"nvidia_uvm", "nvidia_drm", "nvidia_modeset", "nvidia"}, stop: []string{"nvidia-persistenced.service"}},
		{name: "Secure Boot, prebuilt signed module", obs: func() *facts.Observation {
			o := running(false)
			o.Kernel.SecureBoot = "enabled"
			return o
		}, unload: []string{"nvidia_uvm", "nvidia_drm", "nvidia_modeset", "nvidia"}, stop: []string{"nvidia-persistenced.service"}},
		{name: "services without systemd", obs: func() *facts.Observation {
			o := running(false)
			o.Init.Systemd, o.Init.PID1 = false, "tini"
			return o
		}, blockers: []string{"systemd is not process 1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := reload.Decide(tc.obs(), tc.opts)
			if len(tc.blockers) == 0 {
				if !p.Possible() {
					t.Fatalf("not possible: %s", p.Why())
				}
				if !slices.Equal(p.Unload, tc.unload) || !slices.Equal(p.Stop, tc.stop) {
					t.Errorf("unload %v stop %v, want %v %v", p.Unload, p.Stop, tc.unload, tc.stop)
				}
				load := slices.Clone(tc.unload)
				slices.Reverse(load)
				if !slices.Equal(p.Load, load) {
					t.Errorf("load %v, want %v", p.Load, load)
				}
				return
			}
			if p.Possible() {
				t.Fatal("possible")
			}
			for _, b := range tc.blockers {
				if !strings.Contains(p.Why(), b) {
					t.Errorf("why %q lacks %q", p.Why(), b)
				}
			}
		})
	}
}

// Debian's build names the modules nvidia_current…: the same reload,
// under their names.
func TestDebianModuleNames(t *testing.T) {
	o := running(false)
	for i, m := range o.Kernel.Loaded {
		o.Kernel.Loaded[i].Name = strings.Replace(m.Name, "nvidia", "nvidia_current", 1)
		for j, u := range m.UsedBy {
			o.Kernel.Loaded[i].UsedBy[j] = strings.Replace(u, "nvidia", "nvidia_current", 1)
		}
	}
	p := reload.Decide(o, reload.Options{})
	want := []string{"nvidia_current_uvm", "nvidia_current_drm", "nvidia_current_modeset", "nvidia_current"}
	if !p.Possible() || !slices.Equal(p.Unload, want) {
		t.Errorf("possible %v (%s), unload %v, want %v", p.Possible(), p.Why(), p.Unload, want)
	}
}

func TestNothingLoaded(t *testing.T) {
	o := running(false)
	o.Kernel.Loaded = nil
	p := reload.Decide(o, reload.Options{})
	if p.Loaded || p.Possible() || !strings.Contains(p.Verdict(), "No nvidia module is loaded") {
		t.Errorf("%+v: %s", p, p.Verdict())
	}
}

func TestCommands(t *testing.T) {
	p := reload.Decide(running(false), reload.Options{})
	want := []string{
		"systemctl stop nvidia-persistenced.service",
		"rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia",
		"modprobe -a nvidia nvidia_modeset nvidia_drm nvidia_uvm",
		"systemctl start nvidia-persistenced.service",
	}
	if !slices.Equal(p.Commands(), want) {
		t.Errorf("commands:\n%s\nwant:\n%s", strings.Join(p.Commands(), "\n"), strings.Join(want, "\n"))
	}
	if v := p.Verdict(); !strings.HasPrefix(v, "A reload fixes it now") || !strings.Contains(v, want[1]) {
		t.Errorf("verdict: %s", v)
	}
}
