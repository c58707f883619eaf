package devices

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/spec"
)

// MIGBootUnit creates the MIG layout again at every boot: GPU instances
// do not survive a reboot, and NVIDIA's own tools leave re-creating them
// to whoever made them (NVIDIA/k8s-device-plugin#225, #343).
const MIGBootUnit = "gpuenv-mig.service"

const (
	// MIGBootAddress is the address of the step that writes MIGBootUnit.
	MIGBootAddress = "device.mig_boot"
	// MIGBootUnitPath is where it is written.
	MIGBootUnitPath = "/etc/systemd/system/" + MIGBootUnit
	migBootWants    = "/etc/systemd/system/multi-user.target.wants/" + MIGBootUnit
	// MIGRestoreCommand is the program the unit runs: gpuenv itself,
	// where its packages install it.
	MIGRestoreCommand = "/usr/bin/gpuenv"
)

// migBefore are the units that hand GPUs to programs: the container
// runtimes, the CDI spec's refresh, and the schedulers. The layout is
// made before them, so that none starts with the GPUs not yet divided.
var migBefore = []string{
	"nvidia-container-toolkit.service", "nvidia-cdi-refresh.service",
	"docker.service", "containerd.service", "crio.service",
	"kubelet.service", "slurmd.service",
}

// ObserveMIGUnit reports MIGBootUnit as ObserveUnit reports the compute
// modes' unit.
func ObserveMIGUnit(h *host.Host) facts.Unit {
	u := facts.Unit{Name: MIGBootUnit}
	if _, err := h.Lstat(MIGBootUnitPath); err == nil {
		sum, _ := h.SHA256(MIGBootUnitPath)
		u.File = &facts.FileDigest{Path: MIGBootUnitPath, SHA256: sum}
		if data, err := h.ReadFile(MIGBootUnitPath); err == nil {
			u.MIGLayout = unitLayout(string(data))
		}
	}
	_, err := h.Lstat(migBootWants)
	u.Enabled = err == nil
	return u
}

// unitLayout reads the layout back from the unit's command lines; lines
// it does not recognise are left out, and so are instances it cannot
// read, so that doctor compares only what the unit would make.
func unitLayout(content string) map[string][]string {
	out := map[string][]string{}
	for _, l := range strings.Split(content, "\n") {
		args, ok := strings.CutPrefix(l, "ExecStart="+MIGRestoreCommand+" mig-restore --gpu ")
		if !ok {
			continue
		}
		f := strings.Fields(args)
		if len(f) == 0 || !spec.IsGPUUUID(f[0]) {
			continue
		}
		layout := []string{}
		for i := 1; i+1 < len(f); i += 2 {
			if f[i] == "--instance" {
				if _, err := ParseMIGInstanceArg(f[i+1]); err == nil {
					layout = append(layout, f[i+1])
				}
			}
		}
		out[f[0]] = layout
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// MIGInstanceArg writes an instance for the unit's command line:
// profile id, first memory slice, number of memory slices, then the
// compute instances' slices, joined by ":" and "+" (2:4:4:3 is a 3g
// instance at slice 4 with one compute instance of its three slices).
// Numbers only: no spec text reaches the unit.
func MIGInstanceArg(in plan.MIGInstance) string {
	c := make([]string, len(in.Compute))
	for i, n := range in.Compute {
		c[i] = fmt.Sprint(n)
	}
	return fmt.Sprintf("%d:%d:%d:%s", in.ProfileID, in.Start, in.Size, strings.Join(c, "+"))
}

// migBootUnit is the unit's content: one ExecStart= per GPU whose mig
// block enables MIG, in the order of the GPUs' indices, each giving the
// mode and the layout the GPU has once the plan is applied.
func migBootUnit(devs []facts.GPUDevice, gpus map[int]*migGPU) string {
	devs = slices.Clone(devs)
	slices.SortFunc(devs, func(a, b facts.GPUDevice) int { return a.Index - b.Index })
	var exec []string
	for _, d := range devs {
		g := gpus[d.Index]
		if g == nil || g.mode != string(spec.MIGEnabled) {
			continue
		}
		args := []string{MIGRestoreCommand, "mig-restore", "--gpu", d.UUID}
		for _, in := range g.final {
			args = append(args, "--instance", MIGInstanceArg(in))
		}
		exec = append(exec, "ExecStart="+strings.Join(args, " ")+"\n")
	}
	if len(exec) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("# Written by gpuenv from the spec's mig blocks. MIG instances do not survive\n")
	b.WriteString("# a reboot, so gpuenv makes the layout again at each boot, before the container\n")
	b.WriteString("# runtimes and schedulers start.\n")
	b.WriteString("[Unit]\n")
	b.WriteString("Description=Create the MIG layout (gpuenv)\n")
	b.WriteString("After=nvidia-persistenced.service systemd-modules-load.service\n")
	b.WriteString("Before=" + strings.Join(migBefore, " ") + "\n")
	b.WriteString("\n[Service]\n")
	b.WriteString("Type=oneshot\n")
	b.WriteString("RemainAfterExit=yes\n")
	for _, l := range exec {
		b.WriteString(l)
	}
	b.WriteString("\n[Install]\n")
	b.WriteString("WantedBy=multi-user.target\n")
	return b.String()
}

// migBootStep writes and enables MIGBootUnit, or removes it once no mig
// block enables MIG. Planned only when the spec has mig blocks and the
// unit was observed.
func migBootStep(req *planner.Request, devs []facts.GPUDevice, gpus map[int]*migGPU, migSteps []string) *plan.Step {
	if len(req.Spec.MIG) == 0 || len(devs) == 0 {
		return nil
	}
	unit := observedUnit(req.Facts.Units, MIGBootUnit)
	if unit == nil {
		return nil
	}
	return unitStep(req, unit, unitFile{
		name:      MIGBootUnit,
		path:      MIGBootUnitPath,
		address:   MIGBootAddress,
		dependsOn: append([]string{"driver"}, migSteps...),
		content:   migBootUnit(devs, gpus),
		removed:   fmt.Sprintf("No mig block enables MIG, so %s, which made the layout at boot, is disabled and removed.", MIGBootUnit),
		kept: func(does string) string {
			return fmt.Sprintf("MIG instances do not survive a reboot, so gpuenv %s: at each boot, before the container runtimes and schedulers, it runs gpuenv mig-restore to set the MIG mode and create the layout again.", does)
		},
	})
}

// ParseMIGInstanceArg reads what MIGInstanceArg wrote.
func ParseMIGInstanceArg(s string) (host.MIGInstance, error) {
	parts := strings.Split(s, ":")
	bad := fmt.Errorf("%q is not a MIG instance (PROFILE:START:SIZE:SLICES+…)", s)
	if len(parts) != 4 {
		return host.MIGInstance{}, bad
	}
	var n [3]int
	for i := range n {
		v, err := strconv.Atoi(parts[i])
		if err != nil || v < 0 || v > 14 {
			return host.MIGInstance{}, bad
		}
		n[i] = v
	}
	in := host.MIGInstance{ProfileID: n[0], Start: uint32(n[1]), Size: uint32(n[2])}
	if in.Size == 0 || in.Start+in.Size > 8 {
		return host.MIGInstance{}, bad
	}
	for _, c := range strings.Split(parts[3], "+") {
		v, err := strconv.Atoi(c)
		if err != nil || v < 1 || v > 8 {
			return host.MIGInstance{}, bad
		}
		in.Compute = append(in.Compute, v)
	}
	return in, nil
}

// MIGRestorer is what RestoreMIG needs of NVML.
type MIGRestorer interface {
	SetMIGMode(uuid, mode string) (activated bool, err error)
	MIGMode(uuid string) (current, pending string, err error)
	CreateGPUInstance(uuid string, in host.MIGInstance) error
}

// RestoreMIG is what the boot unit runs for one GPU: MIG mode on, then
// each instance, made where it was or completed. Instances already there
// are left alone, so that running it twice changes nothing.
func RestoreMIG(n MIGRestorer, uuid string, instances []host.MIGInstance) error {
	cur, _, err := n.MIGMode(uuid)
	if err != nil {
		return err
	}
	if cur != string(spec.MIGEnabled) {
		activated, err := n.SetMIGMode(uuid, string(spec.MIGEnabled))
		if err != nil {
			return err
		}
		if !activated {
			return fmt.Errorf("GPU %s: MIG mode is pending a GPU reset, which NVML could not do (a process uses the GPU); the layout is made at the next boot", uuid)
		}
	}
	for _, in := range instances {
		if err := n.CreateGPUInstance(uuid, in); err != nil {
			return err
		}
	}
	return nil
}
