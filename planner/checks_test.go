package planner

import (
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/spec"
)

func rng(line int) hcl.Range {
	return hcl.Range{Filename: "gpuenv.hcl", Start: hcl.Pos{Line: line, Column: 1}, End: hcl.Pos{Line: line, Column: 10}}
}

func gpuFacts(n int) *facts.Observation {
	obs := &facts.Observation{NVML: facts.NVML{Status: "ok"}}
	for i := range n {
		obs.PCI = append(obs.PCI, facts.PCIDevice{Address: "0000:1" + string(rune('0'+i)) + ":00.0", VendorID: 0x10de})
		obs.NVML.Devices = append(obs.NVML.Devices, facts.GPUDevice{Index: i, UUID: "GPU-" + string(rune('a'+i))})
	}
	return obs
}

func driverSpec() *spec.Spec {
	return &spec.Spec{Driver: &spec.Driver{Block: spec.Block{DefRange: rng(3)}}}
}

func TestChecks(t *testing.T) {
	aptInstall := func(addr string, pins ...string) plan.Step {
		s := plan.Step{Address: addr, Action: plan.Create}
		op := &plan.PackagesOp{Manager: "apt"}
		for _, p := range pins {
			op.Install = append(op.Install, plan.PackagePin{Name: p, Version: "1"})
		}
		s.Operations = []plan.Operation{{Kind: plan.OpPackages, Packages: op}}
		return s
	}
	tests := []struct {
		name   string
		in     checkInput
		check  string // the warning expected, "" for none
		detail []string
	}{
		{
			name:   "Secure Boot with a DKMS package",
			in:     checkInput{spec: &spec.Spec{}, obs: &facts.Observation{Kernel: facts.Kernel{SecureBoot: "enabled"}}, steps: []plan.Step{aptInstall("driver", "nvidia-driver-550", "nvidia-dkms-550")}},
			check:  CheckSecureBootDKMS,
			detail: []string{"step driver builds the nvidia module with DKMS (nvidia-dkms-550)"},
		},
		{
			name:   "Secure Boot with a step flagged as building the module",
			in:     checkInput{spec: &spec.Spec{}, obs: &facts.Observation{Kernel: facts.Kernel{SecureBoot: "enabled"}}, steps: []plan.Step{{Address: "driver", Action: plan.Create, Flags: plan.Flags{BuildsKernelModule: true}}}},
			check:  CheckSecureBootDKMS,
			detail: []string{"step driver builds the nvidia module with DKMS"},
		},
		{
			name: "Secure Boot with a prebuilt module",
			in:   checkInput{spec: &spec.Spec{}, obs: &facts.Observation{Kernel: facts.Kernel{SecureBoot: "enabled"}}, steps: []plan.Step{aptInstall("driver", "linux-modules-nvidia-550-server-generic")}},
		},
		{
			name: "Secure Boot off",
			in:   checkInput{spec: &spec.Spec{}, obs: &facts.Observation{Kernel: facts.Kernel{SecureBoot: "disabled"}}, steps: []plan.Step{aptInstall("driver", "nvidia-dkms-550")}},
		},
		{
			name: "an unfinished apply",
			in: checkInput{spec: &spec.Spec{}, obs: &facts.Observation{}, statusPath: "/var/lib/gpuenv/status.json",
				status: &plan.ApplyStatus{Unfinished: true, Generation: 4, Command: "apply", PID: 99, Started: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}},
			check:  CheckUnfinishedApply,
			detail: []string{"/var/lib/gpuenv/status.json: generation 4 (apply) is unfinished: gpuenv apply, pid 99, started 2026-01-02 03:04:05 UTC", "gpuenv rollback"},
		},
		{
			name: "an unfinished rollback, as apply writes the file",
			in: checkInput{spec: &spec.Spec{}, obs: &facts.Observation{}, statusPath: "/var/lib/gpuenv/status.json",
				status: &plan.ApplyStatus{Unfinished: true, Generation: 5, Kind: "rollback", Command: "rollback"}},
			check:  CheckUnfinishedApply,
			detail: []string{"An earlier rollback did not finish", "generation 5 (rollback) is unfinished: gpuenv rollback"},
		},
		{
			name: "a finished apply",
			in:   checkInput{spec: &spec.Spec{}, obs: &facts.Observation{}, status: &plan.ApplyStatus{Generation: 4}},
		},
		{
			name: "unattended upgrades and an unheld driver",
			in: checkInput{spec: &spec.Spec{}, obs: &facts.Observation{Packages: facts.Packages{Packages: []facts.Package{
				{Name: "libnvidia-compute-535", Version: "535.161.07-0ubuntu1", State: "installed", Want: "install"},
				{Name: "nvidia-cuda-toolkit", Version: "11.5.1-1ubuntu1", State: "installed", Want: "install"},
				{Name: "nvidia-driver-535", Version: "535.161.07-0ubuntu1", State: "installed", Want: "hold", Hold: true},
				{Name: "unattended-upgrades", Version: "2.8ubuntu1", State: "installed", Want: "install"},
			}}}},
			check:  CheckUnattendedUpgrades,
			detail: []string{"unattended-upgrades 2.8ubuntu1 is installed", "not held after this plan: libnvidia-compute-535"},
		},
		{
			name: "unattended upgrades, and the plan holds what it installs",
			in: checkInput{spec: &spec.Spec{}, obs: &facts.Observation{Packages: facts.Packages{Packages: []facts.Package{
				{Name: "unattended-upgrades", Version: "2.8ubuntu1", State: "installed", Want: "install"},
				{Name: "nvidia-driver-535", Version: "535.161.07-0ubuntu1", State: "installed", Want: "install"},
			}}}, steps: []plan.Step{{Address: "driver", Action: plan.Replace, Operations: []plan.Operation{{Kind: plan.OpPackages, Packages: &plan.PackagesOp{
				Manager: "apt", Remove: []string{"nvidia-driver-535"},
				Install: []plan.PackagePin{{Name: "nvidia-driver-550", Version: "1"}}, Hold: []string{"nvidia-driver-550"},
			}}}}}},
		},
		{
			name: "unattended upgrades, and the plan installs an unheld driver",
			in: checkInput{spec: &spec.Spec{}, obs: &facts.Observation{Packages: facts.Packages{Packages: []facts.Package{
				{Name: "unattended-upgrades", Version: "2.8ubuntu1", State: "installed", Want: "install"},
			}}}, steps: []plan.Step{aptInstall("driver", "nvidia-driver-550", "cuda-toolkit-12-4")}},
			check:  CheckUnattendedUpgrades,
			detail: []string{"not held after this plan: nvidia-driver-550"},
		},
		{
			name: "no unattended upgrades",
			in: checkInput{spec: &spec.Spec{}, obs: &facts.Observation{Packages: facts.Packages{Packages: []facts.Package{
				{Name: "nvidia-driver-535", Version: "535.161.07-0ubuntu1", State: "installed", Want: "install"},
			}}}},
		},
		{
			name: "GPU processes and a module reload",
			in: checkInput{spec: &spec.Spec{}, obs: func() *facts.Observation {
				o := gpuFacts(2)
				o.NVML.Devices[1].Processes = []facts.GPUProcess{{PID: 4242, Name: "python3", UsedMemory: 3 << 30}}
				return o
			}(), steps: []plan.Step{{Address: "driver", Action: plan.Update, Flags: plan.Flags{NeedsModuleReload: true, InterruptsGPUProcesses: true}}}},
			check:  CheckGPUProcesses,
			detail: []string{"GPU 1 (GPU-b): pid 4242 python3, 3.0 GiB", "driver must unload"},
		},
		{
			name: "GPU processes, nothing interrupts them",
			in: checkInput{spec: &spec.Spec{}, obs: func() *facts.Observation {
				o := gpuFacts(1)
				o.NVML.Devices[0].Processes = []facts.GPUProcess{{PID: 1, UsedMemory: 1 << 20}}
				return o
			}(), steps: []plan.Step{{Address: "group.video", Action: plan.Update}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := runChecks(&tt.in)
			if tt.check == "" {
				if len(got) > 0 {
					t.Fatalf("want no warning, got %+v", got)
				}
				return
			}
			if len(got) != 1 || got[0].ID != tt.check {
				t.Fatalf("want one %s warning, got %+v", tt.check, got)
			}
			text := got[0].Summary + "\n" + got[0].Detail + "\n" + strings.Join(got[0].Evidence, "\n")
			for _, d := range tt.detail {
				if !strings.Contains(text, d) {
					t.Errorf("warning lacks %q:\n%s", d, text)
				}
			}
		})
	}
}

func TestIsDriverPackage(t *testing.T) {
	for name, want := range map[string]bool{
		"nvidia-driver-550":        true,
		"libnvidia-compute-550":    true,
		"nvidia-kernel-dkms":       true,
		"cuda-drivers-550":         true,
		"kmod-nvidia-open-dkms":    true,
		"libcuda1":                 true,
		"nvidia-cuda-toolkit":      false,
		"nvidia-container-toolkit": false,
		"nvidia-cudnn":             false,
		"cuda-toolkit-12-4":        false,
		// Each kernel's signed modules move with the driver; their meta
		// package follows the kernel to new releases and leaves the
		// running kernel's modules alone.
		"linux-modules-nvidia-550-open-6.8.0-45-generic":  true,
		"linux-objects-nvidia-550-open-6.8.0-45-generic":  true,
		"linux-signatures-nvidia-6.8.0-45-generic":        true,
		"linux-modules-nvidia-550-generic":                false,
		"linux-modules-nvidia-550-open-generic-hwe-22.04": false,
		"python3-torch": false,
	} {
		if got := isDriverPackage(name); got != want {
			t.Errorf("isDriverPackage(%q) = %v, want %v", name, got, want)
		}
	}
}
