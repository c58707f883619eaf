package doctor_test

import (
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner/doctor"
	"github.com/gpuenv/gpuenv/planner/facts"
)

// A driver/library mismatch on the running system: doctor says whether
// reloading the modules fixes it now, with the commands, or why not.
func TestMismatchSaysWhetherAReloadFixesIt(t *testing.T) {
	mismatch := func() *facts.Observation {
		return &facts.Observation{
			Root:    "/",
			Init:    facts.Init{Live: true, PID1: "systemd", Systemd: true},
			Context: facts.RuntimeContext{Kind: "host"},
			Kernel: facts.Kernel{Loaded: []facts.LoadedModule{
				{Name: "nvidia_uvm"}, {Name: "nvidia", RefCount: 1, UsedBy: []string{"nvidia_uvm"}},
			}},
			NVML:   facts.NVML{Status: "driver_library_mismatch"},
			Driver: facts.Driver{ModuleVersion: "550.54.15", ModuleVersionFrom: "/proc/driver/nvidia/version", LibraryVersion: "550.127.05"},
		}
	}
	fix := func(obs *facts.Observation) *doctor.Fix {
		t.Helper()
		for _, c := range doctor.Run(doctor.Input{Obs: obs}).Checks {
			if c.ID == "nvml.init" {
				if c.Fix == nil {
					t.Fatal("nvml.init has no fix")
				}
				return c.Fix
			}
		}
		t.Fatal("no nvml.init check")
		return nil
	}

	f := fix(mismatch())
	if !strings.HasPrefix(f.Text, "Reload the modules now") || strings.Join(f.Commands, "\n") != "rmmod nvidia_uvm nvidia\nmodprobe -a nvidia nvidia_uvm" {
		t.Errorf("idle host: %q %q", f.Text, f.Commands)
	}

	busy := mismatch()
	busy.Kernel.Holders = []facts.Holder{{PID: 77, Command: "python3", Devices: []string{"/dev/nvidia-uvm"}, Module: "nvidia_uvm"}}
	f = fix(busy)
	if !strings.HasPrefix(f.Text, "Reboot: a reload cannot fix it now, since GPU processes run: python3 (pid 77) holds nvidia_uvm") {
		t.Errorf("busy host: %q", f.Text)
	}
}
